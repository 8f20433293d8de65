"""People and access services (issue 33 item 3): invitations, acceptance, deactivation."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from access import people, selectors, tokens
from access.models import ApiToken, Invitation, ScopeGrant
from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from audit.models import AuditEvent
from tests.factories import make_operator

GOOD_PASSWORD = "violet-Harbour-2931!"


def admin_of(scope: str, username: str = "boss"):
    user = make_operator(username, [(scope, "admin")])
    return user, operator_principal(user)


def invite(principal, by, **overrides) -> people.IssuedInvitation:
    fields = {"username": "newbie", "scope": "acme:*:*", "role": "reviewer"}
    fields.update(overrides)
    return people.invite_person(principal=principal, invited_by=by, **fields)


def counts() -> tuple[int, int, int, int]:
    return (
        Invitation.objects.count(),
        get_user_model().objects.count(),
        ScopeGrant.objects.count(),
        AuditEvent.objects.count(),
    )


@pytest.mark.django_db
def test_an_invitation_stores_only_the_token_hash_and_is_audited_without_it():
    # Given a tenant admin
    boss, principal = admin_of("acme:*:*")
    # When they invite a teammate
    issued = invite(principal, boss, email="new@example.com")
    # Then the row keeps the token's SHA-256, never the token
    row = Invitation.objects.get()
    assert row.token_hash == people.hash_invitation_token(issued.token)
    assert issued.token not in row.token_hash
    assert row.expires_at - row.created_at == timedelta(days=people.DEFAULT_INVITATION_DAYS)
    # And the tenant's chain records who invited whom, with no token or email
    event = AuditEvent.objects.get(event_type="access.person_invited")
    assert (event.subject_id, event.actor) == ("acme:*:*", "boss")
    assert issued.token not in event.payload and "example.com" not in event.payload
    assert json.loads(event.payload)["role"] == "reviewer"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"scope": "globex:*:*"}, None),  # out of reach: AccessDenied
        ({"role": "owner"}, "unknown role"),
        ({"username": "bad name!"}, "not a valid account name"),
        ({"username": ""}, "needs the account name"),
        ({"email": "not-an-address"}, "not an email address"),
        ({"expires_in_days": 0}, "1 to 30 days"),
        ({"expires_in_days": 31}, "1 to 30 days"),
        ({"username": "boss"}, "already exists"),
    ],
)
def test_invitation_refusals_write_nothing(overrides, message):
    # Given a tenant admin
    boss, principal = admin_of("acme:*:*")
    before = counts()
    # When an invitation is asked for with a bad field
    if message is None:
        with pytest.raises(AccessDenied):
            invite(principal, boss, **overrides)
    else:
        with pytest.raises(people.PeopleError, match=message):
            invite(principal, boss, **overrides)
    # Then nothing was written
    assert counts() == before


@pytest.mark.django_db
def test_a_second_invitation_for_a_waiting_name_is_refused():
    boss, principal = admin_of("acme:*:*")
    invite(principal, boss)
    before = counts()
    with pytest.raises(people.PeopleError, match="already has an invitation waiting"):
        invite(principal, boss, role="viewer")
    assert counts() == before


@pytest.mark.django_db
def test_a_viewer_cannot_invite():
    user = make_operator("vic", [("acme:*:*", "viewer")])
    before = counts()
    with pytest.raises(AccessDenied):
        invite(operator_principal(user), user)
    assert counts() == before


@pytest.mark.django_db
def test_accepting_creates_the_account_with_its_password_and_grant_as_the_inviter():
    # Given an invitation
    boss, principal = admin_of("acme:*:*")
    issued = invite(principal, boss, scope="acme:team:*")
    # When the invitee sets a password
    user = people.accept_invitation(
        token=issued.token, password=GOOD_PASSWORD, password_again=GOOD_PASSWORD
    )
    # Then the account signs in with that password and holds the invited role
    assert user.check_password(GOOD_PASSWORD) and user.is_active
    grant = ScopeGrant.objects.get(user=user)
    assert (grant.scope, grant.role, grant.created_by) == ("acme:team:*", "reviewer", "boss")
    # And the chain says who accepted and who granted
    accepted = AuditEvent.objects.get(event_type="access.invitation_accepted")
    assert (accepted.subject_id, accepted.actor) == ("acme:team:*", "newbie")
    granted = AuditEvent.objects.get(event_type="access.grant_added", subject_id="acme:team:*")
    assert granted.actor == "boss"
    assert Invitation.objects.get().accepted_user == user


@pytest.mark.django_db
def test_a_link_works_once():
    boss, principal = admin_of("acme:*:*")
    issued = invite(principal, boss)
    people.accept_invitation(
        token=issued.token, password=GOOD_PASSWORD, password_again=GOOD_PASSWORD
    )
    before = counts()
    with pytest.raises(people.InvitationInvalid):
        people.accept_invitation(
            token=issued.token, password=GOOD_PASSWORD, password_again=GOOD_PASSWORD
        )
    assert counts() == before


@pytest.mark.django_db
def test_an_expired_revoked_or_unknown_link_is_refused_the_same_way():
    boss, principal = admin_of("acme:*:*")
    expired = invite(principal, boss, username="late")
    Invitation.objects.filter(username="late").update(expires_at=timezone.now())
    revoked = invite(principal, boss, username="gone")
    people.revoke_invitation(
        principal=principal, invitation_id=Invitation.objects.get(username="gone").pk
    )
    before = counts()
    messages = set()
    for token in (expired.token, revoked.token, "guessed-token"):
        with pytest.raises(people.InvitationInvalid) as caught:
            people.accept_invitation(
                token=token, password=GOOD_PASSWORD, password_again=GOOD_PASSWORD
            )
        messages.add(str(caught.value))
    assert len(messages) == 1
    assert counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("password", "again", "message"),
    [
        (GOOD_PASSWORD, GOOD_PASSWORD + "x", "passwords differ"),
        ("short", "short", "too short"),
        ("password123", "password123", "too common"),
        ("93817264551", "93817264551", "entirely numeric"),
    ],
)
def test_a_password_the_validators_refuse_creates_nothing(password, again, message):
    boss, principal = admin_of("acme:*:*")
    issued = invite(principal, boss)
    before = counts()
    with pytest.raises(people.PeopleError, match=message) as caught:
        people.accept_invitation(token=issued.token, password=password, password_again=again)
    assert caught.value.field == "password"
    assert counts() == before
    # And the link still works afterwards
    people.accept_invitation(
        token=issued.token, password=GOOD_PASSWORD, password_again=GOOD_PASSWORD
    )


@pytest.mark.django_db
def test_an_inviter_who_lost_the_admin_role_cannot_grant_through_an_old_link():
    boss, principal = admin_of("acme:*:*")
    issued = invite(principal, boss)
    ScopeGrant.objects.filter(user=boss).update(role="viewer")
    before = counts()
    with pytest.raises(people.InvitationInvalid, match="no longer administers"):
        people.accept_invitation(
            token=issued.token, password=GOOD_PASSWORD, password_again=GOOD_PASSWORD
        )
    assert counts() == before


@pytest.mark.django_db
def test_revoking_an_invitation_out_of_reach_reads_as_unknown_and_writes_nothing():
    boss, principal = admin_of("acme:*:*")
    invite(principal, boss)
    _, other = admin_of("globex:*:*", "gabe")
    invitation = Invitation.objects.get()
    before = counts()
    with pytest.raises(AccessDenied):
        people.revoke_invitation(principal=other, invitation_id=invitation.pk)
    assert counts() == before
    assert Invitation.objects.get().revoked_at is None


@pytest.mark.django_db
def test_deactivating_stops_sign_in_revokes_live_tokens_and_audits_each_scope():
    # Given a person with two grants in acme and a live token
    _boss, principal = admin_of("acme:*:*")
    alice = make_operator("alice", [("acme:alice:*", "reviewer"), ("acme:ops:*", "viewer")])
    issued = tokens.create_token(
        principal=SYSTEM,
        name="alice-bot",
        scope="acme:alice:*",
        capabilities=["read"],
        expires_at=timezone.now() + timedelta(days=3),
        owner=alice,
    )
    # When the tenant admin deactivates her
    scopes = people.deactivate_person(principal=principal, user=alice)
    # Then she is inactive, her grants stay, her token no longer works
    alice.refresh_from_db()
    assert not alice.is_active
    assert ScopeGrant.objects.filter(user=alice).count() == 2
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is not None
    # And each of her scopes' chains records it
    events = AuditEvent.objects.filter(event_type="access.person_deactivated")
    assert sorted(e.subject_id for e in events) == ["acme:alice:*", "acme:ops:*"]
    assert [str(s) for s in scopes] == ["acme:alice:*", "acme:ops:*"]
    assert AuditEvent.objects.filter(event_type="access.token_revoked").count() == 1
    # And reactivating lets her in again
    people.reactivate_person(principal=principal, user=alice)
    alice.refresh_from_db()
    assert alice.is_active
    assert AuditEvent.objects.filter(event_type="access.person_reactivated").count() == 2


@pytest.mark.django_db
def test_deactivation_refusals_write_nothing():
    boss, principal = admin_of("acme:*:*")
    both = make_operator("bea", [("acme:bea:*", "viewer"), ("globex:*:*", "viewer")])
    nobody = make_operator("ned")
    before = counts()
    # A person with a grant outside the admin's reach, or with no grants at all
    for user in (both, nobody):
        with pytest.raises(AccessDenied):
            people.deactivate_person(principal=principal, user=user)
    # One's own account
    with pytest.raises(people.PeopleError, match="your own account"):
        people.deactivate_person(principal=principal, user=boss)
    # Reactivating someone already active
    with pytest.raises(people.PeopleError, match="already active"):
        people.reactivate_person(
            principal=principal, user=make_operator("amy", [("acme:amy:*", "viewer")])
        )
    assert AuditEvent.objects.count() == before[3] + 1  # amy's grant only
    both.refresh_from_db()
    boss.refresh_from_db()
    assert both.is_active and boss.is_active


@pytest.mark.django_db
def test_a_platform_admin_may_deactivate_a_person_with_no_grants():
    root = make_operator("root", [("platform:*:*", "admin")])
    ned = make_operator("ned")
    people.deactivate_person(principal=operator_principal(root), user=ned)
    ned.refresh_from_db()
    assert not ned.is_active
    assert (
        AuditEvent.objects.get(event_type="access.person_deactivated").subject_id == "platform:*:*"
    )


@pytest.mark.django_db
def test_a_token_out_of_reach_refuses_deactivation():
    _boss, principal = admin_of("acme:*:*")
    alice = make_operator("alice", [("acme:alice:*", "viewer")])
    tokens.create_token(
        principal=SYSTEM,
        name="elsewhere",
        scope="globex:*:*",
        capabilities=["read"],
        expires_at=timezone.now() + timedelta(days=3),
        owner=alice,
    )
    before = counts()
    with pytest.raises(people.PeopleError, match="outside your reach"):
        people.deactivate_person(principal=principal, user=alice)
    assert counts() == before
    alice.refresh_from_db()
    assert alice.is_active


@pytest.mark.django_db
def test_only_a_platform_admin_may_deactivate_a_staff_account():
    # Given a staff account whose only grant is in acme
    staff = make_operator("sue", [("acme:sue:*", "viewer")], is_staff=True)
    _, tenant_admin = admin_of("acme:*:*")
    before = counts()
    # When the tenant admin tries, it is refused and nothing changes
    with pytest.raises(AccessDenied):
        people.deactivate_person(principal=tenant_admin, user=staff)
    assert counts() == before
    staff.refresh_from_db()
    assert staff.is_active
    # And a platform admin may
    root = operator_principal(make_operator("root", [("platform:*:*", "admin")]))
    people.deactivate_person(principal=root, user=staff)
    staff.refresh_from_db()
    assert not staff.is_active


@pytest.mark.django_db
def test_a_revoked_invitation_cannot_be_accepted_even_from_a_page_opened_before():
    boss, principal = admin_of("acme:*:*")
    issued = invite(principal, boss)
    # the invitee's page was opened (the link was valid then) ...
    assert people.invitation_for_token(issued.token).username == "newbie"
    # ... and the admin revokes it before they submit
    people.revoke_invitation(principal=principal, invitation_id=Invitation.objects.get().pk)
    before = counts()
    with pytest.raises(people.InvitationInvalid):
        people.accept_invitation(
            token=issued.token, password=GOOD_PASSWORD, password_again=GOOD_PASSWORD
        )
    assert counts() == before


@pytest.mark.django_db
def test_the_people_list_offers_deactivation_exactly_where_the_service_allows_it():
    # Given people in and out of an acme admin's reach, staff among them
    make_operator("amy", [("acme:amy:*", "viewer")])
    make_operator("bea", [("acme:bea:*", "viewer"), ("globex:*:*", "viewer")])
    make_operator("sue", [("acme:sue:*", "viewer")], is_staff=True)
    make_operator("ned")
    for grants in ([("acme:*:*", "admin")], [("platform:*:*", "admin")]):
        principal = operator_principal(make_operator(f"admin{len(grants[0][0])}", grants))
        # Then the list's flag (read in bulk) is the service's rule, person by person
        for person in selectors.people_administered(principal):
            assert person.manageable == people.may_manage_person(principal, person.user), (
                principal.label,
                person.user.username,
            )
