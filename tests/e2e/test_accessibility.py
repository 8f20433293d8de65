"""Accessibility (issue 13, loop 9), in a real browser with the demo data: axe-core on every
main page at both widths, the narrow-screen menu by keyboard, and pages that fit 390 px."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from actions.models import ActionTransaction
from memory.models import Record
from tests.e2e.conftest import NARROW, WIDE, accessibility_violations, login, screenshot
from tests.e2e.test_overview_journey import demo  # noqa: F401  (fixture)

PAGES = [
    "/",
    "/memory/",
    "/memory/scope/acme:alice:apollo/",
    "/memory/review/",
    "/actions/",
    "/actions/attention/",
    "/actions/history/",
    "/audit/",
    "/audit/checkpoints/",
    "/access/tokens/",
    "/access/people/",
    "/webhooks/",
    "/search/?q=acme",
    "/api/docs/",
    "/audit/exports/",
    "/maintenance/",
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_main_page_passes_axe_at_both_widths(page, demo, scheme):  # noqa: F811
    # Both colour schemes (issue 33 item 10): the pages follow prefers-color-scheme.
    page.emulate_media(color_scheme=scheme)
    login(page, "admin", demo)
    plan = ActionTransaction.objects.order_by("created_at").first()
    record = Record.objects.filter(scope="acme:alice:*").order_by("id").first()
    person = get_user_model().objects.get(username="admin")
    found: list[str] = []
    extra = [
        f"/actions/{plan.pk}/",
        f"/memory/records/{record.record_id}/history/",
        f"/access/people/{person.pk}/",
    ]
    for path in [*PAGES, *extra]:
        for size in (WIDE, NARROW):
            page.set_viewport_size(size)
            page.goto(path)
            if path == "/api/docs/":
                page.locator(".opblock").first.wait_for()
                page.locator(".opblock-summary-control").first.click()  # one operation open
                page.locator(".opblock-body").first.wait_for()
            found += accessibility_violations(page)
    assert not found, "\n".join(found)


def test_the_narrow_menu_opens_by_keyboard_and_reaches_log_out(page, demo):  # noqa: F811
    login(page, "admin", demo)
    page.set_viewport_size(NARROW)
    page.goto("/")
    logout = page.get_by_role("button", name="Log out")
    assert not logout.is_visible()
    # Tab from the skip link reaches the menu toggle, a named control
    toggle = page.get_by_role("checkbox", name="Menu: navigation, search and log out")
    for _ in range(5):
        page.keyboard.press("Tab")
        if toggle.evaluate("el => el === document.activeElement"):
            break
    assert toggle.evaluate("el => el === document.activeElement")
    page.keyboard.press("Space")
    assert logout.is_visible()
    # and Tab then walks through the links to Log out
    for _ in range(20):
        page.keyboard.press("Tab")
        if logout.evaluate("el => el === document.activeElement"):
            break
    assert logout.evaluate("el => el === document.activeElement")
    screenshot(page, "narrow-menu-open", full_page=False)


@pytest.mark.parametrize("path", ["plan", "/access/tokens/"])
def test_the_plan_page_and_the_token_table_fit_390_px(page, demo, path):  # noqa: F811
    login(page, "admin", demo)
    if path == "plan":
        path = f"/actions/{ActionTransaction.objects.order_by('created_at').first().pk}/"
    page.set_viewport_size(NARROW)
    page.goto(path)
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= NARROW["width"], f"{path} is {width}px wide at 390"
