"""Operators at volume (issue 33 items 1 and 2) in a real browser (Debian's Chromium).

1. A reviewer clears a long queue: sees its total and pages, ticks all on the page with
   a live count, gets a refusal that keeps her ticks, decides with a confirmation box,
   reads the result by content, and promotes with the keyboard.
2. An operator searches the top bar for a host name and a chat session, filters, and
   opens a hit; nothing from a scope out of reach appears.

Each journey saves screenshots (1280 and 390 px) to docs/screenshots/; axe runs on each.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record, Status
from tests.e2e.conftest import login, screenshot
from tests.factories import make_operator

SCOPE = "acme:alice:website"
COLOURS = ["teal", "amber", "ochre", "mauve", "cyan", "olive", "coral", "slate"]


def shot(page, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, name, narrow=True)


@pytest.fixture(autouse=True)
def _empty_search_index(transactional_db: None) -> Iterator[None]:
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_record_fts")


@pytest.fixture
def busy_queue() -> dict[str, object]:
    """An active car colour, webpage facts that would replace it, one page that yielded
    three facts, and tool output; all waiting at SCOPE."""
    services.remember(principal=SYSTEM, scope=SCOPE, text="My car colour is teal.")
    colours = [
        services.remember(
            principal=SYSTEM,
            scope=SCOPE,
            text=f"From the dealer page: <webpage>My car colour is {colour}.</webpage>",
        ).records[0]
        for colour in COLOURS[1:]
    ]
    group = services.remember(
        principal=SYSTEM,
        scope=SCOPE,
        text="Read this page: <webpage>My shell is fish. My editor is nano. "
        "My terminal font is Iosevka Term.</webpage>",
        session_id="chat-4711",
    )
    tool = services.remember(
        principal=SYSTEM,
        scope=SCOPE,
        text="Tool said: <tool_output>My deploy branch is release-2026.</tool_output>",
    ).records[0]
    return {"colours": [r.record_id for r in colours], "group": group, "tool": tool.record_id}


def test_reviewer_clears_a_queue_at_volume(page, busy_queue):
    make_operator("rita", [("acme:alice:*", "reviewer")])
    login(page, "rita")
    page.goto("/memory/review/")
    # The queue says how many wait and which page this is
    assert "11 waiting" in page.locator("#queue-total").inner_text()
    assert "page 1 of 1" in page.locator("#queue-total").inner_text()
    # A webpage colour shows the active value beside the one it proposes
    card = page.locator(f"#item-{busy_queue['colours'][0]}")
    assert "teal" in card.locator(".current-value").inner_text()
    assert "amber" in card.locator(".proposed-value").inner_text()
    # The three facts of one page are laid out together, each wide enough to read
    fact = page.locator(".source-fact .fact").first
    assert fact.bounding_box()["width"] > 300
    assert page.locator("#shortcuts-hint").is_visible()
    shot(page, "memory-review-queue-volume")

    # Tick all on the page: the live count follows, and unticking one lowers it
    page.locator("#tick-page").click()
    assert page.locator("#ticked-count").inner_text() == "11"
    page.locator(f"#item-{busy_queue['tool']} input[name=items]").uncheck()
    assert page.locator("#ticked-count").inner_text() == "10"
    for record_id in busy_queue["colours"]:
        page.locator(f"#item-{record_id} input[name=items]").check()
    page.locator(".source-fact input[name=items]").evaluate_all(
        "boxes => boxes.forEach(box => { box.checked = false; })"
    )
    page.locator("#untick-all").wait_for()

    # Rejecting without typing REJECT is refused, and the ticks survive
    form = page.locator("#bulk-form")
    form.get_by_label("Decision", exact=True).select_option("reject")
    form.get_by_label("Reason (required)").fill("Dealer pages are not the user.")
    form.get_by_label("I checked every ticked record").check()
    form.get_by_role("button", name="Apply").click()
    page.locator(".banner-danger").wait_for()
    assert "Type REJECT" in page.locator("#bulk-form").inner_text()
    assert page.locator("#ticked-count").inner_text() == str(len(busy_queue["colours"]))
    assert all(
        Record.objects.get(record_id=r).status == Status.QUARANTINED for r in busy_queue["colours"]
    )

    # With REJECT typed and the box ticked, the result page names what was decided
    form = page.locator("#bulk-form")
    form.get_by_label("To reject, type REJECT").fill("REJECT")
    form.get_by_label("Reason (required)").fill("Dealer pages are not the user.")
    form.get_by_label("I checked every ticked record").check()
    form.get_by_role("button", name="Apply").click()
    page.wait_for_url("**/memory/review/bulk/**")
    main = page.locator("#main").inner_text()
    assert "Rejected 7 records" in main and "ochre" in main
    shot(page, "memory-review-done")
    page.get_by_role("link", name="Back to the queue").first.click()
    page.wait_for_url("**/memory/review/**")

    # Keyboard: j steps through the group's three facts to the tool card; p promotes it
    # once a reason is given
    for _ in range(4):
        page.keyboard.press("j")
    assert page.locator(".key-current").get_attribute("id") == f"item-{busy_queue['tool']}"
    page.keyboard.press("p")  # no reason yet: the reason box takes focus, nothing is sent
    assert page.evaluate("document.activeElement.name") == "reason"
    page.keyboard.type("The user confirmed it.")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("p")
    page.wait_for_load_state()
    page.locator(".messages").wait_for()
    assert "Promoted" in page.locator(".messages").inner_text()
    assert Record.objects.get(record_id=busy_queue["tool"]).status == Status.ACTIVE


def test_operator_searches_what_they_may_read(page, busy_queue):
    services.remember(
        principal=SYSTEM,
        scope=SCOPE,
        text="Remember that the database host is pg-staging-3.",
        session_id="chat-4711",
    )
    services.remember(
        principal=SYSTEM,
        scope="acme:alice:ops",
        text="Remember that pg-staging-3 runs Postgres 15.",
    )
    services.remember(
        principal=SYSTEM, scope="acme:bob:crm", text="Remember that pg-staging-3 is bob's secret."
    )
    make_operator("vic", [("acme:alice:*", "viewer")])
    login(page, "vic")
    # When he types a host name into the top bar
    page.locator("#topsearch-q").fill("pg-staging-3")
    page.locator("#topsearch-q").press("Enter")
    page.wait_for_url("**/search/**")
    # Then both of his scopes' records are found with the match marked, bob's not at all
    main = page.locator("#main")
    assert page.locator(".hits mark").first.inner_text().lower() == "pg-staging-3"
    assert "acme:alice:ops" in main.locator(".scope-counts").inner_text()
    assert "bob" not in main.inner_text()
    shot(page, "search")
    # Filtering by scope keeps one
    page.locator("#search-scope").fill("acme:alice:ops")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**scope=acme**")
    assert "1 match" in page.locator("#records-count").inner_text()
    # A chat session ID finds its messages and records; a hit opens its record page
    page.locator("#search-page-q").fill("chat-4711")
    page.locator("#search-scope").fill("")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**q=chat-4711**")
    assert page.locator("#episodes-heading").is_visible()
    page.locator(".hits a.mono").first.click()
    page.wait_for_url("**/memory/records/**")
