"""Login throttling: repeated failed sign-ins are slowed, then refused for a while.

Two counters run side by side, one per account name and one per client
address, so guessing one account's password from many addresses and trying
many accounts from one address are both limited. For each counter:

- after ``AETNAWEB_LOGIN_SLOW_AFTER`` failures, the next attempt is accepted
  only after a wait that doubles with each further failure (1 s, 2 s, 4 s, ...
  up to ``AETNAWEB_LOGIN_MAX_DELAY_SECONDS``);
- at ``AETNAWEB_LOGIN_ACCOUNT_LOCK_AFTER`` (account) or
  ``AETNAWEB_LOGIN_ADDRESS_LOCK_AFTER`` (address) failures, every attempt is
  refused for ``AETNAWEB_LOGIN_LOCKOUT_SECONDS``, even with the right password;
- failures older than ``AETNAWEB_LOGIN_WINDOW_SECONDS`` are forgotten.

An attempt is counted as a failure *before* its password is checked, in one
atomic increment per counter that also refuses it if a wait or lock is
running; the count that increment returns is the attempt's place in the
streak, and the place that reaches a threshold sets the wait or lock at once.
So parallel attempts cannot all slip past a check made before any of them
failed: a burst of any size gets at most ``AETNAWEB_LOGIN_SLOW_AFTER`` attempts
(per counter) through to the password check. A successful attempt takes its
count back. A refused attempt never reaches the password check and is not
counted (so it cannot extend a lockout by itself). The wait is a refusal with a time to retry
(HTTP 429), never a sleep: a sleeping request would tie up a server thread per
attacker request.

The start of a slow-down, a lockout and an admin's unlock are audit events in
the platform chain (``access.login_slowed``, ``access.login_locked``,
``access.login_unlocked``); single failures are not, so nobody can fill the
audit log by typing wrong passwords. Payloads name an account only when it
exists: an unknown "account name" may be a password typed into the wrong box,
so it appears as a keyed digest instead.
"""

from __future__ import annotations

import hmac
import ipaddress
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from hashlib import sha256
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import (
    BooleanField,
    Case,
    DateTimeField,
    F,
    PositiveIntegerField,
    Q,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone

from access.models import LoginThrottle
from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.errors import DomainError
from aetnaweb.scopes import Scope
from audit.services import append_event

THROTTLE_ACTOR = "login-throttle"
MAX_KEY_LENGTH = 150
UNKNOWN_ADDRESS = "unknown"


class LoginThrottled(Exception):
    """This sign-in attempt is refused without checking the password; retry later."""

    def __init__(self, *, retry_after: int, locked: bool) -> None:
        self.retry_after = max(1, retry_after)
        self.locked = locked
        wait = _describe_wait(self.retry_after)
        if locked:
            message = (
                "Too many failed sign-ins for this account or from this address: sign-in is "
                f"locked for {wait}. An administrator can clear the lock sooner."
            )
        else:
            message = f"Too many failed sign-ins: wait {wait} before trying again."
        super().__init__(message)


class LockoutError(DomainError, ValueError):
    """An unlock the service refuses (the row is gone, or was never locked)."""

    code = "unlock_refused"
    status = 409
    meaning = "the sign-in lockout is gone or was never locked"


@dataclass(frozen=True)
class Thresholds:
    slow_after: int
    account_lock_after: int
    address_lock_after: int
    lockout_seconds: int
    window_seconds: int
    max_delay_seconds: int

    def lock_after(self, kind: str) -> int:
        if kind == LoginThrottle.Kind.ACCOUNT:
            return self.account_lock_after
        return self.address_lock_after


def thresholds() -> Thresholds:
    return Thresholds(
        slow_after=settings.AETNAWEB_LOGIN_SLOW_AFTER,
        account_lock_after=settings.AETNAWEB_LOGIN_ACCOUNT_LOCK_AFTER,
        address_lock_after=settings.AETNAWEB_LOGIN_ADDRESS_LOCK_AFTER,
        lockout_seconds=settings.AETNAWEB_LOGIN_LOCKOUT_SECONDS,
        window_seconds=settings.AETNAWEB_LOGIN_WINDOW_SECONDS,
        max_delay_seconds=settings.AETNAWEB_LOGIN_MAX_DELAY_SECONDS,
    )


def _describe_wait(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = -(-seconds // 60)
    return f"{minutes} minutes"


# -- keys ------------------------------------------------------------------------


def account_key(raw: str | None) -> str | None:
    """The counter key for a typed account name: NFKC, casefolded, trimmed, bounded.

    Casefolding means "Alice", "ALICE" and "alice" (or the same name in fullwidth letters)
    share one counter. NUL and lone surrogates, which no database text column
    accepts, become U+FFFD so an odd name is counted, not a crash.
    """
    if raw is None:
        return None
    text = "".join(
        "\ufffd" if ch == "\x00" or 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in str(raw)
    )
    key = unicodedata.normalize("NFKC", text).casefold().strip()[:MAX_KEY_LENGTH]
    return key or None


def client_address(meta: dict[str, Any]) -> str:
    """The peer address the server saw (``REMOTE_ADDR``), or ``unknown`` if it is not an IP.

    IPv4-mapped IPv6 addresses count as their IPv4 address; other IPv6
    addresses count as their /64 network.

    Forwarding headers are not read: anyone can send them. Behind a reverse
    proxy, have the proxy terminate at the app with the real peer address
    (gunicorn's ``--forwarded-allow-ips`` with a proxy that sets it).
    """
    raw = str(meta.get("REMOTE_ADDR") or "")
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        return UNKNOWN_ADDRESS
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        # One IPv6 client usually holds a whole /64: count the network, or
        # rotating through its addresses would escape the address rule.
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _keyed_digest(text: str) -> str:
    # Keyed, so a dictionary of likely passwords cannot be matched against it.
    return hmac.new(settings.SECRET_KEY.encode(), text.encode(), sha256).hexdigest()[:16]


def _account_identity(raw: str, key: str) -> tuple[str, dict[str, Any]]:
    """(label for admins, audit payload part) for a typed account name."""
    user_model = get_user_model()
    username = unicodedata.normalize("NFKC", raw)
    field = user_model.USERNAME_FIELD
    names = user_model.objects.values_list(field, flat=True)
    # The counter is case-blind, so "ALICE" counts against the account alice.
    existing = (
        names.filter(**{field: username}).first()
        or names.filter(**{f"{field}__iexact": username}).order_by("pk").first()
    )
    if existing is not None:
        return str(existing), {"account": str(existing)}
    digest = _keyed_digest(key)
    return f"unknown account ({digest})", {"account": None, "account_digest": digest}


# -- the sign-in path ---------------------------------------------------------------


class _Held(Exception):
    """A counter refused the attempt (the caller turns it into :class:`LoginThrottled`)."""


def _counters(account: str | None, address: str) -> Q:
    query = Q(kind=LoginThrottle.Kind.ADDRESS, key=address)
    if account is not None:
        query |= Q(kind=LoginThrottle.Kind.ACCOUNT, key=account)
    return query


def _refusal(account: str | None, address: str, now: datetime) -> LoginThrottled | None:
    """The refusal either counter makes right now, or None."""
    waits = [
        (row.retry_at, row.locked_at is not None)
        for row in LoginThrottle.objects.filter(_counters(account, address), retry_at__gt=now)
    ]
    if not waits:
        return None
    retry_at = max(when for when, _ in waits if when is not None)
    locked = any(is_locked for _, is_locked in waits)
    return LoginThrottled(retry_after=int((retry_at - now).total_seconds() + 0.999), locked=locked)


def check(*, account: str | None, address: str, now: datetime | None = None) -> None:
    """Raise :class:`LoginThrottled` if either counter makes this attempt wait.

    Read-only: for attempts that will not reach a password check (a field
    missing). Attempts that will are counted by :func:`admit` instead.
    """
    refusal = _refusal(account_key(account), address, now or timezone.now())
    if refusal is not None:
        raise refusal


@dataclass(frozen=True)
class Counted:
    """One counter's share of an admitted attempt: the count its increment returned."""

    kind: str
    key: str
    pk: int
    failures: int  # this attempt's place in the counter's streak
    streak_started: datetime
    label: str
    identity: dict[str, Any]


@dataclass(frozen=True)
class Admission:
    """A sign-in attempt let through to the password check, already counted as a failure."""

    started_at: datetime
    counted: tuple[Counted, ...]


def _wait(failures: int, limits: Thresholds) -> int:
    return min(2 ** (failures - limits.slow_after), limits.max_delay_seconds)


def _hold(row: LoginThrottle, failures: int, kind: str, now: datetime, limits: Thresholds) -> None:
    """Set the row's lock or wait as if its ``failures``-th attempt failed at ``now``."""
    if failures >= limits.lock_after(kind):
        row.locked_at = row.locked_at or now
        row.retry_at = now + timedelta(seconds=limits.lockout_seconds)
    elif failures >= limits.slow_after:
        row.retry_at = now + timedelta(seconds=_wait(failures, limits))


def _count_if_free(
    rows: QuerySet[LoginThrottle], label: str, now: datetime, limits: Thresholds
) -> int:
    """Count one attempt on the counter unless a wait or lock is running (rows updated: 0 or 1)."""
    # A new streak: the old one served its lock, or is too old to matter.
    new_streak = Q(locked_at__isnull=False) | Q(
        last_failure_at__lt=now - timedelta(seconds=limits.window_seconds)
    )
    return rows.filter(Q(retry_at__isnull=True) | Q(retry_at__lte=now)).update(
        failures=Case(
            When(new_streak, then=Value(1)),
            default=F("failures") + 1,
            output_field=PositiveIntegerField(),
        ),
        first_failure_at=Case(
            When(new_streak, then=Value(now)),
            default=F("first_failure_at"),
            output_field=DateTimeField(),
        ),
        slowed_audited=Case(
            When(new_streak, then=Value(False)),
            default=F("slowed_audited"),
            output_field=BooleanField(),
        ),
        locked_at=None,
        retry_at=None,
        last_failure_at=now,
        label=label,
    )


def _count_attempt(
    kind: str, key: str, label: str, identity: dict[str, Any], now: datetime, limits: Thresholds
) -> Counted:
    """Add this attempt to one counter in one atomic UPDATE; refuse it if the counter holds.

    The UPDATE's condition is the admission rule (no wait or lock running), so
    two attempts racing for the last free place cannot both get it: the
    database runs the increments one after another (the row lock on
    PostgreSQL, the write lock on SQLite), and the second sees the wait or
    lock the first one's count set, later in the same transaction.
    """
    rows = LoginThrottle.objects.filter(kind=kind, key=key)
    while True:
        admitted = _count_if_free(rows, label, now, limits)
        if admitted:
            break
        if rows.exists():
            raise _Held
        try:
            with transaction.atomic():
                LoginThrottle.objects.create(
                    kind=kind,
                    key=key,
                    label=label,
                    failures=1,
                    first_failure_at=now,
                    last_failure_at=now,
                )
            break
        except IntegrityError:
            continue  # another attempt created it first: count on theirs
    # Still inside the transaction that holds the row: the count read is this attempt's.
    row = rows.get()
    _hold(row, row.failures, kind, now, limits)
    if row.retry_at is not None:
        row.save(update_fields=["locked_at", "retry_at"])
    return Counted(
        kind=kind,
        key=key,
        pk=row.pk,
        failures=row.failures,
        streak_started=row.first_failure_at,
        label=label,
        identity=identity,
    )


def admit(*, account: str | None, address: str, now: datetime | None = None) -> Admission:
    """Count a sign-in attempt against both counters before its password is checked.

    The attempt is counted as a failure up front, atomically, so a burst of
    parallel attempts gets no more through than the thresholds allow: each
    one takes its own place in the streak, and the place that reaches the
    slow-down or lock threshold sets the wait the others then meet. A
    success takes its count back (:func:`record_success`). Raises
    :class:`LoginThrottled`, counting nothing, when either counter holds.
    """
    now = now or timezone.now()
    limits = thresholds()
    key = account_key(account)
    counters: list[tuple[str, str, str, dict[str, Any]]] = []
    if key is not None:
        label, identity = _account_identity(str(account), key)
        counters.append((LoginThrottle.Kind.ACCOUNT, key, label, identity))
    counters.append((LoginThrottle.Kind.ADDRESS, address, address, {"address": address}))
    try:
        with transaction.atomic():
            counted = tuple(_count_attempt(*counter, now, limits) for counter in counters)
    except _Held:
        # The transaction rolled back: the other counter's increment is undone too.
        refusal = _refusal(key, address, now)
        raise refusal or LoginThrottled(retry_after=1, locked=False) from None
    return Admission(started_at=now, counted=counted)


def _unchanged(row: LoginThrottle, counted: Counted) -> bool:
    """Nobody else was counted on this row since this attempt (so its wait is this attempt's)."""
    return row.failures == counted.failures and row.first_failure_at == counted.streak_started


@transaction.atomic
def record_failure(admission: Admission, *, now: datetime | None = None) -> None:
    """The admitted attempt's password was wrong: its count stands; audit the transitions.

    The wait restarts from now (the failure), as a wait follows a failure,
    unless a later attempt has been counted on the row since.
    """
    now = now or timezone.now()
    limits = thresholds()
    for counted in admission.counted:
        row = LoginThrottle.objects.select_for_update().filter(pk=counted.pk).first()
        if row is None:  # an admin cleared it meanwhile
            continue
        unchanged = _unchanged(row, counted)
        if unchanged:
            _hold(row, counted.failures, counted.kind, now, limits)
        base = {"kind": counted.kind, **counted.identity, "failures": counted.failures}
        if counted.failures >= limits.lock_after(counted.kind):
            append_event(
                subject=Scope.platform(),
                event_type="access.login_locked",
                actor=THROTTLE_ACTOR,
                payload=base
                | {
                    "lockout_seconds": limits.lockout_seconds,
                    "locked_until": (row.retry_at or now).isoformat(),
                },
            )
        elif counted.failures >= limits.slow_after and not row.slowed_audited:
            row.slowed_audited = True
            append_event(
                subject=Scope.platform(),
                event_type="access.login_slowed",
                actor=THROTTLE_ACTOR,
                payload=base | {"retry_after_seconds": _wait(counted.failures, limits)},
            )
        row.save(update_fields=["locked_at", "retry_at", "slowed_audited"])
    # Forgotten counters go, so a spray of made-up names cannot grow the table for ever.
    LoginThrottle.objects.filter(
        last_failure_at__lt=now - timedelta(seconds=limits.window_seconds),
        locked_at__isnull=True,
    ).delete()


@transaction.atomic
def release(admission: Admission) -> None:
    """Take back an admitted attempt's count: the password was right, so it was no guess.

    If nobody was counted on a row since, the wait or lock this attempt's
    count set goes with it; otherwise the later attempts' waits stand.
    """
    for counted in admission.counted:
        row = LoginThrottle.objects.select_for_update().filter(pk=counted.pk).first()
        if row is None:
            continue
        if _unchanged(row, counted):
            row.locked_at = row.retry_at = None
        row.failures = max(0, row.failures - 1)
        if row.failures == 0 and row.locked_at is None:
            row.delete()
        else:
            row.save(update_fields=["failures", "locked_at", "retry_at"])


@transaction.atomic
def record_success(admission: Admission) -> None:
    """A successful sign-in takes back its count and ends the account's streak (not the
    address's: one good account must not reset the count of guesses made against others)."""
    release(admission)
    for counted in admission.counted:
        if counted.kind == LoginThrottle.Kind.ACCOUNT:
            # A lock that others' failures set after this attempt was counted stays.
            LoginThrottle.objects.filter(pk=counted.pk, locked_at__isnull=True).delete()


# -- the admins' page ---------------------------------------------------------------


def require_lockout_admin(principal: Principal) -> None:
    """Only admins of the whole platform see and clear sign-in throttles (they span tenants)."""
    if not access.may_administer(principal, Scope.platform()):
        raise AccessDenied(f"{principal.label} may not manage sign-in lockouts")


def current_throttles(
    principal: Principal, *, now: datetime | None = None
) -> QuerySet[LoginThrottle]:
    """Counters that hold sign-ins back right now (locked or slowed), newest first."""
    require_lockout_admin(principal)
    now = now or timezone.now()
    return LoginThrottle.objects.filter(retry_at__gt=now).order_by("-locked_at", "-last_failure_at")


@transaction.atomic
def clear_throttle(*, principal: Principal, throttle_id: int) -> LoginThrottle:
    """Forget one counter, ending its lock or slow-down at once; audited with who cleared it."""
    require_lockout_admin(principal)
    row = LoginThrottle.objects.select_for_update().filter(pk=throttle_id).first()
    if row is None:
        raise LockoutError("that lock is already gone (it expired or was cleared)")
    identity: dict[str, Any]
    if row.kind == LoginThrottle.Kind.ADDRESS:
        identity = {"address": row.key}
    elif row.label.startswith("unknown account ("):
        identity = {"account": None, "account_digest": _keyed_digest(row.key)}
    else:
        identity = {"account": row.label}
    append_event(
        subject=Scope.platform(),
        event_type="access.login_unlocked",
        actor=principal.label,
        payload={
            "kind": row.kind,
            **identity,
            "failures": row.failures,
            "was_locked": row.locked_at is not None,
        },
    )
    row.delete()
    return row
