"""The chain rule: how an event's hash is computed (audit-log-v1 "The audit table").

Kept separate from the services so that verification, the append path and the
tests share one definition of the preimage.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from audit.canonical import canonical_json

PREIMAGE_FIELDS = (
    "event_id",
    "subject_id",
    "event_type",
    "created_at",
    "actor",
    "session_id",
    "turn_id",
    "record_id",
    "payload",
    "prev_hash",
)

EVENT_TYPE_RE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+", re.ASCII)


def new_event_id() -> str:
    return "aud_" + uuid.uuid4().hex


def utc_now_iso() -> str:
    """ISO-8601 UTC with offset and microseconds, as ``datetime.isoformat`` gives (C-2)."""
    return datetime.now(UTC).isoformat()


def event_preimage(
    *,
    event_id: str,
    subject_id: str,
    event_type: str,
    created_at: str,
    actor: str,
    session_id: str | None,
    turn_id: str | None,
    record_id: str | None,
    payload: Any,
    prev_hash: str | None,
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "subject_id": subject_id,
        "event_type": event_type,
        "created_at": created_at,
        "actor": actor,
        "session_id": session_id,
        "turn_id": turn_id,
        "record_id": record_id,
        "payload": payload,
        "prev_hash": prev_hash,
    }


def compute_event_hash(**fields: Any) -> str:
    """Digest of the preimage; ``payload`` is the parsed object, not its text."""
    return hashlib.sha256(canonical_json(event_preimage(**fields)).encode("utf-8")).hexdigest()


def row_event_hash(row: Any) -> str:
    """Recompute the hash of a stored row (an ``AuditEvent`` or anything with its attributes).

    Raises ``ValueError`` when the stored payload is not JSON.
    """
    payload = json.loads(row.payload)
    return compute_event_hash(
        event_id=row.event_id,
        subject_id=row.subject_id,
        event_type=row.event_type,
        created_at=row.created_at,
        actor=row.actor,
        session_id=row.session_id,
        turn_id=row.turn_id,
        record_id=row.record_id,
        payload=payload,
        prev_hash=row.prev_hash,
    )
