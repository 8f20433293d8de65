"""Every write to the audit chain.

:func:`append_event` is the only way a row enters ``audit_log``. It must run
inside the caller's transaction, so a memory change and the event that
describes it commit together or not at all, and it serializes appends per
subject so that no two writers chain onto the same head:

- SQLite: the project opens every transaction with ``BEGIN IMMEDIATE``
  (settings), so the connection already holds the database write lock when it
  reads the head.
- PostgreSQL: a transaction-scoped advisory lock keyed on the subject is taken
  before the head is read and released at commit or rollback.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import connection, transaction

from aetnaweb.scopes import Scope, ScopeError
from audit.canonical import CanonicalJSONError, canonical_json, check_round_trip
from audit.chain import EVENT_TYPE_RE, compute_event_hash, new_event_id, utc_now_iso
from audit.models import AuditEvent


class AuditError(ValueError):
    """An append that the evidence layer refuses (bad subject, payload or call site)."""


MAX_CONTEXT_LENGTH = 200
MAX_ACTOR_LENGTH = 150


def subject_lock_key(subject_id: str) -> int:
    """A signed 64-bit key for ``pg_advisory_xact_lock``, stable across processes."""
    raw = hashlib.sha256(b"aetnaweb-audit:" + subject_id.encode("utf-8")).digest()[:8]
    return int.from_bytes(raw, "big", signed=True)


def lock_subject(subject_id: str) -> None:
    """Serialize appends to one subject until the current transaction ends."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [subject_lock_key(subject_id)])
    # SQLite: BEGIN IMMEDIATE already holds the single database write lock.


def _check_context(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_CONTEXT_LENGTH:
        raise AuditError(
            f"{name} must be a non-empty string of at most {MAX_CONTEXT_LENGTH} characters"
        )
    return value


def append_event(
    *,
    subject: Scope | str,
    event_type: str,
    actor: str,
    payload: dict[str, Any],
    session_id: str | None = None,
    turn_id: str | None = None,
    record_id: str | None = None,
) -> AuditEvent:
    """Append one event to ``subject``'s chain inside the caller's transaction.

    Payloads hold digests, IDs and structure, never content (audit-log-v1
    "What payloads may contain"); that is the caller's duty.
    """
    if not transaction.get_connection().in_atomic_block:
        raise AuditError("append_event must be called inside the caller's transaction.atomic()")
    try:
        subject_id = str(Scope.parse(subject))
    except ScopeError as exc:
        raise AuditError(f"audit subject refused: {exc}") from exc
    if not isinstance(event_type, str) or not EVENT_TYPE_RE.fullmatch(event_type):
        raise AuditError(f"invalid event type {event_type!r}: expected dotted lower-case words")
    if not isinstance(actor, str) or not actor or len(actor) > MAX_ACTOR_LENGTH:
        raise AuditError(
            f"actor must be a non-empty string of at most {MAX_ACTOR_LENGTH} characters"
        )
    if not isinstance(payload, dict):
        raise AuditError("an audit payload must be a JSON object")
    try:
        check_round_trip(payload)
        payload_text = canonical_json(payload)
    except CanonicalJSONError as exc:
        raise AuditError(f"audit payload refused: {exc}") from exc
    session_id = _check_context("session_id", session_id)
    turn_id = _check_context("turn_id", turn_id)
    record_id = _check_context("record_id", record_id)

    lock_subject(subject_id)
    head = (
        AuditEvent.objects.filter(subject_id=subject_id)
        .order_by("-sequence")
        .values_list("event_hash", flat=True)
        .first()
    )
    event_id = new_event_id()
    created_at = utc_now_iso()
    event_hash = compute_event_hash(
        event_id=event_id,
        subject_id=subject_id,
        event_type=event_type,
        created_at=created_at,
        actor=actor,
        session_id=session_id,
        turn_id=turn_id,
        record_id=record_id,
        payload=payload,
        prev_hash=head,
    )
    return AuditEvent.objects.create(
        event_id=event_id,
        subject_id=subject_id,
        event_type=event_type,
        created_at=created_at,
        actor=actor,
        session_id=session_id,
        turn_id=turn_id,
        record_id=record_id,
        payload=payload_text,
        prev_hash=head,
        event_hash=event_hash,
    )
