"""The Django admin for grants and tokens: every change goes through the grant services."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from aetnaweb import tokens
from aetnaweb.models import ScopeGrant
from audit.models import AuditEvent
from tests.factories import login_as, make_operator

ADD = reverse("admin:aetnaweb_scopegrant_add")


def grant_admin(username: str, grants) -> object:
    """A staff user allowed into the grant admin, holding ``grants``."""
    user = make_operator(username, grants, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["add_scopegrant", "view_scopegrant", "delete_scopegrant"]
        )
    )
    return user


@pytest.mark.django_db
def test_admin_adds_a_grant_through_the_service_and_audits_it(client):
    # Given a tenant admin and a target user
    boss = grant_admin("boss", [("acme:*:*", "admin")])
    target = make_operator("alice")
    login_as(client, boss)
    # When the boss grants alice a reviewer role in the admin
    response = client.post(ADD, {"user": target.pk, "scope": "acme:alice:*", "role": "reviewer"})
    # Then the grant exists with its split columns and the chain records who granted it
    assert response.status_code == 302, response.content
    grant = ScopeGrant.objects.get(user=target)
    assert (grant.scope_tenant, grant.scope_user, grant.scope_project) == ("acme", "alice", "*")
    assert grant.created_by == "boss"
    event = AuditEvent.objects.get(event_type="access.grant_added", subject_id="acme:alice:*")
    assert event.actor == "boss"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ("globex:*:*", "You need the admin role on globex:*:*"),
        ("acmecorp:*:*", "You need the admin role on acmecorp:*:*"),
        ("acme:alice", "expected exactly three segments"),
        ("platform:bob:*", "is reserved for the root scope"),
    ],
)
def test_admin_refusals_are_form_errors_and_write_nothing(client, scope, message):
    boss = grant_admin("boss", [("acme:*:*", "admin")])
    target = make_operator("alice")
    login_as(client, boss)
    before = AuditEvent.objects.count()
    response = client.post(ADD, {"user": target.pk, "scope": scope, "role": "viewer"})
    assert response.status_code == 200
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not ScopeGrant.objects.filter(user=target).exists()
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_admin_delete_revokes_through_the_service(client):
    boss = grant_admin("boss", [("acme:*:*", "admin")])
    target = make_operator("alice", [("acme:alice:*", "viewer")])
    grant = ScopeGrant.objects.get(user=target)
    login_as(client, boss)
    url = reverse("admin:aetnaweb_scopegrant_delete", args=[grant.pk])
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not ScopeGrant.objects.filter(user=target).exists()
    event = AuditEvent.objects.get(event_type="access.grant_revoked")
    assert (event.subject_id, event.actor) == ("acme:alice:*", "boss")


@pytest.mark.django_db
def test_admin_cannot_delete_a_grant_outside_its_reach(client):
    boss = grant_admin("boss", [("acme:*:*", "admin")])
    target = make_operator("gina", [("globex:*:*", "viewer")])
    grant = ScopeGrant.objects.get(user=target)
    login_as(client, boss)
    url = reverse("admin:aetnaweb_scopegrant_delete", args=[grant.pk])
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert ScopeGrant.objects.filter(pk=grant.pk).exists()


@pytest.mark.django_db
def test_grants_are_never_edited_in_place(client):
    admin = make_operator("root", [("platform:*:*", "admin")], is_superuser=True)
    target = make_operator("alice", [("acme:alice:*", "viewer")])
    grant = ScopeGrant.objects.get(user=target)
    login_as(client, admin)
    url = reverse("admin:aetnaweb_scopegrant_change", args=[grant.pk])
    page = client.get(url)
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    client.post(url, {"user": target.pk, "scope": "acme:*:*", "role": "admin"})
    assert ScopeGrant.objects.get(pk=grant.pk).scope == "acme:alice:*"


@pytest.mark.django_db
def test_token_admin_is_read_only_and_never_shows_the_hash(client):
    admin = make_operator("root", [("platform:*:*", "admin")], is_superuser=True)
    issued = tokens.create_token(
        name="ci",
        scope="acme:*:*",
        capabilities=["read"],
        expires_at=timezone.now() + timedelta(days=3),
        created_by="root",
    )
    login_as(client, admin)
    assert client.get(reverse("admin:aetnaweb_apitoken_add")).status_code == 403
    page = client.get(reverse("admin:aetnaweb_apitoken_change", args=[issued.token.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    assert issued.token.token_prefix in body
    assert issued.token.token_hash not in body and issued.secret not in body
    assert 'name="_save"' not in body
