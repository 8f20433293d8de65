"""Journey (issue 33 item 3): an admin invites a teammate, the teammate joins, the admin
grants a second role, revokes one and deactivates the account."""

from __future__ import annotations

from tests.e2e.conftest import screenshot, settings_link, sign_in
from tests.factories import make_operator

TEAMMATE_PASSWORD = "violet-Harbour-2931!"


def test_admin_invites_a_teammate_who_joins_then_manages_their_access(page, browser, live_server):
    # Given an acme admin and a colleague already there
    admin = make_operator("tara", [("acme:*:*", "admin")])
    make_operator("alice", [("acme:alice:*", "reviewer"), ("acme:ops:*", "viewer")])
    sign_in(page, admin)
    # When the admin opens People from the navigation and invites a teammate
    page.goto("/")
    settings_link(page, "People").click()
    page.wait_for_url("**/access/people/")
    page.get_by_label("Account name").fill("sam")
    page.get_by_label("Scope", exact=True).fill("acme:sam:*")
    page.get_by_label("Role", exact=True).select_option("reviewer")
    # A refused invitation says what was wrong and keeps what was typed
    page.get_by_label("Link expires in (days)").fill("90")
    page.get_by_role("button", name="Create invitation link").click()
    assert "less than or equal to 30" in page.get_by_role("alert").first.inner_text()
    assert page.get_by_label("Account name").input_value() == "sam"
    page.get_by_label("Link expires in (days)").fill("7")
    page.get_by_role("button", name="Create invitation link").click()
    # Then the one-time link is shown once
    link = page.locator("#invitation-link").input_value()
    assert "/access/people/join/" in link
    page.get_by_role("link", name="Back to people").click()
    assert "sam" in page.locator("#invitations-heading").locator("..").inner_text()
    assert link not in page.content()
    screenshot(page, "people", narrow=True)

    # When the teammate, in their own browser, opens the link and chooses a password
    other = browser.new_context(base_url=live_server.url)
    try:
        invitee = other.new_page()
        invitee.goto(link)
        assert "reviewer" in invitee.locator("main").inner_text()
        invitee.get_by_label("Password", exact=True).fill(TEAMMATE_PASSWORD)
        invitee.get_by_label("Password again").fill(TEAMMATE_PASSWORD)
        invitee.get_by_role("button", name="Create my account").click()
        invitee.wait_for_url("**/login/")
        # Then they sign in with it and see their scope
        invitee.get_by_label("Username").fill("sam")
        invitee.get_by_label("Password").fill(TEAMMATE_PASSWORD)
        invitee.get_by_role("button", name="Sign in").click()
        invitee.wait_for_url(f"{live_server.url}/")
        assert "acme" in invitee.locator("main").inner_text()
        # And the link no longer works
        invitee.goto(link)
        assert "not valid" in invitee.get_by_role("alert").inner_text()
    finally:
        other.close()

    # When the admin opens sam's page and grants a second role
    page.goto("/access/people/")
    page.get_by_role("link", name="sam", exact=True).click()
    page.get_by_label("Scope", exact=True).fill("acme:ops:*")
    page.get_by_label("Role", exact=True).select_option("viewer")
    page.get_by_role("button", name="Grant").click()
    assert "now holds viewer on acme:ops:*" in page.locator(".messages").inner_text()
    screenshot(page, "people-person", narrow=True)
    # And revokes it again
    page.get_by_role("button", name="Revoke viewer on acme:ops:*").click()
    assert "no longer holds viewer" in page.locator(".messages").inner_text()
    # And deactivates the account, after a preview
    page.get_by_role("link", name="Deactivate…").click()
    page.get_by_role("button", name="Deactivate sam").click()
    assert "is deactivated" in page.locator(".messages").inner_text()
    assert "deactivated" in page.get_by_role("heading", level=1).inner_text()
