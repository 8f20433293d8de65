"""Journey (issue 33 item 4): from a record page to its history, a timeline of each value,
who changed it and from which message; after a forget, only receipts remain."""

from __future__ import annotations

from aetnaweb.access import SYSTEM, operator_principal
from memory import services
from tests.e2e.conftest import screenshot, sign_in
from tests.factories import make_operator

SCOPE = "acme:alice:*"


def say(text: str, session: str, **extra) -> str:
    result = services.remember(
        scope=SCOPE, text=text, session_id=session, principal=SYSTEM, actor="user", **extra
    )
    return result.records[0].record_id


def test_reviewer_reads_a_records_history_then_forgets_it(page):
    # Given a fact that changed: a user said blue, then green; a tool said red and it was promoted
    reviewer = make_operator("rita", [(SCOPE, "reviewer")])
    say("My favourite colour is blue", "chat-1")
    green = say("My favourite colour is green", "chat-2")
    red = say("My favourite colour is red", "chat-3", source_type="tool_output")
    services.promote(
        scope=SCOPE,
        record_id=red,
        reason="confirmed on the support call",
        principal=operator_principal(reviewer),
    )
    sign_in(page, reviewer)
    # When the reviewer opens the middle value's record page and follows History
    page.goto(f"/memory/records/{green}/")
    page.get_by_role("link", name="History", exact=True).click()
    page.wait_for_url(f"**/memory/records/{green}/history/")
    # Then the timeline shows each value, oldest first, and who did what
    timeline = page.locator(".timeline")
    entries = timeline.locator(".timeline-entry")
    assert entries.count() == 4
    texts = [entries.nth(n).inner_text() for n in range(4)]
    assert "Created" in texts[0] and "blue" in texts[0] and "chat-1" in texts[0]
    assert "Created" in texts[1] and "Replacing" in texts[1] and "blue" in texts[1]
    assert "Proposed" in texts[2] and "red" in texts[2]
    assert "Promoted" in texts[3] and "rita" in texts[3]
    assert "confirmed on the support call" in texts[3]
    screenshot(page, "memory-record-history", narrow=True)

    # When the newest value is forgotten
    services.forget(scope=SCOPE, record_ids=[red], principal=SYSTEM, actor="user")
    page.reload()
    # Then the history shows forgotten values with the receipt, never their content
    main = page.locator("main").inner_text()
    assert "favourite colour is" not in main
    assert "Forgotten" in main
    page.get_by_role("link", name="Deletion receipt").first.click()
    page.wait_for_url("**/memory/receipts/**")
