"""Reads for the people pages: who holds which grants and tokens, within an admin's reach.

An operator sees the people holding a grant inside a subtree they
administer, with those grants and the tokens in reach; grants elsewhere are
only counted (a tenant admin learns that a person has other access, not
where). A platform admin sees every account, with or without grants. A
person out of reach is :class:`~aetnaweb.access.AccessDenied` (a 404).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from access.models import ApiToken, Invitation, ScopeGrant
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope

MAX_PEOPLE = 200
MAX_INVITATIONS = 100


@dataclass
class Person:
    user: Any
    grants: list[ScopeGrant] = field(default_factory=list)  # in the viewer's reach
    tokens: list[ApiToken] = field(default_factory=list)  # owned, in the viewer's reach
    grants_elsewhere: int = 0  # grants outside the viewer's reach: counted, never shown
    manageable: bool = False  # may the viewer deactivate or reactivate them


def _subtree_q(principal: Principal, prefix: str) -> Q | None:
    """Rows under a scope ``principal`` administers; ``None`` means every row (platform)."""
    if principal.is_system:
        return None
    q = Q(pk__in=[])
    for granted in access.administered_scopes(principal):
        lookups = granted.subtree_filter(prefix)
        if not lookups:
            return None
        q |= Q(**lookups)
    return q


def administers_people(principal: Principal) -> bool:
    return principal.is_system or bool(access.administered_scopes(principal))


def _people(principal: Principal, users: list[Any]) -> list[Person]:
    people = {user.pk: Person(user=user) for user in users}
    if not people:
        return []
    all_grants = ScopeGrant.objects.filter(user_id__in=list(people)).order_by("scope", "role")
    for grant in all_grants:
        person = people[grant.user_id]
        if access.may_administer(principal, grant.scope):
            person.grants.append(grant)
        else:
            person.grants_elsewhere += 1
    tokens = ApiToken.objects.filter(owner_id__in=list(people)).order_by("-created_at")
    within = _subtree_q(principal, "scope_")
    if within is not None:
        tokens = tokens.filter(within)
    for token in tokens:
        people[token.owner_id].tokens.append(token)  # type: ignore[index]
    for person in people.values():
        # Same rule as access.people.may_manage_person, from the rows already read.
        platform = access.may_administer(principal, Scope.platform())
        person.manageable = (
            person.grants_elsewhere == 0
            and (bool(person.grants) or platform)
            and (platform or not (person.user.is_staff or person.user.is_superuser))
        )
    return list(people.values())


def people_administered(principal: Principal) -> list[Person]:
    """The people within ``principal``'s reach, by account name (at most ``MAX_PEOPLE``)."""
    if not administers_people(principal):
        raise access.AccessDenied(f"{principal.label} administers no scope")
    users = get_user_model().objects.order_by("username")
    within = _subtree_q(principal, "scope_")
    if within is not None:
        holders = ScopeGrant.objects.filter(within).values("user_id")
        users = users.filter(pk__in=holders)
    return _people(principal, list(users[:MAX_PEOPLE]))


def person(principal: Principal, user_id: int) -> Person:
    """One person within reach (a grant in a subtree ``principal`` administers), else 404."""
    if not administers_people(principal):
        raise access.AccessDenied(f"{principal.label} administers no scope")
    users = get_user_model().objects.filter(pk=user_id)
    within = _subtree_q(principal, "scope_")
    if within is not None:
        users = users.filter(pk__in=ScopeGrant.objects.filter(within).values("user_id"))
    found = users.first()
    if found is None:
        raise access.AccessDenied(f"no person {user_id} within {principal.label}'s reach")
    return _people(principal, [found])[0]


def in_reach(principal: Principal, user_id: int) -> bool:
    """Whether :func:`person` would show ``user_id`` (after a revoke, they may have left it)."""
    try:
        person(principal, user_id)
    except access.AccessDenied:
        return False
    return True


def invitations_waiting(principal: Principal) -> list[Invitation]:
    """Invitations in reach that can still be accepted, newest first."""
    rows = Invitation.objects.select_related("invited_by").filter(
        accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    )
    within = _subtree_q(principal, "scope_")
    if within is not None:
        rows = rows.filter(within)
    return list(rows.order_by("-created_at", "-id")[:MAX_INVITATIONS])
