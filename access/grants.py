"""Operator scope grants: the one write path for adding and removing them.

The Django admin, ``manage.py access grant|revoke``, the demo seed and the
tests all come through :func:`grant_role` and :func:`revoke_role`, so every
change to who may see what is validated the same way and recorded in the
audit chain of the granted scope (``access.grant_added`` /
``access.grant_revoked``), in the same transaction as the row it describes.

Who may change grants: a trusted in-process caller (the system principal:
commands, the demo seed), or an operator who holds every capability (the
admin role) on a scope covering the granted one. So an admin of ``acme:*:*``
manages ``acme`` and its descendants and nothing else, and nobody hands out
more than they hold.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from access.models import Role, ScopeGrant
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.errors import DomainError
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.services import append_event


class GrantError(DomainError, ValueError):
    """A grant change that cannot be made as asked (unknown role, duplicate, no such grant)."""

    code = "grant_refused"
    status = 400
    meaning = "a grant change cannot be made as asked (unknown role, duplicate, no such grant)"


def _check_role(role: str) -> str:
    if role not in Role.values:
        raise GrantError(f"unknown role {role!r}: choose one of {', '.join(Role.values)}")
    return role


def require_grant_admin(principal: Principal, scope: Scope) -> None:
    """Raise :class:`~aetnaweb.access.AccessDenied` unless ``principal`` may manage grants at ``scope``.

    The rule is :func:`aetnaweb.access.may_administer` (the admin role on
    ``scope`` or a scope above it), the same one API tokens use.
    """
    if not access.may_administer(principal, scope):
        raise access.AccessDenied(f"{principal.label} may not manage grants at {scope}")


def _audit_payload(user: Any, role: str, scope: Scope, reason: str | None = None) -> dict[str, Any]:
    # Identifiers and structure only (audit-log-v1 "What payloads may contain").
    payload = {"user": user.get_username(), "user_id": user.pk, "role": role, "scope": str(scope)}
    if reason is not None:
        payload["reason"] = reason
    return payload


@storable_text_arguments
@transaction.atomic
def grant_role(
    *,
    user: Any,
    scope: Scope | str,
    role: str,
    principal: Principal,
) -> ScopeGrant:
    """Give ``user`` ``role`` on ``scope`` and its descendants; audited in ``scope``'s chain.

    Refuses an invalid scope (``ScopeError``), an unknown role or an existing
    identical grant (:class:`GrantError`), and a granter without the admin
    role there (``AccessDenied``); a refusal writes nothing.
    """
    parsed = Scope.parse(scope)
    role = _check_role(role)
    require_grant_admin(principal, parsed)
    if ScopeGrant.objects.filter(user=user, scope=str(parsed), role=role).exists():
        raise GrantError(f"{user.get_username()} already holds {role} on {parsed}")
    grant = ScopeGrant.objects.create(
        user=user,
        scope=str(parsed),
        scope_tenant=parsed.tenant,
        scope_user=parsed.user,
        scope_project=parsed.project,
        role=role,
        created_by=principal.label,
    )
    append_event(
        subject=parsed,
        event_type="access.grant_added",
        actor=access.audit_actor(principal),
        payload=_audit_payload(user, role, parsed),
    )
    return grant


@storable_text_arguments
@transaction.atomic
def revoke_role(
    *,
    user: Any,
    scope: Scope | str,
    role: str,
    principal: Principal,
    reason: str | None = None,
) -> None:
    """Remove ``user``'s ``role`` on exactly ``scope``; audited in ``scope``'s chain.

    Grants on other scopes (ancestors or descendants) are untouched: a revoke,
    like every write, lands at exactly one scope.
    """
    parsed = Scope.parse(scope)
    role = _check_role(role)
    require_grant_admin(principal, parsed)
    grant = (
        ScopeGrant.objects.select_for_update()
        .filter(user=user, scope=str(parsed), role=role)
        .first()
    )
    if grant is None:
        raise GrantError(f"{user.get_username()} holds no {role} grant on {parsed}")
    grant.delete()
    append_event(
        subject=parsed,
        event_type="access.grant_revoked",
        actor=access.audit_actor(principal),
        payload=_audit_payload(user, role, parsed, reason),
    )


@transaction.atomic
def delete_user(*, user: Any, principal: Principal) -> int:
    """Delete ``user``, revoking each of their grants first; returns how many were revoked.

    Deleting a user would otherwise cascade their grants away with no trace:
    each grant gets its ``access.grant_revoked`` event (``reason``
    ``user_deleted``) in its scope's chain, in the same transaction as the
    deletion. Refused (``AccessDenied``, nothing written) unless the deleter
    may manage grants on every scope the user holds one on.
    """
    held = list(ScopeGrant.objects.select_for_update().filter(user=user).order_by("scope", "role"))
    for grant in held:
        require_grant_admin(principal, Scope.parse(grant.scope))
    for grant in held:
        revoke_role(
            user=user,
            scope=grant.scope,
            role=grant.role,
            principal=principal,
            reason="user_deleted",
        )
    user.delete()
    return len(held)


def may_delete_user(principal: Principal, user: Any) -> bool:
    """Whether :func:`delete_user` would let ``principal`` delete ``user`` (their grants are in reach)."""
    scopes = ScopeGrant.objects.filter(user=user).values_list("scope", flat=True).distinct()
    return all(access.may_administer(principal, Scope.parse(scope)) for scope in scopes)


def grants_of(*, user: Any | None = None) -> list[ScopeGrant]:
    """Every grant (optionally one user's), ordered by user, scope and role."""
    queryset = ScopeGrant.objects.select_related("user").order_by("user__username", "scope", "role")
    if user is not None:
        queryset = queryset.filter(user=user)
    return list(queryset)
