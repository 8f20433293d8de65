"""Per-token API rate limits: a fixed one-minute window, counted in the database in blocks.

The count lives in one row per (token, window), shared by every thread,
worker and instance on the database, so a token never gets more than its
limit in a window, however many processes serve it. Writing that row on
every request made each API call a write, and on SQLite every write queues
behind the single write lock; so each process *reserves* requests in blocks:

- one ``INSERT ... ON CONFLICT DO UPDATE SET count = count + n RETURNING
  count`` (atomic on SQLite and PostgreSQL) reserves ``n`` requests for this
  process; the next ``n - 1`` requests of that token in this process are
  admitted from memory, without a statement;
- ``n`` follows the token's pace in this process: the requests it made here in
  the last second, at most the block size (``AETNAWEB_API_RATE_LIMIT_BLOCK``,
  16 by default) and at most 1/8 of what is left of the limit (a seen count),
  and at least 1. A token making one request now and then is counted request
  by request (the token page shows its exact count); a busy one costs a
  statement every block, and a token close to its limit is counted exactly
  again;
- a reservation that would cross the limit is granted only up to the limit;
  once a process has seen the limit reached it refuses that token for the rest
  of the window without asking the database (a refusal writes nothing).

So the limit is never exceeded. The price: a process may hold up to a block
less one of reserved requests it does not use before the window ends, so a
busy token spread over several processes can be refused a little before its
limit (at most a block less one per process), and the token page counts
reserved requests (the same bound). ``AETNAWEB_API_RATE_LIMIT_BLOCK=1``
restores exact per-request counting.

Every response to a rate-limited token carries the limit, what is left of
it and when the window ends, as the separate header fields of the IETF
draft (draft-ietf-httpapi-ratelimit-headers, the form of drafts 03 to 06):
``RateLimit-Limit`` (requests per window), ``RateLimit-Remaining`` and
``RateLimit-Reset`` (seconds until the window ends), set by
:class:`RateLimitHeadersMiddleware`. ``Remaining`` is this process's view:
what no process has reserved yet plus what this process holds, so with
several processes it can be a little higher than what is left (by the
blocks other processes hold). A token over its limit gets 429 with
``Retry-After`` (the seconds until its window ends) and the same fields,
``Remaining`` 0. Once per window per token, older windows of that token are
deleted. The limit is ``ApiToken.rate_limit_per_minute`` when set, otherwise
``settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE``; 0 means unlimited (no
statement at all). A fixed window lets a client make up to twice its limit
across a window boundary; that is the price of one row per token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from access.models import ApiToken, RateLimitWindow

WINDOW_SECONDS = 60


class RateLimited(Exception):
    """The token used up its requests for this window."""

    def __init__(self, limit: int, retry_after: int) -> None:
        super().__init__(
            f"rate limit exceeded: this token may make {limit} requests per minute; "
            f"retry after {retry_after} seconds"
        )
        self.limit = limit
        self.retry_after = retry_after


@dataclass(frozen=True)
class Usage:
    limit: int  # 0: unlimited
    used: int  # requests reserved in the database for this window (all processes)
    window_start: int
    remaining: int = 0  # requests this token may still make in the window (this process's view)
    reset_after: int = WINDOW_SECONDS  # seconds until the window ends


@dataclass
class _Reservation:
    """This process's view of one token's window."""

    window: int
    limit: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    left: int = 0  # reserved in the database, not yet used here
    seen: int = 0  # the row's count after our last reservation
    exhausted: bool = False
    pace_second: int = 0
    pace_now: int = 0  # requests admitted here in pace_second
    pace_before: int = 0  # ... and in the second before it


_reservations: dict[str, _Reservation] = {}
_reservations_lock = threading.Lock()


def forget_reservations() -> None:
    """Drop this process's reserved blocks (tests; a database that was rolled back)."""
    with _reservations_lock:
        _reservations.clear()


def limit_for(token: ApiToken) -> int:
    """Requests per minute for ``token`` (0: unlimited)."""
    if token.rate_limit_per_minute is not None:
        return token.rate_limit_per_minute
    return int(settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE)


def _window_of(now: datetime) -> int:
    return int(now.timestamp()) // WINDOW_SECONDS * WINDOW_SECONDS


def _reservation(token: ApiToken, window: int, limit: int) -> _Reservation:
    # Keyed by the token's hash, not its pk: a pk can be reused after a rollback.
    key = token.token_hash
    with _reservations_lock:
        current = _reservations.get(key)
        if current is None or current.window != window or current.limit != limit:
            current = _Reservation(window=window, limit=limit)
            _reservations[key] = current
        return current


def _block_size(state: _Reservation, limit: int) -> int:
    if settings.AETNAWEB_API_RATE_LIMIT_BLOCK <= 1:
        return 1
    pace = state.pace_now + state.pace_before
    return max(1, min(int(settings.AETNAWEB_API_RATE_LIMIT_BLOCK), pace, (limit - state.seen) // 8))


def _reserve(token: ApiToken, window: int, size: int) -> int:
    """Add ``size`` to the window's row; the row's count afterwards."""
    table = connection.ops.quote_name(RateLimitWindow._meta.db_table)  # ours, quoted
    upsert = (
        f"INSERT INTO {table} (token_id, window_start, count) VALUES (%s, %s, %s) "  # noqa: S608
        f"ON CONFLICT (token_id, window_start) DO UPDATE SET count = {table}.count + %s "
        "RETURNING count"
    )
    # One atomic statement on both databases (SQLite >= 3.35 and PostgreSQL):
    # no read-then-write race between workers.
    with connection.cursor() as cursor:
        cursor.execute(upsert, [token.pk, window, size, size])
        row = cursor.fetchone()
    count = int(row[0]) if row else size
    if count == size:  # this reservation made the row: older windows can go
        RateLimitWindow.objects.filter(token=token, window_start__lt=window).delete()
    return count


def consume(token: ApiToken, *, now: datetime | None = None) -> Usage:
    """Count one request for ``token``; :class:`RateLimited` when it is over its limit."""
    limit = limit_for(token)
    now = now or timezone.now()
    window = _window_of(now)
    second = int(now.timestamp())
    reset_after = max(1, window + WINDOW_SECONDS - second)
    if limit == 0:
        return Usage(limit=0, used=0, window_start=window, reset_after=reset_after)
    state = _reservation(token, window, limit)
    with state.lock:
        if not state.exhausted and state.left == 0:
            size = _block_size(state, limit)
            count = _reserve(token, window, size)
            # Of a block that crossed the limit, only the part below it is ours.
            granted = max(0, min(size, limit - (count - size)))
            state.seen = count
            state.left = granted
            state.exhausted = granted == 0
        if state.exhausted:
            raise RateLimited(limit, reset_after)
        state.left -= 1
        if state.left == 0 and state.seen >= limit:
            state.exhausted = True
        if second != state.pace_second:
            state.pace_before = state.pace_now if second == state.pace_second + 1 else 0
            state.pace_now, state.pace_second = 0, second
        state.pace_now += 1
        # Not yet reserved by any process, plus reserved here and not yet used.
        remaining = max(0, limit - state.seen) + state.left
        return Usage(
            limit=limit,
            used=state.seen,
            window_start=window,
            remaining=remaining,
            reset_after=reset_after,
        )


def requests_this_window(tokens: list[ApiToken], *, now: datetime | None = None) -> dict[int, int]:
    """What the token page shows: requests each token made in the current window (one query)."""
    window = _window_of(now or timezone.now())
    rows = RateLimitWindow.objects.filter(token__in=tokens, window_start=window)
    return dict(rows.values_list("token_id", "count"))


def header_fields(usage: Usage) -> dict[str, str]:
    """The draft's three fields for ``usage``; none for an unlimited token (nothing to tell)."""
    if usage.limit == 0:
        return {}
    return {
        "RateLimit-Limit": str(usage.limit),
        "RateLimit-Remaining": str(usage.remaining),
        "RateLimit-Reset": str(usage.reset_after),
    }


# Where the usage of the request's token waits for the response (set by whoever
# counted the request: the bearer's authenticator or an idempotent replay).
_USAGE_ATTRIBUTE = "aetnaweb_rate_limit_usage"


def note_usage(request: HttpRequest, usage: Usage) -> None:
    """Remember ``usage`` on ``request`` so its response carries the rate-limit fields."""
    setattr(request, _USAGE_ATTRIBUTE, usage)


def consume_for(request: HttpRequest, token: ApiToken) -> Usage:
    """:func:`consume`, noting the usage on ``request`` (a refusal notes the spent window)."""
    try:
        usage = consume(token)
    except RateLimited as exc:
        note_usage(
            request,
            Usage(
                limit=exc.limit,
                used=exc.limit,
                window_start=0,
                remaining=0,
                reset_after=exc.retry_after,
            ),
        )
        raise
    note_usage(request, usage)
    return usage


class RateLimitHeadersMiddleware:
    """Adds ``RateLimit-Limit``/``-Remaining``/``-Reset`` to every answer of a counted request.

    Outside the idempotency middleware, so a replayed answer (counted too)
    carries them; a request nobody counted (no token, a bad token, an
    unlimited token) gets none.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        usage = getattr(request, _USAGE_ATTRIBUTE, None)
        if isinstance(usage, Usage):
            for name, value in header_fields(usage).items():
                response[name] = value
        return response


def too_many_requests(exc: RateLimited) -> HttpResponse:
    """The API's JSON error shape with status 429, ``Retry-After`` and the spent window's fields."""
    response = HttpResponse(
        json.dumps({"error": "rate_limited", "field": None, "detail": str(exc)}),
        status=429,
        content_type="application/json",
    )
    response["Retry-After"] = str(exc.retry_after)
    response["RateLimit-Limit"] = str(exc.limit)
    response["RateLimit-Remaining"] = "0"
    response["RateLimit-Reset"] = str(exc.retry_after)
    return response
