"""People and access: inviting a teammate, deactivating and reactivating an account.

Grants themselves change through :mod:`access.grants` (``grant_role``,
``revoke_role``); this module adds the account's life around them, with the
same rule for who may act: an operator holding the admin role on a scope
covering the one concerned (:func:`aetnaweb.access.may_administer`), or the
system principal.

An invitation is a one-time link. Its token is shown once, to the admin who
made it, and only its SHA-256 is stored, so a database read cannot sign
anybody up. It works once, until it expires, and not after it is revoked;
accepting it creates the account with the password the invitee typed and
gives the one grant the invitation names, as the inviter (who must still
administer that scope). Every change is an audit event in the chain of the
scope it concerns, in the same transaction as the change.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from access.grants import GrantError, grant_role
from access.models import ApiToken, Invitation, Role, ScopeGrant
from access.tokens import revoke_token
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.services import append_event

DEFAULT_INVITATION_DAYS = 7
MAX_INVITATION_DAYS = 30
INVITATION_TOKEN_BYTES = 32


class PeopleError(GrantError):
    """An invitation or account change that cannot be made as asked.

    It answers with :class:`GrantError`'s code (``grant_refused``): these
    pages have no API of their own, and an invitation is an offer of a grant.
    """

    code = "grant_refused"
    status = 400
    meaning = "an invitation or account change cannot be made as asked"


class InvitationInvalid(PeopleError):
    """The link is unknown, used, expired or revoked: said the same way for each.

    A guessed token learns nothing about which invitations exist.
    """

    code = "grant_refused"
    status = 400
    meaning = "an invitation link that is unknown, used, expired or revoked"


@dataclass(frozen=True)
class IssuedInvitation:
    invitation: Invitation
    token: str  # the secret part of the link; shown once, never stored


def hash_invitation_token(token: str) -> str:
    return sha256_text(token)


def _check_username(username: str) -> str:
    username = (username or "").strip()
    if not username:
        raise PeopleError("an invitation needs the account name the teammate will sign in with")
    if len(username) > 150:
        raise PeopleError("an account name has at most 150 characters")
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError as exc:
        raise PeopleError(
            f"{username!r} is not a valid account name: use letters, digits and @ . + - _ only"
        ) from exc
    return username


def _check_email(email: str) -> str:
    email = (email or "").strip()
    if email:
        try:
            validate_email(email)
        except ValidationError as exc:
            raise PeopleError(f"{email!r} is not an email address") from exc
    return email


def pending_invitation_for(username: str) -> Invitation | None:
    """The invitation for ``username`` that can still be accepted, if any."""
    return (
        Invitation.objects.filter(
            username__iexact=username,
            accepted_at__isnull=True,
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
        )
        .order_by("-created_at")
        .first()
    )


def _check_invitation(
    principal: Principal, username: str, scope: Scope | str, role: str, email: str, days: int
) -> tuple[Scope, str, str]:
    """The invitation's scope, name and email once every refusal rule holds."""
    parsed = Scope.parse(scope)
    if not access.may_administer(principal, parsed):
        raise access.AccessDenied(f"{principal.label} may not invite people to {parsed}")
    if role not in Role.values:
        raise PeopleError(f"unknown role {role!r}: choose one of {', '.join(Role.values)}")
    username = _check_username(username)
    email = _check_email(email)
    if not 1 <= days <= MAX_INVITATION_DAYS:
        raise PeopleError(f"an invitation lasts 1 to {MAX_INVITATION_DAYS} days")
    if get_user_model().objects.filter(username__iexact=username).exists():
        raise PeopleError(
            f"an account named {username!r} already exists: open it on the people page and "
            "grant the role there"
        )
    if pending_invitation_for(username) is not None:
        raise PeopleError(
            f"{username!r} already has an invitation waiting: revoke it first to send a new link"
        )
    return parsed, username, email


@storable_text_arguments
@transaction.atomic
def invite_person(
    *,
    principal: Principal,
    invited_by: Any,
    username: str,
    scope: Scope | str,
    role: str,
    email: str = "",
    expires_in_days: int = DEFAULT_INVITATION_DAYS,
) -> IssuedInvitation:
    """Make a one-time link for ``username`` to join with ``role`` on ``scope``; the token is returned once.

    Refused (nothing written) unless ``principal`` administers ``scope``; for
    an unknown role, an invalid name or email, a name an account or a live
    invitation already has, and a lifetime outside 1 to 30 days.
    """
    parsed, username, email = _check_invitation(
        principal, username, scope, role, email, expires_in_days
    )
    token = secrets.token_urlsafe(INVITATION_TOKEN_BYTES)
    now = timezone.now()
    invitation = Invitation.objects.create(
        username=username,
        email=email,
        scope=str(parsed),
        scope_tenant=parsed.tenant,
        scope_user=parsed.user,
        scope_project=parsed.project,
        role=role,
        token_hash=hash_invitation_token(token),
        invited_by=invited_by,
        created_at=now,
        expires_at=now + timedelta(days=expires_in_days),
    )
    append_event(
        subject=parsed,
        event_type="access.person_invited",
        actor=access.audit_actor(principal),
        # Identifiers only: the email address is personal data, and never the token.
        payload={
            "invitation_id": invitation.pk,
            "user": username,
            "role": role,
            "scope": str(parsed),
            "expires_at": invitation.expires_at.isoformat(),
        },
    )
    return IssuedInvitation(invitation=invitation, token=token)


def invitation_for_token(token: str) -> Invitation:
    """The invitation ``token`` opens, if it can still be accepted; else :class:`InvitationInvalid`."""
    invitation = (
        Invitation.objects.select_related("invited_by")
        .filter(token_hash=hash_invitation_token(token or ""))
        .first()
    )
    if (
        invitation is None
        or invitation.accepted_at is not None
        or invitation.revoked_at is not None
        or invitation.expires_at <= timezone.now()
    ):
        raise InvitationInvalid(
            "this invitation link is not valid: it was already used, it expired or it was "
            "revoked. Ask the person who invited you for a new one."
        )
    return invitation


@storable_text_arguments
@transaction.atomic
def accept_invitation(*, token: str, password: str, password_again: str) -> Any:
    """Create the invited account with ``password`` and give it the invitation's grant.

    The link works once: the row is locked, checked and marked used in one
    transaction. Refused (nothing written) for a link that is not valid, two
    passwords that differ, a password Django's validators refuse, and an
    inviter who no longer administers the scope.
    """
    found = invitation_for_token(token)
    invitation = Invitation.objects.select_for_update().get(pk=found.pk)
    if invitation.accepted_at is not None or invitation.revoked_at is not None:
        # Re-read under the lock: a second tab, or a revoke, won the race.
        raise InvitationInvalid("this invitation link was already used or revoked")
    if password != password_again:
        raise PeopleError(
            "the two passwords differ: type the same password twice", field="password"
        )
    user_model = get_user_model()
    if user_model.objects.filter(username__iexact=invitation.username).exists():
        raise PeopleError(
            f"an account named {invitation.username!r} was created meanwhile: ask for a new invitation"
        )
    candidate = user_model(username=invitation.username, email=invitation.email)
    try:
        password_validation.validate_password(password, user=candidate)
    except ValidationError as exc:
        raise PeopleError(" ".join(exc.messages), field="password") from exc
    inviter = access.operator_principal(invitation.invited_by)
    if not invitation.invited_by.is_active or not access.may_administer(inviter, invitation.scope):
        raise InvitationInvalid(
            f"{invitation.invited_by.get_username()} no longer administers {invitation.scope}, so "
            "this invitation cannot give that role: ask an administrator for a new one"
        )
    user = user_model.objects.create_user(
        username=invitation.username, email=invitation.email, password=password
    )
    invitation.accepted_at = timezone.now()
    invitation.accepted_user = user
    invitation.save(update_fields=["accepted_at", "accepted_user"])
    append_event(
        subject=invitation.scope,
        event_type="access.invitation_accepted",
        actor=user.get_username(),
        payload={"invitation_id": invitation.pk, "user": user.get_username(), "user_id": user.pk},
    )
    grant_role(user=user, scope=invitation.scope, role=invitation.role, principal=inviter)
    return user


@transaction.atomic
def revoke_invitation(*, principal: Principal, invitation_id: int) -> Invitation:
    """Make a waiting invitation's link stop working. One out of reach reads as unknown."""
    invitation = Invitation.objects.select_for_update().filter(pk=invitation_id).first()
    if invitation is None or not access.may_administer(principal, invitation.scope):
        raise access.AccessDenied(f"no invitation {invitation_id} within your reach")
    if invitation.accepted_at is not None:
        raise PeopleError(f"the invitation for {invitation.username} was already accepted")
    if invitation.revoked_at is not None:
        raise PeopleError(f"the invitation for {invitation.username} was already revoked")
    invitation.revoked_at = timezone.now()
    invitation.revoked_by = principal.label
    invitation.save(update_fields=["revoked_at", "revoked_by"])
    append_event(
        subject=invitation.scope,
        event_type="access.invitation_revoked",
        actor=access.audit_actor(principal),
        payload={"invitation_id": invitation.pk, "user": invitation.username},
    )
    return invitation


def _account_scopes(user: Any) -> list[Scope]:
    scopes = ScopeGrant.objects.filter(user=user).values_list("scope", flat=True).distinct()
    return sorted({Scope.parse(scope) for scope in scopes}, key=str)


def may_manage_person(principal: Principal, user: Any) -> bool:
    """Whether ``principal`` may deactivate or reactivate ``user``.

    Every scope the person holds a grant on must be in ``principal``'s reach
    (so a tenant admin cannot lock a person out of another tenant); a person
    with no grant left, and a staff account (the Django admin's), are a
    platform admin's to manage.
    """
    scopes = _account_scopes(user) or [Scope.platform()]
    if user.is_staff or user.is_superuser:
        # A staff account opens the Django admin, the emergency door: a tenant
        # admin must not be able to lock it.
        scopes.append(Scope.platform())
    return all(access.may_administer(principal, scope) for scope in scopes)


def _set_active(*, principal: Principal, user: Any, active: bool) -> list[Scope]:
    if not may_manage_person(principal, user):
        raise access.AccessDenied(f"{principal.label} may not manage {user.get_username()}")
    if principal.user_id is not None and principal.user_id == user.pk and not active:
        raise PeopleError("you cannot deactivate your own account: ask another administrator")
    if user.is_active == active:
        state = "active" if active else "deactivated"
        raise PeopleError(f"{user.get_username()} is already {state}")
    live_tokens: list[ApiToken] = []
    if not active:
        # Someone who may no longer sign in keeps no working agent key either:
        # the secrets they saw must stop working with them.
        live_tokens = list(
            ApiToken.objects.select_for_update()
            .filter(owner=user, revoked_at__isnull=True, expires_at__gt=timezone.now())
            .order_by("pk")
        )
        outside = [
            t.token_prefix for t in live_tokens if not access.may_administer(principal, t.scope)
        ]
        if outside:
            raise PeopleError(
                f"{user.get_username()} owns live API tokens outside your reach "
                f"({', '.join(outside)}): a platform administrator must deactivate them"
            )
    user.is_active = active
    user.save(update_fields=["is_active"])
    for token in live_tokens:
        revoke_token(principal=principal, token_prefix=token.token_prefix)
    scopes = _account_scopes(user) or [Scope.platform()]
    for scope in scopes:
        append_event(
            subject=scope,
            event_type="access.person_deactivated" if not active else "access.person_reactivated",
            actor=access.audit_actor(principal),
            payload={"user": user.get_username(), "user_id": user.pk},
        )
    return scopes


@transaction.atomic
def deactivate_person(*, principal: Principal, user: Any) -> list[Scope]:
    """Stop ``user`` signing in (their sessions end at the next request); grants are kept.

    Their live API tokens are revoked too (each audited as a token
    revocation). Audited in the chain of each scope they hold a grant on;
    returns those scopes. Refused for one's own account, an inactive account, and a person
    with a grant outside ``principal``'s reach (``AccessDenied``).
    """
    return _set_active(principal=principal, user=user, active=False)


@transaction.atomic
def reactivate_person(*, principal: Principal, user: Any) -> list[Scope]:
    """Let a deactivated ``user`` sign in again, with the grants they still hold."""
    return _set_active(principal=principal, user=user, active=True)
