"""Journey: an operator opens the API reference and Swagger UI renders under the CSP."""

from __future__ import annotations

from tests.e2e.conftest import screenshot, sign_in
from tests.factories import make_operator


def test_the_api_reference_renders_every_operation_offline(page, live_server):
    # Given a signed-in operator (the page fixture fails on any CSP violation or JS error)
    sign_in(page, make_operator("vera", [("acme:*:*", "viewer")]))
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    # When they follow "API reference" from the dashboard
    page.goto("/")
    page.get_by_role("link", name="API reference").click()
    page.wait_for_url("**/api/docs/")
    # Then Swagger UI lists the operations by their plain IDs
    page.locator(".opblock").first.wait_for()
    assert page.locator(".opblock").count() >= 20
    assert page.get_by_text("/api/v1/memory/remember", exact=True).count() == 1
    # And nothing was loaded from anywhere but this server
    assert requests and all(url.startswith(live_server.url) for url in requests), requests
    screenshot(page, "api-reference")
