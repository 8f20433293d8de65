"""Journey (issue 33 item 5): the overview's daily activity per tenant, drawn on the server,
with the numbers behind each chart; switching tenant without JavaScript."""

from __future__ import annotations

from aetnaweb.access import SYSTEM, operator_principal
from memory import services
from tests.e2e.conftest import screenshot, sign_in
from tests.factories import make_operator


def test_admin_reads_each_tenants_daily_activity(page):
    # Given acme with writes, a quarantined fact promoted, a recall and a forget; globex with one write
    admin = make_operator("ada", [("acme:*:*", "admin"), ("globex:*:*", "admin")])
    scope = "acme:alice:*"
    for text in ("My favourite colour is blue", "I live in Lisbon", "My dog is called Rex"):
        services.remember(scope=scope, text=text, principal=SYSTEM, actor="user")
    proposed = services.remember(
        scope=scope, text="My manager is Dana", source_type="tool_output", principal=SYSTEM
    ).records[0]
    services.promote(
        scope=scope,
        record_id=proposed.record_id,
        reason="checked",
        principal=operator_principal(admin),
    )
    services.recall(scope=scope, query="colour", principal=SYSTEM, actor="agent")
    services.forget(scope=scope, selector="Lisbon", principal=SYSTEM, actor="user")
    services.remember(scope="globex:bo:*", text="I work nights", principal=SYSTEM, actor="user")
    sign_in(page, admin)
    # When the admin opens the overview
    page.goto("/")
    # Then acme's activity shows six charts, each an image with a title
    assert page.get_by_role("heading", name="Activity in acme").is_visible()
    cards = page.locator(".activity-card")
    assert cards.count() == 6
    writes = cards.filter(has_text="Records written")
    assert writes.locator("svg[role=img]").count() == 1
    assert "· 3" in writes.locator("h3").inner_text()
    assert "· 1" in cards.filter(has_text="Quarantine decisions").locator("h3").inner_text()
    assert "· 1" in cards.filter(has_text="Forgets").locator("h3").inner_text()
    # And the numbers are there as a table for anyone who cannot read the chart
    writes.get_by_text("Show the numbers").click()
    today_row = writes.locator("tbody tr").last
    assert today_row.locator("td").last.inner_text() == "3"
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "overview-activity", narrow=True)
    # When they switch to globex (a plain link: no JavaScript needed)
    page.get_by_role("navigation", name="Activity of tenant").get_by_role(
        "link", name="globex"
    ).click()
    # Then globex's charts are drawn
    assert page.get_by_role("heading", name="Activity in globex").is_visible()
    assert "· 1" in page.locator(".activity-card").first.locator("h3").inner_text()
