"""Webhook deliveries (issue 33 item 9, in part): the endpoint page is titled by its URL
(or description) and its deliveries filter by status."""

from __future__ import annotations

from tests.e2e.conftest import screenshot, sign_in
from tests.factories import make_operator
from tests.webhooks.conftest import register
from webhooks.models import WebhookDelivery

HOOK = "https://93.184.215.14/deploys"


def test_an_admin_filters_an_endpoints_deliveries_by_status(page):
    # Given an endpoint of acme with two test deliveries, one of which failed
    endpoint, _ = register(HOOK, scope="acme:*:*")
    sign_in(page, make_operator("tara", [("acme:*:*", "admin")]))
    page.goto(f"/webhooks/{endpoint.id}/")
    # Then the page is titled by the endpoint's URL, not its ID
    assert page.get_by_role("heading", level=1).inner_text() == HOOK
    for _ in range(2):
        page.get_by_role("button", name="Send test event").click()
        page.wait_for_load_state()
    failed, pending = WebhookDelivery.objects.order_by("created_at", "id")
    WebhookDelivery.objects.filter(pk=failed.pk).update(
        status="failed", attempts=3, last_error="HTTP 500"
    )
    # When the admin picks "Failed"
    page.goto(f"/webhooks/{endpoint.id}/")
    filters = page.get_by_role("navigation", name="Deliveries by status")
    filters.get_by_role("link", name="Failed").click()
    page.wait_for_url("**?status=failed")
    # Then only the failed delivery is listed, and the filter says which is shown
    table = page.get_by_role("region", name="Deliveries", exact=True).locator("table")
    assert failed.id in table.inner_text() and pending.id not in table.inner_text()
    assert filters.get_by_role("link", name="Failed").get_attribute("aria-current") == "page"
    screenshot(page, "webhook-deliveries-failed", narrow=True)
    # And "All" brings both back
    filters.get_by_role("link", name="All").click()
    page.wait_for_url(f"**/webhooks/{endpoint.id}/?")
    assert (
        pending.id
        in page.get_by_role("region", name="Deliveries", exact=True).locator("table").inner_text()
    )
