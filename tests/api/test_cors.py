"""CORS for browser-based agents: off by default, only configured origins, only /api/v1/."""

from __future__ import annotations

import pytest

from tests.api.conftest import issue_token

ORIGIN = "https://agent.example"


@pytest.fixture
def cors_on(settings):
    settings.CORS_ALLOWED_ORIGINS = [ORIGIN]


def _preflight(client, path: str = "/api/v1/memory/remember", origin: str = ORIGIN):
    return client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
        },
    )


def test_off_by_default_no_cors_headers(client, db):
    # Given the default settings, when a browser sends an API request and a preflight
    secret = issue_token("acme:alice:*")
    response = client.get(
        "/api/v1/token", headers={"Origin": ORIGIN, "Authorization": f"Bearer {secret}"}
    )
    # Then nothing allows the origin
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response
    assert "Access-Control-Allow-Origin" not in _preflight(client)


@pytest.mark.usefixtures("cors_on")
def test_a_configured_origin_may_call_the_api_and_read_its_headers(client, db):
    secret = issue_token("acme:alice:*")
    response = client.get(
        "/api/v1/token", headers={"Origin": ORIGIN, "Authorization": f"Bearer {secret}"}
    )
    assert response["Access-Control-Allow-Origin"] == ORIGIN
    assert "Access-Control-Allow-Credentials" not in response
    assert "retry-after" in response["Access-Control-Expose-Headers"].lower()


@pytest.mark.usefixtures("cors_on")
def test_a_refusal_carries_cors_headers_so_the_browser_can_read_it(client, db):
    response = client.get("/api/v1/token", headers={"Origin": ORIGIN})
    assert response.status_code == 401
    assert response["Access-Control-Allow-Origin"] == ORIGIN


@pytest.mark.usefixtures("cors_on")
def test_preflight_for_a_configured_origin_allows_the_api_headers(client, db):
    # When a browser asks before a POST with a bearer token and an Idempotency-Key
    response = _preflight(client)
    # Then it is answered without login, allowing the method and headers
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in response["Access-Control-Allow-Methods"]
    allowed = response["Access-Control-Allow-Headers"].lower()
    assert {"authorization", "content-type", "idempotency-key"} <= {
        h.strip() for h in allowed.split(",")
    }


@pytest.mark.usefixtures("cors_on")
def test_another_origin_gets_no_allowance(client, db):
    response = _preflight(client, origin="https://evil.example")
    assert "Access-Control-Allow-Origin" not in response


@pytest.mark.usefixtures("cors_on")
def test_the_dashboard_never_gets_cors_headers(client, db):
    response = client.get("/", headers={"Origin": ORIGIN})
    assert "Access-Control-Allow-Origin" not in response
    assert "Access-Control-Allow-Origin" not in _preflight(client, path="/access/tokens/")
