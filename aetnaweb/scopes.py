"""The Scope value type (docs/spec/scopes.md).

A scope is written ``tenant:user:project``. Parsing refuses, never repairs:
every command, service, form and API endpoint validates a scope here, so they
all accept and refuse exactly the same strings.

Reads look *up* (a scope sees itself and its ancestors, weighted by distance);
operators act *down* (a grant covers a scope and its descendants). Both
directions compare segment by segment, never by string prefix, so ``acme``
never reaches ``acmecorp`` and ``acme:al`` never reaches ``acme:alice``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aetnaweb.errors import DomainError

WILDCARD = "*"
PLATFORM = "platform"
MAX_SEGMENT_LENGTH = 64
SEGMENT_NAMES = ("tenant", "user", "project")

_SEGMENT_RE = re.compile(r"[A-Za-z0-9._-]{1,64}", re.ASCII)


class ScopeError(DomainError, ValueError):
    """A scope string that is not a valid ``tenant:user:project`` scope."""

    code = "invalid_scope"
    status = 400
    meaning = "a scope does not parse (see scopes.md)"

    def __init__(self, *args: object, field: str | None = "scope") -> None:
        # Nearly every scope arrives in a field named "scope"; a caller that
        # parses another one (a grant's, a filter's) names it.
        super().__init__(*args, field=field)


def _check_segment(name: str, value: str, raw: str) -> None:
    if value == WILDCARD:
        return
    if not value:
        raise ScopeError(f"invalid scope {raw!r}: the {name} segment is empty")
    if len(value) > MAX_SEGMENT_LENGTH:
        raise ScopeError(
            f"invalid scope {raw!r}: the {name} segment is longer than "
            f"{MAX_SEGMENT_LENGTH} characters"
        )
    if not _SEGMENT_RE.fullmatch(value):
        raise ScopeError(
            f"invalid scope {raw!r}: the {name} segment {value!r} may only contain "
            "letters, digits, '.', '_' and '-' (or be '*')"
        )


@dataclass(frozen=True, slots=True)
class Scope:
    """A validated scope. Build one with :meth:`parse` or :meth:`of`."""

    tenant: str
    user: str
    project: str

    # -- construction -----------------------------------------------------

    @classmethod
    def parse(cls, raw: Any) -> Scope:
        """Parse ``tenant:user:project`` exactly, or raise :class:`ScopeError`."""
        if isinstance(raw, Scope):
            return raw
        if not isinstance(raw, str):
            raise ScopeError(f"a scope must be a string like 'tenant:user:project', not {raw!r}")
        parts = raw.split(":")
        if len(parts) != 3:
            raise ScopeError(
                f"invalid scope {raw!r}: expected exactly three segments "
                f"'tenant:user:project', got {len(parts)}"
            )
        for name, value in zip(SEGMENT_NAMES, parts, strict=True):
            _check_segment(name, value, raw)
        tenant, user, project = parts
        if tenant == WILDCARD:
            raise ScopeError(
                f"invalid scope {raw!r}: the tenant segment must name a tenant "
                "(the root is 'platform:*:*')"
            )
        if user == WILDCARD and project != WILDCARD:
            raise ScopeError(
                f"invalid scope {raw!r}: a project ({project!r}) under no user is ambiguous"
            )
        if tenant == PLATFORM and (user, project) != (WILDCARD, WILDCARD):
            raise ScopeError(
                f"invalid scope {raw!r}: 'platform' is reserved for the root scope 'platform:*:*'"
            )
        return cls(tenant, user, project)

    @classmethod
    def of(cls, tenant: str, user: str = WILDCARD, project: str = WILDCARD) -> Scope:
        """Build from segments, with the same refusals as :meth:`parse`."""
        return cls.parse(f"{tenant}:{user}:{project}")

    @classmethod
    def platform(cls) -> Scope:
        return cls(PLATFORM, WILDCARD, WILDCARD)

    # -- representation ---------------------------------------------------

    def __str__(self) -> str:
        return f"{self.tenant}:{self.user}:{self.project}"

    @property
    def canonical(self) -> str:
        return str(self)

    @property
    def segments(self) -> tuple[str, str, str]:
        return (self.tenant, self.user, self.project)

    @property
    def depth(self) -> int:
        """0 for ``platform:*:*``, 1 for a tenant, 2 for a user, 3 for a project."""
        if self.tenant == PLATFORM:
            return 0
        if self.user == WILDCARD:
            return 1
        if self.project == WILDCARD:
            return 2
        return 3

    @property
    def is_platform(self) -> bool:
        return self.depth == 0

    @property
    def level(self) -> str:
        return ("platform", "tenant", "user", "project")[self.depth]

    # -- tree -------------------------------------------------------------

    @property
    def parent(self) -> Scope | None:
        depth = self.depth
        if depth == 0:
            return None
        if depth == 1:
            return Scope.platform()
        if depth == 2:
            return Scope(self.tenant, WILDCARD, WILDCARD)
        return Scope(self.tenant, self.user, WILDCARD)

    def ancestors(self) -> list[Scope]:
        """Strict ancestors, nearest first (at most three)."""
        chain: list[Scope] = []
        current = self.parent
        while current is not None:
            chain.append(current)
            current = current.parent
        return chain

    def lineage(self) -> list[Scope]:
        """This scope, then its ancestors nearest first: what a read at this scope sees."""
        return [self, *self.ancestors()]

    def visible_strings(self) -> list[str]:
        """Canonical strings of :meth:`lineage`, for an exact ``IN (...)`` query."""
        return [str(scope) for scope in self.lineage()]

    def covers(self, other: Scope) -> bool:
        """True when ``other`` is this scope or one of its descendants (segment-wise)."""
        other = Scope.parse(other)
        depth = self.depth
        if depth == 0:
            return True
        if other.depth < depth:
            return False
        if other.tenant != self.tenant:
            return False
        if depth >= 2 and other.user != self.user:
            return False
        return not (depth == 3 and other.project != self.project)

    def sees(self, memory_scope: Scope) -> bool:
        """True when a read at this scope includes memories stored at ``memory_scope``."""
        return Scope.parse(memory_scope).covers(self)

    def weight(self, memory_scope: Scope) -> float:
        """0.5 ** (query depth - memory depth) for a visible scope, 0.0 otherwise."""
        memory_scope = Scope.parse(memory_scope)
        if not self.sees(memory_scope):
            return 0.0
        return 0.5 ** (self.depth - memory_scope.depth)

    def subtree_filter(self, prefix: str = "") -> dict[str, str]:
        """Column equalities selecting this scope and its descendants.

        Rows store a scope as ``tenant``, ``user`` and ``project`` columns (the
        wildcard stored as ``*``). Equality on the leading columns is exact and
        index-friendly; there is no ``LIKE`` or prefix match anywhere.
        """
        depth = self.depth
        if depth == 0:
            return {}
        lookups = {f"{prefix}tenant": self.tenant}
        if depth >= 2:
            lookups[f"{prefix}user"] = self.user
        if depth == 3:
            lookups[f"{prefix}project"] = self.project
        return lookups

    def columns(self) -> dict[str, str]:
        """The stored representation: ``{"tenant", "user", "project"}``."""
        return {"tenant": self.tenant, "user": self.user, "project": self.project}
