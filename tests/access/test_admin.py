"""The Django admin for grants and tokens: every change goes through the grant services."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from access import tokens
from access.models import ScopeGrant
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from tests.factories import login_as, make_operator

ADD = reverse("admin:access_scopegrant_add")


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
    url = reverse("admin:access_scopegrant_delete", args=[grant.pk])
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
    url = reverse("admin:access_scopegrant_delete", args=[grant.pk])
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert ScopeGrant.objects.filter(pk=grant.pk).exists()


@pytest.mark.django_db
def test_grants_are_never_edited_in_place(client):
    admin = make_operator("root", [("platform:*:*", "admin")], is_superuser=True)
    target = make_operator("alice", [("acme:alice:*", "viewer")])
    grant = ScopeGrant.objects.get(user=target)
    login_as(client, admin)
    url = reverse("admin:access_scopegrant_change", args=[grant.pk])
    page = client.get(url)
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    client.post(url, {"user": target.pk, "scope": "acme:*:*", "role": "admin"})
    assert ScopeGrant.objects.get(pk=grant.pk).scope == "acme:alice:*"


@pytest.mark.django_db
def test_token_admin_is_read_only_and_never_shows_the_hash(client):
    admin = make_operator("root", [("platform:*:*", "admin")], is_superuser=True)
    issued = tokens.create_token(
        principal=SYSTEM,
        name="ci",
        scope="acme:*:*",
        capabilities=["read"],
        expires_at=timezone.now() + timedelta(days=3),
    )
    login_as(client, admin)
    assert client.get(reverse("admin:access_apitoken_add")).status_code == 403
    page = client.get(reverse("admin:access_apitoken_change", args=[issued.token.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    assert issued.token.token_prefix in body
    assert issued.token.token_hash not in body and issued.secret not in body
    assert 'name="_save"' not in body


# -- deleting a user (issue 10 item 6) ----------------------------------------------------------


def user_admin(username: str, grants) -> object:
    """A staff user allowed to delete users in the admin, holding ``grants``."""
    user = make_operator(username, grants, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_user", "delete_user", "change_user", "delete_scopegrant"]
        )
    )
    return user


@pytest.mark.django_db
def test_deleting_a_user_in_the_admin_audits_each_grant_revoked(client):
    # Given a user holding two grants, and a tenant admin
    boss = user_admin("boss", [("acme:*:*", "admin")])
    target = make_operator("alice", [("acme:alice:*", "viewer"), ("acme:*:*", "reviewer")])
    login_as(client, boss)
    # When the boss deletes alice in the admin
    url = reverse("admin:auth_user_delete", args=[target.pk])
    response = client.post(url, {"post": "yes"})
    # Then she is gone, and each grant's chain says who ended her access and why
    assert response.status_code == 302
    assert not type(target).objects.filter(pk=target.pk).exists()
    assert not ScopeGrant.objects.filter(user_id=target.pk).exists()
    events = AuditEvent.objects.filter(event_type="access.grant_revoked").order_by("subject_id")
    assert [(e.subject_id, e.actor) for e in events] == [
        ("acme:*:*", "boss"),
        ("acme:alice:*", "boss"),
    ]
    payloads = [json.loads(e.payload) for e in events]
    assert {p["role"] for p in payloads} == {"viewer", "reviewer"}
    assert all(p["reason"] == "user_deleted" and p["user"] == "alice" for p in payloads)


@pytest.mark.django_db
def test_the_bulk_delete_action_audits_too(client):
    boss = user_admin("boss", [("acme:*:*", "admin")])
    targets = [make_operator(name, [(f"acme:{name}:*", "viewer")]) for name in ("amy", "ann")]
    login_as(client, boss)
    response = client.post(
        reverse("admin:auth_user_changelist"),
        {"action": "delete_selected", "_selected_action": [t.pk for t in targets], "post": "yes"},
    )
    assert response.status_code == 302
    assert AuditEvent.objects.filter(event_type="access.grant_revoked").count() == 2


@pytest.mark.django_db
def test_deleting_a_user_with_grants_out_of_reach_is_refused_and_writes_nothing(client):
    # Given a user with a globex grant the acme admin does not manage
    boss = user_admin("boss", [("acme:*:*", "admin")])
    target = make_operator("gina", [("acme:gina:*", "viewer"), ("globex:*:*", "viewer")])
    login_as(client, boss)
    before = AuditEvent.objects.count()
    # When the boss tries to delete her, one by one or in bulk
    single = client.post(reverse("admin:auth_user_delete", args=[target.pk]), {"post": "yes"})
    bulk = client.post(
        reverse("admin:auth_user_changelist"),
        {"action": "delete_selected", "_selected_action": [target.pk], "post": "yes"},
    )
    # Then it is refused, and the user, her grants and the chains are untouched
    assert single.status_code == 403 and bulk.status_code == 403
    assert ScopeGrant.objects.filter(user=target).count() == 2
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_the_grant_list_filter_sidebar_renders_as_html_not_escaped_markup(admin_client):
    # Given a grant, so the tenant filter has a choice
    make_operator("alice", [("acme:alice:*", "viewer")])
    # When a superuser opens the grant list
    response = admin_client.get(reverse("admin:access_scopegrant_changelist"))
    # Then the filter sidebar is markup (a details element per filter), not its escaped text
    html = response.content.decode()
    assert '<details data-filter-title="role"' in html
    assert '<a href="?scope_tenant=acme">acme</a>' in html
    assert "&lt;details" not in html and "&lt;summary" not in html


@pytest.mark.django_db
def test_the_admin_names_scope_stats_and_webhook_deliveries_in_plain_plurals(admin_client):
    # When a superuser opens the admin index
    html = admin_client.get(reverse("admin:index")).content.decode()
    # Then the plural labels are English, not the default "s" appended
    assert "Scope stats" in html and "Webhook deliveries" in html
    assert "statss" not in html.lower() and "deliverys" not in html.lower()
