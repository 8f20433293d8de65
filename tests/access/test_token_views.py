"""The dashboard's API-token page: permission matrix, create (shown once), revoke."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from access import tokens
from access.models import ApiToken, ScopeGrant
from aetnaweb.access import SYSTEM
from aetnaweb.scopes import Scope
from audit.models import AuditEvent

PASSWORD = "pw-Token-page-31415!"


def operator_with(django_user_model, username: str, grants: list[tuple[str, str]]):
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    for scope, role in grants:
        parsed = Scope.parse(scope)
        ScopeGrant.objects.create(
            user=user,
            scope=str(parsed),
            scope_tenant=parsed.tenant,
            scope_user=parsed.user,
            scope_project=parsed.project,
            role=role,
        )
    return user


def issue(scope: str, name: str = "bot", caps=("read",)) -> tokens.IssuedToken:
    return tokens.create_token(
        principal=SYSTEM,
        name=name,
        scope=scope,
        capabilities=list(caps),
        expires_at=timezone.now() + timedelta(days=10),
    )


LIST_URL = "/access/tokens/"


def create_body(**overrides):
    body = {
        "name": "support-bot",
        "scope": "acme:alice:*",
        "capabilities": ["read", "write"],
        "expires_in_days": "30",
    }
    body.update(overrides)
    return body


@pytest.mark.django_db
def test_anonymous_is_sent_to_login(client):
    # When nobody is signed in
    response = client.get(LIST_URL)
    # Then the login page is asked for
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert client.post(LIST_URL, create_body()).status_code == 302
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "grants",
    [
        [],
        [("acme:bob:*", "admin")],  # sibling
        [("acmecorp:*:*", "admin")],  # prefix twin
        [("acme:alicex:*", "admin")],  # prefix twin at user level
        [("acme:alice:*", "reviewer"), ("acme:alice:*", "auditor")],  # right scope, wrong roles
    ],
)
def test_list_shows_only_administered_tokens_and_refuses_to_create(
    client, django_user_model, grants, django_assert_max_num_queries
):
    # Given a token on acme:alice:* and an operator without admin there
    issue("acme:alice:proj", name="alice-bot")
    user = operator_with(django_user_model, "op", grants)
    client.force_login(user)
    # When they open the page
    with django_assert_max_num_queries(8):
        response = client.get(LIST_URL)
    # Then they see no token of alice's and may not create one there
    assert response.status_code == 200
    assert b"alice-bot" not in response.content
    before = (ApiToken.objects.count(), AuditEvent.objects.count())
    refused = client.post(LIST_URL, create_body())
    assert refused.status_code == 400
    assert (ApiToken.objects.count(), AuditEvent.objects.count()) == before
    # And the revoke page of alice's token is a 404
    prefix = ApiToken.objects.get(name="alice-bot").token_prefix
    assert client.get(reverse("tokens:revoke", args=[prefix])).status_code == 404
    assert client.post(reverse("tokens:revoke", args=[prefix])).status_code == 404
    assert ApiToken.objects.get(name="alice-bot").revoked_at is None


@pytest.mark.django_db
def test_admin_creates_a_token_shown_once_and_stored_hashed(client, django_user_model):
    # Given an admin of acme:*:*
    user = operator_with(django_user_model, "tenant-admin", [("acme:*:*", "admin")])
    client.force_login(user)
    # When they create a token for acme:alice:*
    response = client.post(LIST_URL, create_body())
    # Then the secret is on the result page, uncached, and only its hash is stored
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    token = ApiToken.objects.get()
    secret = response.context["secret"]
    assert secret.encode() in response.content
    assert token.token_hash == tokens.hash_token(secret)
    assert token.scope == "acme:alice:*"
    assert token.capabilities == ["read", "write"]
    assert token.owner == user
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    # And the audit chain names the operator, never the secret
    event = AuditEvent.objects.get(event_type="access.token_created")
    assert event.actor == "tenant-admin"
    assert secret not in event.payload
    # And the list page shows the prefix but never the secret again
    listing = client.get(LIST_URL)
    assert token.token_prefix.encode() in listing.content
    assert secret.encode() not in listing.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"scope": "acme:alice"}, "scope", "three segments"),
        ({"scope": "acme:*:secret"}, "scope", "ambiguous"),
        ({"scope": "acme:bob:*"}, "scope", "admin role"),
        ({"capabilities": ["review"]}, "capabilities", "not one of the available choices"),
        ({"capabilities": []}, "capabilities", "required"),
        ({"expires_in_days": "0"}, "expires_in_days", "greater than or equal to 1"),
        ({"expires_in_days": "400"}, "expires_in_days", "less than or equal to 366"),
        ({"name": ""}, "name", "required"),
    ],
)
def test_bad_create_requests_name_the_field_and_write_nothing(
    client, django_user_model, overrides, field, fragment
):
    # Given an admin of acme:alice:*
    user = operator_with(django_user_model, "alice-admin", [("acme:alice:*", "admin")])
    client.force_login(user)
    before = (ApiToken.objects.count(), AuditEvent.objects.count())
    # When the form is bad
    response = client.post(LIST_URL, create_body(**overrides))
    # Then the form names the problem and nothing is written
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors
    assert fragment in " ".join(errors[field])
    assert (ApiToken.objects.count(), AuditEvent.objects.count()) == before


@pytest.mark.django_db
def test_admin_revokes_after_confirmation(client, django_user_model):
    # Given a token on acme:alice:proj and an admin of acme:alice:*
    issued = issue("acme:alice:proj")
    user = operator_with(django_user_model, "alice-admin", [("acme:alice:*", "admin")])
    client.force_login(user)
    url = reverse("tokens:revoke", args=[issued.token.token_prefix])
    # When they open the confirmation page, nothing changes yet
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert b"Revoke token" in confirm.content
    assert b"csrfmiddlewaretoken" in confirm.content
    assert ApiToken.objects.get().revoked_at is None
    # When they confirm
    response = client.post(url)
    # Then the token is revoked, audited by name, and no longer authenticates
    assert response.status_code == 302
    assert ApiToken.objects.get().revoked_at is not None
    assert AuditEvent.objects.get(event_type="access.token_revoked").actor == "alice-admin"
    with pytest.raises(tokens.TokenAuthenticationError):
        tokens.authenticate(issued.secret)
    # And revoking twice is a readable message, not an error page
    again = client.post(url, follow=True)
    assert again.status_code == 200
    assert b"already revoked" in again.content


@pytest.mark.django_db
def test_forms_carry_csrf_protection(django_user_model):
    # Given a client that enforces CSRF like a browser
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    user = operator_with(django_user_model, "alice-admin", [("acme:alice:*", "admin")])
    client.force_login(user)
    # When the form is posted without the token
    response = client.post(LIST_URL, create_body())
    # Then it is refused and nothing is created
    assert response.status_code == 403
    assert not ApiToken.objects.exists()
    assert b"csrfmiddlewaretoken" in client.get(LIST_URL).content


@pytest.mark.django_db
def test_platform_admin_sees_every_token(client, django_user_model):
    issue("acme:alice:*", name="a-bot")
    issue("globex:*:*", name="g-bot")
    user = operator_with(django_user_model, "root", [("platform:*:*", "admin")])
    client.force_login(user)
    content = client.get(LIST_URL).content
    assert b"a-bot" in content
    assert b"g-bot" in content
