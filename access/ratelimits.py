"""Per-token API rate limits: a fixed one-minute window counted in the database.

Every authenticated ``/api/v1/`` request (an idempotent replay included)
costs one statement: an ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``
on the (token, window) row, atomic on SQLite and PostgreSQL, so every
worker and process sharing the database sees the same count. Once per
window per token, older windows of that token are deleted (a second
statement). A token over its limit gets 429 with ``Retry-After`` (the
seconds until its window ends).

The limit is ``ApiToken.rate_limit_per_minute`` when set, otherwise
``settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE``; 0 means unlimited (no
statement at all). A fixed window lets a client make up to twice its limit
across a window boundary; that is the price of one row per token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.http import HttpResponse
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
    used: int
    window_start: int


def limit_for(token: ApiToken) -> int:
    """Requests per minute for ``token`` (0: unlimited)."""
    if token.rate_limit_per_minute is not None:
        return token.rate_limit_per_minute
    return int(settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE)


def _window_of(now: datetime) -> int:
    return int(now.timestamp()) // WINDOW_SECONDS * WINDOW_SECONDS


def consume(token: ApiToken, *, now: datetime | None = None) -> Usage:
    """Count one request for ``token``; :class:`RateLimited` when it is over its limit."""
    limit = limit_for(token)
    now = now or timezone.now()
    window = _window_of(now)
    if limit == 0:
        return Usage(limit=0, used=0, window_start=window)
    table = connection.ops.quote_name(RateLimitWindow._meta.db_table)  # ours, quoted
    upsert = (
        f"INSERT INTO {table} (token_id, window_start, count) VALUES (%s, %s, 1) "  # noqa: S608
        f"ON CONFLICT (token_id, window_start) DO UPDATE SET count = {table}.count + 1 "
        "RETURNING count"
    )
    # One atomic statement on both databases (SQLite >= 3.35 and PostgreSQL):
    # no read-then-write race between workers.
    with connection.cursor() as cursor:
        cursor.execute(upsert, [token.pk, window])
        row = cursor.fetchone()
    used = int(row[0]) if row else 1
    if used == 1:
        RateLimitWindow.objects.filter(token=token, window_start__lt=window).delete()
    if used > limit:
        retry_after = max(1, window + WINDOW_SECONDS - int(now.timestamp()))
        raise RateLimited(limit, retry_after)
    return Usage(limit=limit, used=used, window_start=window)


def requests_this_window(tokens: list[ApiToken], *, now: datetime | None = None) -> dict[int, int]:
    """What the token page shows: requests each token made in the current window (one query)."""
    window = _window_of(now or timezone.now())
    rows = RateLimitWindow.objects.filter(token__in=tokens, window_start=window)
    return dict(rows.values_list("token_id", "count"))


def too_many_requests(exc: RateLimited) -> HttpResponse:
    """The API's JSON error shape with status 429 and ``Retry-After``."""
    response = HttpResponse(
        json.dumps({"error": "rate_limited", "field": None, "detail": str(exc)}),
        status=429,
        content_type="application/json",
    )
    response["Retry-After"] = str(exc.retry_after)
    return response
