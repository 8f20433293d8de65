"""Journey: an admin registers a webhook, copies its secret once, sends a test event, sees
a failed delivery and retries it, and sees a quarantined fact delivered."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from memory import services as memory
from tests.e2e.conftest import screenshot, settings_link, sign_in
from tests.factories import make_operator
from tests.webhooks.conftest import receiver  # noqa: F401  (fixture)
from tests.webhooks.test_signing import docs_verifier
from webhooks import services
from webhooks.models import WebhookDelivery


@pytest.fixture(autouse=True)
def _loopback_receiver_allowed(settings):
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = True
    settings.AETNAWEB_WEBHOOKS_BACKOFF_SECONDS = 0
    settings.AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS = 2


def test_admin_registers_tests_and_retries_a_webhook(page, receiver):  # noqa: F811
    # Given an admin of acme
    sign_in(page, make_operator("tara", [("acme:*:*", "admin")]))
    # When they open Webhooks from the navigation and register an endpoint
    page.goto("/")
    settings_link(page, "Webhooks").click()
    page.wait_for_url("**/webhooks/")
    page.get_by_label("URL").fill(receiver.url)
    page.get_by_label("Scope", exact=True).fill("acme:alice:*")
    page.get_by_label("A fact is waiting in quarantine", exact=False).check()
    page.get_by_label("A guarded-action plan is awaiting approval", exact=False).check()
    page.get_by_label("Description").fill("On-call pager bridge")
    screenshot(page, "webhooks-form", narrow=True)
    page.get_by_role("button", name="Register endpoint").click()
    # Then the signing secret is shown once, with a copy button
    secret = page.locator("#webhook-secret").input_value()
    assert secret.startswith("whsec_")
    assert page.get_by_role("button", name="Copy the signing secret").count() == 1
    screenshot(page, "webhook-created", narrow=True)
    page.get_by_role("link", name="Go to the endpoint").click()
    page.wait_for_url("**/webhooks/whe_*/")
    assert secret not in page.content()
    # When the receiver is down and they send a test event
    receiver.script = [(503, 0, b"maintenance")]
    page.get_by_role("button", name="Send test event").click()
    assert "Test event" in page.locator(".messages").inner_text()  # the POST has landed
    services.deliver_due()  # what the task worker does
    page.reload()
    row = page.locator("tbody tr").first
    assert "pending" in row.inner_text() and "HTTP 503" in row.inner_text()
    # And retry it now, with the receiver back
    page.get_by_role("button", name="Retry now").click()
    assert "queued again" in page.locator(".messages").inner_text()
    services.deliver_due()
    # And a quarantined fact lands in alice's project
    memory.remember(
        principal=SYSTEM, scope="acme:alice:proj", text="Read: <webpage>My shell is fish.</webpage>"
    )
    services.deliver_due()
    page.reload()
    # Then both deliveries read delivered, and the receiver could check every signature
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}
    assert page.locator("text=memory.record_quarantined").count() >= 1
    verify = docs_verifier()
    assert len(receiver.requests) == 3
    assert all(verify(secret, r.headers["Webhook-Signature"], r.body) for r in receiver.requests)
    screenshot(page, "webhook-endpoint", narrow=True)
    # And the list shows the endpoint's counts
    page.get_by_role("link", name="Webhooks").first.click()
    page.wait_for_url("**/webhooks/")
    assert "2 delivered" in page.content()
    screenshot(page, "webhooks", narrow=True)
