"""Journey: an admin creates an API token, an agent uses it, the admin revokes it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.e2e.conftest import screenshot, settings_link, sign_in
from tests.factories import make_operator


def api_status(base_url: str, secret: str) -> int:
    request = urllib.request.Request(  # noqa: S310  (the live test server)
        f"{base_url}/api/v1/memory/remember",
        data=json.dumps({"scope": "acme:alice:proj", "text": "My standup is at nine"}).encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310  (the live test server)
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_admin_creates_uses_and_revokes_a_token(page, live_server):
    # Given an admin of acme
    admin = make_operator("tara", [("acme:*:*", "admin")])
    sign_in(page, admin)
    # When they open API tokens from the navigation and fill in the form
    page.goto("/")
    settings_link(page, "API tokens").click()
    page.wait_for_url("**/access/tokens/")
    page.get_by_label("Name").fill("support-bot")
    page.get_by_label("Scope", exact=True).fill("acme:alice:*")
    page.get_by_label("read: list and show records", exact=False).check()
    page.get_by_label("write: remember", exact=False).check()
    page.get_by_label("Expires in (days)").fill("30")
    screenshot(page, "api-tokens-form", narrow=True)
    page.get_by_role("button", name="Create token").click()
    # Then the secret is shown once
    secret = page.locator("#token-secret").input_value()
    assert secret.startswith("aetna_")
    screenshot(page, "api-token-created", narrow=True)
    # And an agent can use it at once
    assert api_status(live_server.url, secret) == 201  # a record was stored
    # And the list shows the token without its secret
    page.get_by_role("link", name="Back to API tokens").click()
    assert "support-bot" in page.content()
    assert secret not in page.content()
    screenshot(page, "api-tokens", narrow=True)
    # When they revoke it, after confirming
    page.get_by_role("link", name="Revoke…").click()
    screenshot(page, "api-token-revoke")
    page.get_by_role("button", name="Revoke token").click()
    page.wait_for_url("**/access/tokens/")
    assert "is revoked" in page.locator(".messages").inner_text()
    # Then the agent's next request is refused
    assert api_status(live_server.url, secret) == 401
