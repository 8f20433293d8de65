"""Agent API tokens: created, listed, revoked and authenticated here.

A token is ``aetna_<prefix>_<secret>``. Only the SHA-256 of the whole token is
stored, with the prefix for display; the token itself is shown once, at
creation. Each token is bound to one scope subtree and a set of capabilities
drawn from :data:`aetnaweb.access.TOKEN_CAPABILITIES` — never review or
approve, which stay with people. Creating and revoking a token is recorded in
the chain of the token's scope (prefix, capabilities and expiry; never the
secret).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from access.models import ApiToken
from aetnaweb.access import (
    ALL_CAPABILITIES,
    TOKEN_CAPABILITIES,
    AccessDenied,
    Principal,
    administered_scopes,
    audit_actor,
    may_administer,
)
from aetnaweb.errors import DomainError
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.services import append_event

TOKEN_PREFIX = "aetna_"  # noqa: S105  (a public marker, not a secret)
MAX_LIFETIME = timedelta(days=366)
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenError(DomainError, ValueError):
    """A token request that cannot be honoured (bad capability, expiry, unknown token)."""

    code = "token_refused"
    status = 400
    meaning = "a token request cannot be honoured (bad capability, expiry, unknown token)"


class TokenAuthenticationError(Exception):
    """Missing, malformed, unknown, revoked or expired credentials (HTTP 401)."""


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # the full token text; shown once, never stored


MAX_RATE_LIMIT = 1_000_000


def hash_token(raw: str) -> str:
    return sha256_text(raw)


def _check_capabilities(capabilities: list[str] | tuple[str, ...] | set[str]) -> list[str]:
    caps = sorted(set(capabilities))
    if not caps:
        raise TokenError("a token needs at least one capability")
    unknown = [cap for cap in caps if cap not in ALL_CAPABILITIES]
    if unknown:
        raise TokenError(f"unknown capabilities: {', '.join(unknown)}")
    reserved = [cap for cap in caps if cap not in TOKEN_CAPABILITIES]
    if reserved:
        raise TokenError(
            f"tokens cannot hold {', '.join(reserved)}: promote, reject, approve and commit "
            "stay with people in the dashboard"
        )
    return caps


def _check_lifetime_and_limit(expires_at: datetime, rate_limit_per_minute: int | None) -> None:
    now = timezone.now()
    if timezone.is_naive(expires_at):
        raise TokenError("the expiry must be timezone-aware")
    if expires_at <= now:
        raise TokenError("the expiry must be in the future")
    if expires_at - now > MAX_LIFETIME:
        raise TokenError("a token may live at most 366 days")
    if rate_limit_per_minute is not None and not 0 <= rate_limit_per_minute <= MAX_RATE_LIMIT:
        raise TokenError(f"a rate limit is 0 (unlimited) to {MAX_RATE_LIMIT} requests per minute")


@storable_text_arguments
@transaction.atomic
def create_token(
    *,
    principal: Principal,
    name: str,
    scope: Scope | str,
    capabilities: list[str] | tuple[str, ...] | set[str],
    expires_at: datetime,
    owner: Any = None,
    rate_limit_per_minute: int | None = None,
) -> IssuedToken:
    """Issue a token bound to ``scope``'s subtree as ``principal``; the secret is returned once.

    ``principal`` must hold the admin role on ``scope`` (the system principal
    always may); out-of-reach scopes raise
    :class:`~aetnaweb.access.AccessDenied` (shown as 404) and write nothing.
    The audit actor is ``principal``'s label. ``rate_limit_per_minute``: its own
    API limit (0 unlimited); None keeps the server default.
    """
    parsed = Scope.parse(scope)
    if not may_administer(principal, parsed):
        raise AccessDenied(f"{principal.label} may not manage tokens at {parsed}")
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise TokenError("a token needs a name of 1 to 100 characters")
    caps = _check_capabilities(capabilities)
    _check_lifetime_and_limit(expires_at, rate_limit_per_minute)
    prefix = secrets.token_hex(4)
    while ApiToken.objects.filter(token_prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    raw = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        name=name,
        owner=owner,
        scope=str(parsed),
        scope_tenant=parsed.tenant,
        scope_user=parsed.user,
        scope_project=parsed.project,
        capabilities=caps,
        token_prefix=prefix,
        token_hash=hash_token(raw),
        expires_at=expires_at,
        rate_limit_per_minute=rate_limit_per_minute,
    )
    payload: dict[str, Any] = {
        "token_prefix": prefix,
        "name_sha256": sha256_text(name),
        "capabilities": caps,
        "expires_at": expires_at.isoformat(),
        "owner": owner.get_username() if owner is not None else None,
    }
    if rate_limit_per_minute is not None:  # absent: the server default, as before
        payload["rate_limit_per_minute"] = rate_limit_per_minute
    append_event(
        subject=parsed,
        event_type="access.token_created",
        actor=audit_actor(principal),
        payload=payload,
    )
    return IssuedToken(token=token, secret=raw)


@transaction.atomic
def revoke_token(*, principal: Principal, token_prefix: str) -> ApiToken:
    """Revoke a token by its prefix as ``principal``, who must hold the admin role on its scope.

    A token outside the principal's reach is reported exactly like an unknown
    one; revoking twice is an error a person can read.
    """
    token = ApiToken.objects.select_for_update().filter(token_prefix=token_prefix).first()
    if token is None or not may_administer(principal, token.scope):
        raise TokenError(f"no token with prefix {token_prefix!r}")
    if token.revoked_at is not None:
        raise TokenError(
            f"token {token_prefix} was already revoked at {token.revoked_at:%Y-%m-%d %H:%M} UTC"
        )
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    append_event(
        subject=token.scope,
        event_type="access.token_revoked",
        actor=audit_actor(principal),
        payload={"token_prefix": token.token_prefix},
    )
    return token


# The columns by name, not *: on PostgreSQL this statement is prepared, and a
# prepared "SELECT *" fails ("cached plan must not change result type") once a
# migration adds a column, until the connection is replaced.
_BY_HASH_SQL = (
    "SELECT "  # noqa: S608  (model metadata)
    + ", ".join(f'"{field.column}"' for field in ApiToken._meta.concrete_fields)
    + f" FROM {ApiToken._meta.db_table} WHERE token_hash = %s"
)


def authenticate(raw: str | None) -> ApiToken:
    """The live token for ``raw``, or :class:`TokenAuthenticationError`."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        raise TokenAuthenticationError("missing or malformed API token")
    # Every API request runs this: a raw query (the model's own converters
    # still apply) costs a third of the ORM's query building.
    found = list(ApiToken.objects.raw(_BY_HASH_SQL, [hash_token(raw)]))
    token = found[0] if found else None
    if token is None:
        raise TokenAuthenticationError("unknown API token")
    now = timezone.now()
    if token.revoked_at is not None:
        raise TokenAuthenticationError("this API token has been revoked")
    if token.expires_at <= now:
        raise TokenAuthenticationError("this API token has expired")
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def tokens_administered(principal: Principal) -> QuerySet[ApiToken]:
    """Tokens whose scope lies in a subtree ``principal`` administers, newest first."""
    if principal.is_system:
        return ApiToken.objects.select_related("owner").all()
    q = Q(pk__in=[])
    for granted in administered_scopes(principal):
        lookups = granted.subtree_filter("scope_")
        if not lookups:  # an admin of platform:*:* manages every token
            return ApiToken.objects.select_related("owner").all()
        q |= Q(**lookups)
    return ApiToken.objects.select_related("owner").filter(q)
