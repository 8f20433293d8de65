"""Permissions: the only place the rules live (design.md "Permissions").

Two questions, always asked together:

- *what* a principal may do: a capability, granted to operators through a
  role and to agent tokens directly;
- *where*: operators act on a granted scope and its descendants, and may also
  read that scope's ancestors (what a recall inside their subtree reads);
  tokens read and write only inside their subtree.

Services call :func:`require` before they write; selectors filter with
:func:`scope_q` so they never return a row the principal may not see.
Out-of-reach objects surface as :class:`AccessDenied`, which views and the API
turn into 404 so the existence of other tenants does not leak.

This module is kernel: it imports no app. The rows it reads (grants and
tokens) belong to the ``access`` app and reach it through two seams, so the
rules never depend on where the data lives:

- :func:`operator_principal` reads a person's grants through the user's
  ``scope_grants`` relation (declared by ``access.models.ScopeGrant``);
- :func:`token_principal` takes any object shaped like :class:`TokenRow`
  (``access.models.ApiToken`` is one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import models
from django.db.models import Q

from aetnaweb.errors import DomainError
from aetnaweb.scopes import Scope


class Role(models.TextChoices):
    """The operator roles a grant carries; what each may do is :data:`ROLE_CAPABILITIES`."""

    VIEWER = "viewer", "Viewer"
    REVIEWER = "reviewer", "Reviewer"
    APPROVER = "approver", "Approver"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Admin"


# Capabilities ---------------------------------------------------------------

READ = "read"  # list, show, recall, inspect
WRITE = "write"  # remember, capture, log an agent action
FORGET = "forget"  # forget with a receipt
REVIEW = "review"  # promote, reject quarantined records
PROPOSE = "propose"  # propose facts for review
STAGE = "stage"  # stage a guarded action
APPROVE = "approve"  # approve, deny, commit, abort, recover, purge payloads
AUDIT = "audit"  # verify chains, checkpoints, exports

ALL_CAPABILITIES = frozenset({READ, WRITE, FORGET, REVIEW, PROPOSE, STAGE, APPROVE, AUDIT})

ROLE_CAPABILITIES: dict[str, frozenset[str]] = {
    Role.VIEWER: frozenset({READ}),
    Role.REVIEWER: frozenset({READ, REVIEW, FORGET}),
    Role.APPROVER: frozenset({READ, APPROVE}),
    Role.AUDITOR: frozenset({READ, AUDIT}),
    Role.ADMIN: ALL_CAPABILITIES,
}

# What an agent token may ever hold: promote, reject, approve and commit stay
# with people in the dashboard.
TOKEN_CAPABILITIES = frozenset({READ, WRITE, FORGET, PROPOSE, STAGE, AUDIT})


class AccessDenied(DomainError):
    """The principal may not do this here. Shown as 404, never as 403."""

    code = "access_denied"
    status = 404
    meaning = "outside the principal's reach; answered exactly like something that does not exist"


@dataclass(frozen=True)
class Principal:
    """Someone acting: ``label`` is what the audit chain records as the actor."""

    label: str
    kind: str  # "operator", "token" or "system"
    # (scope, capabilities) pairs; a system principal has none and may do anything.
    bindings: tuple[tuple[Scope, frozenset[str]], ...] = ()
    user_id: int | None = None
    token_id: int | None = None
    owner_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_system(self) -> bool:
        return self.kind == "system"

    @property
    def is_operator(self) -> bool:
        return self.kind == "operator"

    @property
    def is_token(self) -> bool:
        return self.kind == "token"


def system_principal(label: str = "system") -> Principal:
    """The trusted in-process caller: management commands and the Python API."""
    return Principal(label=label, kind="system")


# The trusted in-process caller, for commands, the demo and imports to pass explicitly.
SYSTEM = system_principal()


def audit_actor(
    principal: Principal, actor: str | None = None, *, default: str | None = None
) -> str:
    """The actor the audit chain records for an act by ``principal``: one rule for every app.

    A person or a token is always recorded as itself (``principal.label``): a
    caller-supplied ``actor`` can never stand in for their identity, so
    ``actor`` is ignored for them. Only the system principal (a management
    command's ``--actor``, an import, the demo) may name the actor; without
    one it is recorded as ``default`` (a verb's spec default such as
    ``user`` or ``agent``) or, failing that, its own label.
    """
    if not principal.is_system:
        return principal.label
    return actor or default or principal.label


def operator_principal(user: Any) -> Principal:
    """A signed-in person, with their grants loaded once (one query)."""
    if not getattr(user, "is_authenticated", False):
        return Principal(label="anonymous", kind="operator")
    # The seam to the access app's data: the reverse relation its ScopeGrant
    # model declares on the user, so the rules import no app.
    grants = user.scope_grants.values_list("scope", "role")
    merged: dict[str, set[str]] = {}
    for scope, role in grants:
        merged.setdefault(scope, set()).update(ROLE_CAPABILITIES.get(role, frozenset()))
    bindings = tuple(
        (Scope.parse(scope), frozenset(caps)) for scope, caps in sorted(merged.items())
    )
    return Principal(label=user.get_username(), kind="operator", bindings=bindings, user_id=user.pk)


class TokenRow(Protocol):
    """What :func:`token_principal` reads from a token row (``access.models.ApiToken``)."""

    @property
    def pk(self) -> Any: ...

    @property
    def name(self) -> str: ...

    @property
    def scope(self) -> str: ...

    @property
    def capabilities(self) -> Any: ...

    @property
    def owner_id(self) -> int | None: ...


def token_principal(token: TokenRow) -> Principal:
    """An agent acting with ``token``: its one scope subtree and its capabilities."""
    caps = frozenset(token.capabilities) & TOKEN_CAPABILITIES
    return Principal(
        label=f"agent:{token.name}",
        kind="token",
        bindings=((Scope.parse(token.scope), caps),),
        token_id=token.pk,
        owner_id=token.owner_id,
    )


def may(principal: Principal, capability: str, scope: Scope | str) -> bool:
    """May ``principal`` exercise ``capability`` on exactly ``scope``?"""
    if capability not in ALL_CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}")
    if principal.is_system:
        return True
    scope = Scope.parse(scope)
    for granted, caps in principal.bindings:
        if capability not in caps:
            continue
        if granted.covers(scope):
            return True
        # Operators may read what a recall inside their subtree reads: the
        # ancestors of their grant. Tokens stay inside their subtree.
        if capability == READ and principal.is_operator and scope.covers(granted):
            return True
    return False


def recalled_ancestors(principal: Principal) -> list[str]:
    """Ancestor scopes whose active records a token's recall hands it (scopes.md: a read sees its lineage).

    Operators already read ancestors (:func:`may`). A token stays inside its
    subtree, except that a record recall gave it can be opened by ID: the
    caller limits this to what recall returns (active records).
    """
    if principal.is_system or principal.is_operator:
        return []
    found: set[str] = set()
    for granted, caps in principal.bindings:
        if READ in caps:
            found.update(str(ancestor) for ancestor in granted.ancestors())
    return sorted(found)


def require(principal: Principal, capability: str, scope: Scope | str) -> Scope:
    """Return the parsed scope, or raise :class:`AccessDenied`."""
    parsed = Scope.parse(scope)
    if not may(principal, capability, parsed):
        raise AccessDenied(f"{principal.label} may not {capability} at {parsed}")
    return parsed


def may_act(principal: Principal, capability: str, scope: Scope | str) -> bool:
    """May ``principal`` exercise ``capability`` at ``scope`` as an act, inside a granted subtree?

    Unlike :func:`may`, an operator's read of an ancestor does not count. A
    read that leaves evidence (a recall, a persona) writes into the chain of
    the scope it runs at, and operators act on their subtree only, so their
    trace never lands in an ancestor's chain that other tenants can read.
    """
    if capability not in ALL_CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}")
    if principal.is_system:
        return True
    parsed = Scope.parse(scope)
    return any(
        capability in caps and granted.covers(parsed) for granted, caps in principal.bindings
    )


class AncestorOnly(AccessDenied):
    """The scope is readable (an ancestor of a grant) but not a place to act from."""

    code = "ancestor_only"
    # Answered like any AccessDenied on the API (views say more: the page may read it).
    status = 404
    meaning = "the scope is readable from a grant below it but not a place to act from"


def require_act(principal: Principal, capability: str, scope: Scope | str) -> Scope:
    """Return the parsed scope, or raise :class:`AccessDenied` (:class:`AncestorOnly` for an ancestor)."""
    parsed = require(principal, capability, scope)
    if not may_act(principal, capability, parsed):
        own = ", ".join(str(s) for s in granted_scopes(principal, capability)) or "none"
        raise AncestorOnly(
            f"{principal.label} may read {parsed} only as an ancestor of their own scopes "
            f"({own}); recall from one of those instead: it reads {parsed} too, and its "
            "trace stays in your own scope's audit chain"
        )
    return parsed


def administered_scopes(principal: Principal) -> list[Scope]:
    """Subtree roots where an operator holds the admin role (every capability).

    Only the admin role carries every capability, so "all capabilities on a
    grant" is exactly "an admin grant" even when several roles share a scope.
    Tokens administer nothing; the system principal is handled by callers.
    """
    if not principal.is_operator:
        return []
    return [scope for scope, caps in principal.bindings if caps >= ALL_CAPABILITIES]


def may_administer(principal: Principal, scope: Scope | str) -> bool:
    """May ``principal`` manage credentials (API tokens) for ``scope``'s subtree?"""
    if principal.is_system:
        return True
    parsed = Scope.parse(scope)
    return any(granted.covers(parsed) for granted in administered_scopes(principal))


def may_erase_subject(principal: Principal, scope: Scope | str) -> bool:
    """May ``principal`` erase everything under ``scope`` (a person's subtree, issue 32)?

    An admin-level act: an operator must administer the subtree; a token (which
    administers nothing) must hold every capability a token may hold on a grant
    covering it, so a read-and-write agent key can never erase a person.
    """
    if may_administer(principal, scope):
        return True
    if principal.kind != "token":
        return False
    parsed = Scope.parse(scope)
    return any(
        granted.covers(parsed) and caps >= TOKEN_CAPABILITIES
        for granted, caps in principal.bindings
    )


def has_capability_anywhere(principal: Principal, capability: str) -> bool:
    return principal.is_system or any(capability in caps for _, caps in principal.bindings)


def granted_scopes(principal: Principal, capability: str) -> list[Scope]:
    """The subtree roots where ``principal`` holds ``capability`` (empty for system)."""
    return [scope for scope, caps in principal.bindings if capability in caps]


def scope_q(
    principal: Principal, capability: str, *, prefix: str = "", canonical_field: str = "scope"
) -> Q:
    """A filter for rows whose scope the principal may exercise ``capability`` on.

    Rows store a scope as ``{prefix}tenant``, ``{prefix}user`` and
    ``{prefix}project`` columns plus the canonical string in
    ``canonical_field``. Subtrees are column equalities; ancestors (for
    operators' reads) are an exact ``IN`` over canonical strings.
    """
    if principal.is_system:
        return Q()
    q = Q(pk__in=[])
    ancestors: set[str] = set()
    for granted, caps in principal.bindings:
        if capability not in caps:
            continue
        lookups = granted.subtree_filter(prefix)
        if not lookups:  # a grant on platform:*:* sees everything
            return Q()
        q |= Q(**lookups)
        if capability == READ and principal.is_operator:
            ancestors.update(str(a) for a in granted.ancestors())
    if ancestors:
        q |= Q(**{f"{canonical_field}__in": sorted(ancestors)})
    return q
