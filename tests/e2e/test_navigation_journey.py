"""Navigation and layout at both widths (issue 33 item 8): the top bar fits one row at
1280 px with the settings-type pages under one keyboard-operable "Settings" menu, audit
event pages do not scroll sideways at 390 px, and landmarks are uniquely named."""

from __future__ import annotations

from audit.models import AuditEvent
from tests.e2e.conftest import AXE_SOURCE, NARROW, WIDE, login, screenshot, settings_link
from tests.e2e.test_overview_journey import demo  # noqa: F401  (fixture)

LANDMARK_RULES = """async () => {
  const result = await axe.run(document, {runOnly: ["landmark-unique", "landmark-no-duplicate-banner",
    "landmark-no-duplicate-contentinfo", "landmark-no-duplicate-main"]});
  return result.violations.map((v) => v.id + " at " + v.nodes.map((n) => n.target.join(" ")).join(", "));
}"""


def _row_spread(page) -> float:
    """How far apart (px) the vertical centres of the top bar's items are: small when one row."""
    centres = page.evaluate(
        "() => [...document.querySelectorAll('.topbar > .brand, .mainnav > a, .mainnav > details,"
        " .topsearch, .usermenu')].map((el) => { const r = el.getBoundingClientRect();"
        " return (r.top + r.bottom) / 2; })"
    )
    return max(centres) - min(centres)


def test_the_top_bar_is_one_row_and_settings_open_by_keyboard(page, demo):  # noqa: F811
    # Given the demo admin, who can open every page, on the overview at 1280 px
    login(page, "admin", demo)
    page.set_viewport_size(WIDE)
    page.goto("/")
    # Then the whole top bar sits on one row
    assert _row_spread(page) < 12, _row_spread(page)
    # And the settings-type pages are not in the row but in the closed Settings menu
    nav = page.get_by_role("navigation", name="Main")
    people = nav.get_by_role("link", name="People", exact=True)
    assert people.count() == 0  # hidden while the menu is closed
    # When they Tab to "Settings" and press Enter
    summary = nav.locator("details.navmenu > summary")
    for _ in range(15):
        page.keyboard.press("Tab")
        if summary.evaluate("el => el === document.activeElement"):
            break
    assert summary.evaluate("el => el === document.activeElement")
    page.keyboard.press("Enter")
    # Then the menu lists every settings page, and Tab reaches the first of them
    for name in ("People", "API tokens", "Webhooks", "Exports", "Maintenance", "API reference"):
        assert nav.get_by_role("link", name=name, exact=True).is_visible(), name
    screenshot(page, "navigation-settings-open", full_page=False)
    page.keyboard.press("Tab")
    assert people.evaluate("el => el === document.activeElement")
    page.keyboard.press("Enter")
    page.wait_for_url("**/access/people/")
    # And on that page the menu is marked as the current section, the link as the current page
    assert "navmenu-current" in (summary.get_attribute("class") or "")
    assert settings_link(page, "People").get_attribute("aria-current") == "page"
    # And the bar is still one row on a settings page, with the menu closed again
    page.keyboard.press("Escape")
    page.goto("/access/tokens/")
    assert _row_spread(page) < 12


def test_a_viewer_sees_only_the_api_reference_under_settings(page, demo):  # noqa: F811
    # Given vera, a viewer of acme
    login(page, "vera", demo)
    page.goto("/")
    # When she opens the Settings menu, it holds the API reference and nothing she cannot open
    link = settings_link(page, "API reference")
    menu = page.locator("details.navmenu .navmenu-list a")
    assert menu.all_inner_texts() == ["API reference"]
    link.click()
    page.wait_for_url("**/api/docs/")
    page.locator(".opblock").first.wait_for()


def test_audit_event_pages_do_not_scroll_sideways_at_390(page, demo):  # noqa: F811
    # Given one event of every type in the demo chains, long type names included
    login(page, "admin", demo)
    page.set_viewport_size(NARROW)
    firsts: dict[str, str] = {}
    for event_type, event_id in AuditEvent.objects.order_by("sequence").values_list(
        "event_type", "event_id"
    ):
        firsts.setdefault(event_type, event_id)
    assert "action.compensation_verified" in firsts
    # When each event page opens at 390 px, then none is wider than the screen
    wide = []
    for event_type, event_id in firsts.items():
        page.goto(f"/audit/events/{event_id}/")
        width = page.evaluate("() => document.documentElement.scrollWidth")
        if width > NARROW["width"]:
            wide.append(f"{event_type}: {width}px")
    assert not wide, wide
    page.goto(f"/audit/events/{firsts['action.compensation_verified']}/")
    screenshot(page, "audit-event-narrow", full_page=True)


def test_search_landmarks_are_uniquely_named(page, demo):  # noqa: F811
    # Given the search page, which holds the top bar's search and its own filter form
    login(page, "admin", demo)
    page.goto("/search/?q=acme")
    page.evaluate(AXE_SOURCE.read_text(encoding="utf-8"))
    # Then axe finds no two landmarks of one kind with the same name
    assert page.evaluate(LANDMARK_RULES) == []
    assert page.get_by_role("search", name="Site search").count() == 1
    assert page.get_by_role("search", name="Search with filters").count() == 1
