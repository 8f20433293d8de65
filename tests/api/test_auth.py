"""Token authentication, the error shape, the body limits and the schema endpoint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from access import tokens
from access.models import ApiToken
from aetnaweb.access import SYSTEM
from aetnaweb.api import MAX_BODY_BYTES
from audit.models import AuditEvent
from memory.models import Episode, Record
from tests.api.conftest import ApiClient, issue_token

REMEMBER = "/memory/remember"
BODY = {"scope": "acme:alice:proj", "text": "My favourite colour is teal"}


def assert_error(response, status: int, field: str | None = None, fragment: str = ""):
    assert response.status_code == status, response.content
    assert set(response.data) == {"error", "field", "detail"}
    assert response.data["field"] == field
    assert fragment in response.data["detail"]


def nothing_stored() -> bool:
    return not Episode.objects.exists() and not Record.objects.exists()


@pytest.mark.django_db
def test_openapi_schema_is_public_and_lists_every_endpoint(client):
    # When anyone asks for the schema
    response = client.get("/api/v1/openapi.json")
    # Then it is served without a token or a login redirect
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    paths = set(schema["paths"])
    for path in [
        "/api/v1/token",
        "/api/v1/memory/remember",
        "/api/v1/memory/recall",
        "/api/v1/memory/recall-block",
        "/api/v1/memory/capture",
        "/api/v1/memory/forget",
        "/api/v1/memory/forget/preview",
        "/api/v1/memory/records",
        "/api/v1/memory/records/{record_id}",
        "/api/v1/memory/propose",
        "/api/v1/memory/log-action",
        "/api/v1/memory/persona",
        "/api/v1/memory/scenes",
        "/api/v1/actions/stage",
        "/api/v1/actions/",
        "/api/v1/actions/{transaction_id}",
        "/api/v1/actions/{transaction_id}/verify",
    ]:
        assert path in paths
    # And it documents bearer auth and the error shape
    assert schema["components"]["securitySchemes"]["TokenBearer"]["scheme"] == "bearer"
    assert "ErrorOut" in schema["components"]["schemas"]


@pytest.mark.django_db
def test_missing_token_is_401_and_writes_nothing(client):
    api = ApiClient(client, None)
    response = api.post(REMEMBER, BODY)
    assert_error(response, 401, None, "missing API token")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert nothing_stored()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        ("Basic dXNlcjpwYXNz", "malformed Authorization header"),
        ("Bearer", "malformed Authorization header"),
        ("Bearer not-a-token", "missing or malformed API token"),
        ("Bearer aetna_deadbeef_" + "x" * 43, "unknown API token"),
    ],
)
def test_malformed_or_unknown_tokens_are_401(client, header, fragment):
    response = client.post(
        "/api/v1" + REMEMBER, BODY, content_type="application/json", HTTP_AUTHORIZATION=header
    )
    assert response.status_code == 401
    assert fragment in response.json()["detail"]
    assert nothing_stored()


@pytest.mark.django_db
def test_revoked_token_is_401(client):
    # Given a token that worked, then was revoked
    secret = issue_token("acme:alice:*")
    api = ApiClient(client, secret)
    assert api.get("/token").status_code == 200
    tokens.revoke_token(
        principal=SYSTEM,
        token_prefix=ApiToken.objects.get().token_prefix,
    )
    # When it is used again
    response = api.post(REMEMBER, BODY)
    # Then it is refused and nothing is stored
    assert_error(response, 401, None, "revoked")
    assert nothing_stored()


@pytest.mark.django_db
def test_expired_token_is_401(client):
    secret = issue_token("acme:alice:*")
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = ApiClient(client, secret).post(REMEMBER, BODY)
    assert_error(response, 401, None, "expired")
    assert nothing_stored()


@pytest.mark.django_db
def test_token_endpoint_describes_the_token_without_its_secret(make_api):
    api = make_api("acme:alice:*", ["read", "write"])
    response = api.get("/token")
    assert response.status_code == 200
    assert response.data["scope"] == "acme:alice:*"
    assert response.data["capabilities"] == ["read", "write"]
    assert api.secret not in response.content.decode()


@pytest.mark.django_db
def test_api_needs_no_session_and_no_csrf(client):
    # Given a client that enforces CSRF like a browser, with no session
    from django.test import Client

    strict = ApiClient(Client(enforce_csrf_checks=True), issue_token("acme:alice:*"))
    # When it writes with a token only
    response = strict.post(REMEMBER, BODY)
    # Then it succeeds: token auth, no cookies, no login redirect
    assert response.status_code == 201
    assert Record.objects.count() == 1


@pytest.mark.django_db
def test_body_over_64_kib_is_400_naming_the_body(alice_api):
    # Given a body one byte over the limit
    text = "x" * MAX_BODY_BYTES
    response = alice_api.post(REMEMBER, {"scope": "acme:alice:proj", "text": text})
    # Then it is refused before anything is parsed or stored
    assert_error(response, 400, "body", "64 KiB")
    assert response.data["error"] == "body_too_large"
    assert nothing_stored()


@pytest.mark.django_db
def test_body_limit_applies_to_endpoints_without_a_body(alice_api):
    response = alice_api.client.get(
        "/api/v1/token",
        headers={"Authorization": f"Bearer {alice_api.secret}"},
        data=None,
        CONTENT_LENGTH=str(MAX_BODY_BYTES + 1),
    )
    assert response.status_code == 400
    assert response.json()["field"] == "body"


@pytest.mark.django_db
def test_a_body_just_under_the_limit_is_accepted(alice_api):
    overhead = len('{"scope": "acme:alice:proj", "text": ""}')
    text = "My note is " + "y" * (MAX_BODY_BYTES - overhead - len("My note is ") - 1)
    response = alice_api.post(REMEMBER, {"scope": "acme:alice:proj", "text": text})
    assert response.status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'"text"', "must be a JSON object"),
        (b'{"scope": "acme:alice:proj", "text": NaN}', "NaN is not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
        (b"[" * 5000 + b"]" * 5000, "not valid JSON"),
    ],
)
def test_unparsable_bodies_are_400_naming_the_body(alice_api, raw, fragment):
    response = alice_api.post(REMEMBER, raw=raw)
    assert_error(response, 400, "body", fragment)
    assert nothing_stored()


@pytest.mark.django_db
def test_missing_capability_inside_the_subtree_is_403_naming_it(make_api):
    # Given a read-only token
    api = make_api("acme:alice:*", ["read"])
    # When it tries to write inside its own subtree
    response = api.post(REMEMBER, BODY)
    # Then it is told which capability it lacks, and nothing is stored
    assert_error(response, 403, None, "'write'")
    assert response.data["error"] == "capability_missing"
    assert nothing_stored()


@pytest.mark.django_db
def test_outside_the_subtree_is_404_even_without_the_capability(make_api):
    api = make_api("acme:alice:*", ["read"])
    response = api.post(REMEMBER, {**BODY, "scope": "acme:bob:proj"})
    assert_error(response, 404, None, "no such resource")
    assert nothing_stored()


@pytest.mark.django_db
def test_a_token_may_not_write_to_an_ancestor_of_its_subtree(alice_api):
    # Reads look up (recall sees ancestors); writes land only inside the subtree.
    for scope in ["acme:*:*", "platform:*:*"]:
        response = alice_api.post(REMEMBER, {**BODY, "scope": scope})
        assert response.status_code == 404
    assert nothing_stored()


@pytest.mark.django_db
def test_refusals_are_never_written_to_the_audit_chain_beyond_setup(make_api):
    api = make_api("acme:alice:*", ["read"])
    before = AuditEvent.objects.count()
    api.post(REMEMBER, BODY)
    api.post(REMEMBER, {**BODY, "scope": "acme:bob:*"})
    api.post(REMEMBER, raw=b"{")
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/api/v1/", "openapi.json"),
        ("/api/v1/no/such/thing", "openapi.json"),
        ("/api/v1/actions", "did you mean /api/v1/actions/"),
    ],
)
def test_unknown_api_paths_answer_json_404_without_a_login_redirect(client, path, fragment):
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert fragment in response.json()["detail"]
