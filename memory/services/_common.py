"""Private steps every memory workflow shares.

New IDs, session/turn context checks, the audit append that also indexes
which records an event names (``_audit``), the per-scope counters
(``_bump``/``_tally``), locking a record at exactly its scope, and the fact
slot: who holds a key at a scope and retiring them as superseded.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection
from django.utils import timezone

from aetnaweb.scopes import Scope
from aetnaweb.sql import insert_rows
from audit.models import AuditEvent
from audit.services import append_event
from memory import search, selectors
from memory.errors import InvalidInput, RecordNotFound
from memory.limits import MAX_CONTEXT_CHARS
from memory.models import Record, RecordAuditLink, ScopeStats, Status


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _context(name: str, value: str | None) -> str:
    """A session or turn ID: optional, at most 200 characters."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > MAX_CONTEXT_CHARS:
        raise InvalidInput(
            f"{name} must be text of at most {MAX_CONTEXT_CHARS} characters", field=name
        )
    return value


def _audit(
    *,
    scope: Scope,
    event_type: str,
    actor: str,
    payload: dict[str, Any],
    session_id: str = "",
    turn_id: str = "",
    record_id: str | None = None,
    mentions: Iterable[str] = (),
) -> AuditEvent:
    """Append to the scope's chain and index which records the event names."""
    event = append_event(
        subject=scope,
        event_type=event_type,
        actor=actor,
        payload=payload,
        session_id=session_id or None,
        turn_id=turn_id or None,
        record_id=record_id,
    )
    named = dict.fromkeys(item for item in (record_id, *mentions) if item)
    if named:
        with connection.cursor() as cursor:
            insert_rows(
                cursor,
                RecordAuditLink._meta.db_table,
                ("record_id", "event_sequence", "event_id", "event_type"),
                [(item, event.sequence, event.event_id, event_type) for item in named],
            )
    return event


_COUNTERS = frozenset(selectors.COUNT_FIELDS)
# The counters in the order _bump's upsert lists them.
_COUNTER_COLUMNS = tuple(sorted(_COUNTERS))


def _bump(scope: Scope, **deltas: int) -> None:
    """Keep the per-scope counters in step (same transaction as the change).

    Services add up a call's changes and bump once; plain SQL, because every
    remember and recall-side write pays for it. One upsert, whose answer is
    never read: a scope's first write creates its row, every later one adds
    to it, and the statement can wait in a :func:`aetnaweb.sql.pipelined`
    block (where a row count is not known until results are read).
    """
    deltas = {name: value for name, value in deltas.items() if value}
    if not deltas:
        return
    unknown = set(deltas) - _COUNTERS
    if unknown:
        raise ValueError(f"unknown counters {sorted(unknown)}")
    columns = scope.columns()
    values = [
        str(scope),
        columns["tenant"],
        columns["user"],
        columns["project"],
        scope.depth,
        *(deltas.get(name, 0) for name in _COUNTER_COLUMNS),
        connection.ops.adapt_datetimefield_value(timezone.now()),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_bump_sql(tuple(sorted(deltas))), values)


@functools.cache
def _bump_sql(changed: tuple[str, ...]) -> str:
    """The upsert of :func:`_bump` for one set of changed counters (a handful per process)."""
    table = ScopeStats._meta.db_table
    added = ", ".join(f"{name} = {table}.{name} + excluded.{name}" for name in changed)
    return (
        f'INSERT INTO {table} (scope, tenant, "user", project, depth, '  # noqa: S608  (model constants)
        f"{', '.join(_COUNTER_COLUMNS)}, updated_at) "
        f"VALUES ({', '.join(['%s'] * (6 + len(_COUNTER_COLUMNS)))}) "
        f"ON CONFLICT (scope) DO UPDATE SET {added}, updated_at = excluded.updated_at"
    )


def _tally(total: dict[str, int], more: dict[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _status_deltas(records: Iterable[Record | _Held], new_status: str) -> dict[str, int]:
    deltas: dict[str, int] = {}
    for record in records:
        deltas[record.status] = deltas.get(record.status, 0) - 1
        deltas[new_status] = deltas.get(new_status, 0) + 1
    return deltas


def _record_at(scope: Scope, record_id: Any) -> Record:
    """The record with that ID at exactly ``scope`` (a write lands at one scope)."""
    if not isinstance(record_id, str) or not record_id or len(record_id) > 40:
        raise RecordNotFound(f"{record_id!r} is not a record ID (they look like mem_<32 hex>)")
    record = (
        Record.objects.select_for_update().filter(scope=str(scope), record_id=record_id).first()
    )
    if record is None:
        raise RecordNotFound(
            f"no record {record_id} at scope {scope}: check the ID and that it was "
            "written at exactly this scope"
        )
    return record


class _Held(NamedTuple):
    pk: int
    record_id: str
    status: str


def _slot_holders(scope: Scope, fact_key: str) -> list[_Held]:
    """Active records holding ``fact_key`` at exactly ``scope``, oldest first (indexed)."""
    if not fact_key:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, record_id, status FROM {Record._meta.db_table} "  # noqa: S608  (model metadata only)
            "WHERE scope = %s AND fact_key = %s AND status = %s ORDER BY id",
            [str(scope), fact_key, Status.ACTIVE.value],
        )
        return [_Held(*row) for row in cursor.fetchall()]


def _retire(
    scope: Scope, older: Sequence[_Held], *, by: str, now: datetime, tally: dict[str, int]
) -> list[str]:
    """Mark ``older`` superseded by record ``by``: kept, linked, out of the index."""
    if not older:
        return []
    Record.objects.filter(pk__in=[r.pk for r in older]).update(
        status=Status.SUPERSEDED, superseded_by=by, updated_at=now
    )
    search.unindex_records([r.pk for r in older])
    _tally(tally, _status_deltas(older, Status.SUPERSEDED))
    return [r.record_id for r in older]


def _check_limit(name: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidInput(f"{name} must be a whole number from 1 to {high}", field=name)
    return value
