"""The people pages (issue 33 item 3): permission matrix, invite, join, grant, revoke, deactivate."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from access.models import Invitation, ScopeGrant
from audit.models import AuditEvent
from tests.factories import PASSWORD, login_as, make_operator

LIST = reverse("people:list")
GOOD_PASSWORD = "violet-Harbour-2931!"


def invite_body(**overrides):
    body = {
        "username": "newbie",
        "email": "",
        "scope": "acme:*:*",
        "role": "reviewer",
        "expires_in_days": "7",
    }
    body.update(overrides)
    return body


def state() -> tuple[int, int, int, int]:
    return (
        Invitation.objects.count(),
        get_user_model().objects.count(),
        ScopeGrant.objects.count(),
        AuditEvent.objects.count(),
    )


@pytest.mark.django_db
def test_anonymous_is_sent_to_sign_in(client):
    for response in (client.get(LIST), client.post(LIST, invite_body())):
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    assert not Invitation.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "grants",
    [
        [],
        [("acme:*:*", "viewer"), ("acme:*:*", "reviewer"), ("acme:*:*", "auditor")],
        [("acme:*:*", "approver")],
    ],
    ids=["no-grant", "every-role-but-admin", "approver"],
)
def test_people_without_an_admin_role_get_a_404(client, grants):
    login_as(client, make_operator("vic", grants))
    before = state()
    assert client.get(LIST).status_code == 404
    assert client.post(LIST, invite_body()).status_code == 404
    assert state() == before


@pytest.mark.django_db
def test_a_tenant_admin_sees_people_in_reach_only(client, django_assert_max_num_queries):
    # Given two tenants' people
    boss = make_operator("boss", [("acme:*:*", "admin")])
    make_operator("alice", [("acme:alice:*", "reviewer"), ("globex:*:*", "viewer")])
    make_operator("gina", [("globex:*:*", "admin")])
    login_as(client, boss)
    # When the acme admin opens the people page
    with django_assert_max_num_queries(14):
        response = client.get(LIST)
    html = response.content.decode()
    # Then alice shows with her acme grant only (the globex one counted), gina not at all
    assert response.status_code == 200
    assert "alice" in html and "reviewer · acme:alice:*" in html
    assert "+1 elsewhere" in html
    assert "gina" not in html and "globex" not in html


@pytest.mark.django_db
def test_a_person_out_of_reach_is_a_404(client):
    login_as(client, make_operator("boss", [("acme:*:*", "admin")]))
    gina = make_operator("gina", [("globex:*:*", "admin")])
    assert client.get(reverse("people:person", args=[gina.pk])).status_code == 404
    before = state()
    body = {"scope": "globex:*:*", "role": "viewer"}
    assert client.post(reverse("people:person", args=[gina.pk]), body).status_code == 404
    assert client.post(reverse("people:deactivate", args=[gina.pk])).status_code == 404
    assert state() == before


@pytest.mark.django_db
def test_inviting_shows_the_link_once_and_it_lets_the_invitee_join(client):
    # Given a tenant admin
    login_as(client, make_operator("boss", [("acme:*:*", "admin")]))
    # When they invite a teammate
    response = client.post(LIST, invite_body(email="n@example.com"))
    assert response.status_code == 201
    link = re.search(r'id="invitation-link" readonly value="([^"]+)"', response.content.decode())[1]
    assert "/access/people/join/" in link
    # Then the list shows the waiting invitation, never the link
    listing = client.get(LIST).content.decode()
    assert "newbie" in listing and link not in listing
    # And the invitee, not signed in, opens it and sets a password
    invitee = Client()
    path = link.split("testserver", 1)[1]
    page = invitee.get(path)
    assert page.status_code == 200 and "reviewer" in page.content.decode()
    done = invitee.post(path, {"password": GOOD_PASSWORD, "password_again": GOOD_PASSWORD})
    assert done.status_code == 302 and done["Location"] == reverse("login")
    assert invitee.login(username="newbie", password=GOOD_PASSWORD)
    assert ScopeGrant.objects.filter(user__username="newbie", role="reviewer").exists()
    # And the link is spent
    again = Client().get(path)
    assert again.status_code == 410
    assert "not valid" in again.content.decode()


@pytest.mark.django_db
def test_a_refused_join_says_why_and_creates_nothing(client):
    login_as(client, make_operator("boss", [("acme:*:*", "admin")]))
    response = client.post(LIST, invite_body())
    link = re.search(r'value="(http://testserver[^"]+)"', response.content.decode())[1]
    path = link.split("testserver", 1)[1]
    before = state()
    refused = Client().post(path, {"password": "short", "password_again": "short"})
    assert refused.status_code == 400
    assert "too short" in refused.content.decode()
    differ = Client().post(path, {"password": GOOD_PASSWORD, "password_again": "other"})
    assert "passwords differ" in differ.content.decode()
    assert state() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"scope": "globex:*:*"}, "You do not hold the admin role on globex:*:*"),
        ({"scope": "acme:alice"}, "expected exactly three segments"),
        ({"username": "boss"}, "already exists"),
        ({"username": "has space"}, "not a valid account name"),
        ({"role": "owner"}, "Select a valid choice"),
        ({"expires_in_days": "90"}, "less than or equal to 30"),
    ],
)
def test_invite_form_errors_say_what_was_wrong_and_change_nothing(client, overrides, message):
    login_as(client, make_operator("boss", [("acme:*:*", "admin")]))
    before = state()
    response = client.post(LIST, invite_body(**overrides))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'role="alert"' in response.content.decode()
    assert state() == before


@pytest.mark.django_db
def test_posts_without_a_csrf_token_are_refused():
    boss = make_operator("boss", [("acme:*:*", "admin")])
    alice = make_operator("alice", [("acme:alice:*", "viewer")])
    client = Client(enforce_csrf_checks=True)
    login_as(client, boss)
    before = state()
    assert client.post(LIST, invite_body()).status_code == 403
    body = {"scope": "acme:alice:*", "role": "reviewer"}
    assert client.post(reverse("people:person", args=[alice.pk]), body).status_code == 403
    assert client.post(reverse("people:deactivate", args=[alice.pk])).status_code == 403
    assert state() == before


@pytest.mark.django_db
def test_granting_and_revoking_from_the_person_page_is_audited(client):
    boss = make_operator("boss", [("acme:*:*", "admin")])
    alice = make_operator("alice", [("acme:alice:*", "viewer")])
    login_as(client, boss)
    url = reverse("people:person", args=[alice.pk])
    # When the admin grants a role, then revokes the original one
    granted = client.post(url, {"scope": "acme:ops:*", "role": "approver"})
    assert granted.status_code == 302
    viewer = ScopeGrant.objects.get(user=alice, role="viewer")
    revoked = client.post(reverse("people:revoke", args=[alice.pk, viewer.pk]))
    assert revoked.status_code == 302
    # Then she holds only the new grant, and both changes are in the chains, by the admin
    assert list(ScopeGrant.objects.filter(user=alice).values_list("scope", "role")) == [
        ("acme:ops:*", "approver")
    ]
    added = AuditEvent.objects.get(event_type="access.grant_added", subject_id="acme:ops:*")
    gone = AuditEvent.objects.get(event_type="access.grant_revoked")
    assert added.actor == gone.actor == "boss"


@pytest.mark.django_db
def test_a_grant_refusal_is_a_form_error_and_writes_nothing(client):
    boss = make_operator("boss", [("acme:*:*", "admin")])
    alice = make_operator("alice", [("acme:alice:*", "viewer")])
    login_as(client, boss)
    url = reverse("people:person", args=[alice.pk])
    before = state()
    duplicate = client.post(url, {"scope": "acme:alice:*", "role": "viewer"})
    assert duplicate.status_code == 400
    assert "already holds viewer on acme:alice:*" in duplicate.content.decode()
    elsewhere = client.post(url, {"scope": "globex:*:*", "role": "viewer"})
    assert "You do not hold the admin role on globex:*:*" in elsewhere.content.decode()
    assert state() == before


@pytest.mark.django_db
def test_deactivate_previews_then_deactivates(client):
    boss = make_operator("boss", [("acme:*:*", "admin")])
    alice = make_operator("alice", [("acme:alice:*", "viewer")])
    login_as(client, boss)
    url = reverse("people:deactivate", args=[alice.pk])
    preview = client.get(url)
    assert preview.status_code == 200 and "can no longer sign in" in preview.content.decode()
    alice.refresh_from_db()
    assert alice.is_active  # the preview changed nothing
    assert client.post(url).status_code == 302
    alice.refresh_from_db()
    assert not alice.is_active
    assert not Client().login(username="alice", password=PASSWORD)  # she can no longer sign in
    assert AuditEvent.objects.filter(event_type="access.person_deactivated").count() == 1


@pytest.mark.django_db
def test_an_admin_cannot_deactivate_themself_from_the_page(client):
    boss = make_operator("boss", [("acme:*:*", "admin")])
    login_as(client, boss)
    before = state()
    response = client.post(
        reverse("people:deactivate", args=[boss.pk]),
        HTTP_REFERER=f"http://testserver{reverse('people:person', args=[boss.pk])}",
    )
    assert response.status_code == 302
    boss.refresh_from_db()
    assert boss.is_active
    assert state() == before


@pytest.mark.django_db
def test_the_person_page_reads_in_a_bounded_number_of_queries(
    client, django_assert_max_num_queries
):
    boss = make_operator("boss", [("acme:*:*", "admin")])
    alice = make_operator(
        "alice", [("acme:alice:*", "viewer"), ("acme:ops:*", "reviewer"), ("globex:*:*", "viewer")]
    )
    login_as(client, boss)
    with django_assert_max_num_queries(12):
        response = client.get(reverse("people:person", args=[alice.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "acme:ops:*" in html and "globex" not in html
    assert "1 grant in scopes you do not administer" in html
