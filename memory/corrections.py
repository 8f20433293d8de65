"""Correct a record by its ID: a new record supersedes it; the old one is kept as history.

Quarantine still decides trust: a correction whose content is third-party
(``<webpage>``/tool blocks, or ``source_type`` stated as such) lands
quarantined beside the record and replaces nothing until a reviewer
promotes it; trusted content lands active and supersedes the record at
once (``superseded_by``/``supersedes`` link the two). The lineage is read
with :func:`memory.selectors.record_detail`'s chains (visibility applies).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.services import lock_subject
from memory import metadata as record_metadata
from memory import search
from memory.errors import RecordNotFound, RecordStateError
from memory.extraction import Candidate, content_digest, read_source
from memory.models import Record, Status
from memory.selectors import RecordDetail, record_detail
from memory.services._common import _audit, _bump, _tally
from memory.services.remembering import _check_text, _store_candidate
from memory.services.results import StoredRecord, _AsDict

CORRECTABLE = (Status.ACTIVE, Status.QUARANTINED)


@dataclass(frozen=True)
class CorrectionResult(_AsDict):
    corrected_id: str
    record: StoredRecord
    trust_tier: str
    superseded_ids: tuple[str, ...]


def _writable_record(principal: Principal, record_id: str) -> Record:
    """The record, locked, if ``principal`` may write at its scope; otherwise "not found"."""
    record = (
        Record.objects.select_for_update().filter(record_id=record_id).first()
        if isinstance(record_id, str) and 0 < len(record_id) <= 40
        else None
    )
    if record is None or not access.may(principal, access.WRITE, record.scope):
        raise RecordNotFound(f"no record {record_id} that this caller may correct")
    return record


def _require_correctable(record: Record) -> None:
    if record.status not in CORRECTABLE:
        successor = (
            f" (correct {record.superseded_by_id} instead)" if record.superseded_by_id else ""
        )
        raise RecordStateError(
            f"cannot correct {record.record_id}: it is {record.status}{successor}"
        )


def _supersede_corrected(
    scope: Scope,
    record: Record,
    stored: StoredRecord,
    superseded: list[str],
    *,
    actor: str,
    now: datetime,
    tally: dict[str, int],
) -> list[str]:
    """Trusted content: the correction replaces the corrected record itself, and says so.

    ``superseded`` is what the new record already replaced in its slot;
    returns the corrected record's ID when it is retired here too.
    """
    retired: list[str] = []
    record.refresh_from_db()
    if record.status in CORRECTABLE:  # an unkeyed or quarantined record: not a slot holder
        was_active = record.status == Status.ACTIVE
        Record.objects.filter(pk=record.pk).update(
            status=Status.SUPERSEDED, superseded_by=stored.record_id, updated_at=now
        )
        if was_active:
            search.unindex_records([record.pk])
        _tally(tally, {record.status: -1, Status.SUPERSEDED: 1})
        retired.append(record.record_id)
    # The lineage names the record the caller corrected, whatever else the slot held.
    Record.objects.filter(record_id=stored.record_id).update(supersedes=record.record_id)
    _audit(
        scope=scope,
        event_type="memory.record_corrected",
        actor=actor,
        payload={
            "record_id": record.record_id,
            "corrected_by": stored.record_id,
            "superseded_ids": [*superseded, *retired],
        },
        record_id=record.record_id,
        mentions=[stored.record_id, *superseded, *retired],
    )
    return retired


@storable_text_arguments
@transaction.atomic
def correct_record(
    *,
    record_id: str,
    content: str,
    source_type: str | None = None,
    metadata: dict[str, Any] | None = None,
    principal: Principal,
    actor: str | None = None,
) -> CorrectionResult:
    """Store ``content`` as the corrected version of ``record_id`` at the record's own scope.

    Only active or quarantined records can be corrected (a superseded one
    names its successor; a forgotten one has no content left to correct).
    ``metadata`` None carries the record's metadata over; an object replaces it.
    """
    record = _writable_record(principal, record_id)
    scope = access.require(principal, access.WRITE, record.scope)
    _require_correctable(record)
    content = _check_text(content, "content").strip()
    # Checked before anything is written; the old version keeps its own.
    carried = (
        dict(record.metadata or {})
        if metadata is None
        else record_metadata.check_metadata(metadata)
    )
    if content_digest(content) == record.content_digest:
        raise RecordStateError(
            f"the correction says the same as {record.record_id}: nothing to change"
        )
    reading = read_source(content, source_type)
    actor_label = access.audit_actor(principal, actor, default="user")
    lock_subject(str(scope))
    now = timezone.now()
    tally: dict[str, int] = {}
    candidate = Candidate(
        content=content, fact_key=record.fact_key, confidence=1.0, rule="correction"
    )
    stored, duplicates = _store_candidate(
        scope=scope,
        candidate=candidate,
        trusted=reading.trusted,
        source_type=reading.source_type,
        episode=None,
        session_id=record.session_id,
        turn_id=record.turn_id,
        actor=actor_label,
        now=now,
        tally=tally,
        kind=record.kind,
        extra_payload={"corrects": record.record_id},
        metadata=carried,
    )
    if stored is None:
        raise RecordStateError(
            f"that content is already stored as {', '.join(duplicates)}: "
            f"forget {record.record_id} instead of correcting it"
        )
    superseded = list(stored.superseded_ids)
    if reading.trusted:
        superseded += _supersede_corrected(
            scope, record, stored, superseded, actor=actor_label, now=now, tally=tally
        )
    _bump(scope, **tally)
    return CorrectionResult(
        corrected_id=record.record_id,
        record=stored,
        trust_tier="trusted_user" if reading.trusted else "untrusted_content",
        superseded_ids=tuple(dict.fromkeys(superseded)),
    )


def record_history(principal: Principal, record_id: str) -> list[Record]:
    """The record's lineage, oldest first: what it replaced, itself, what replaced it.

    Only records ``principal`` may read appear (the chain stops at one it may
    not); forgotten records appear as tombstones without content.
    """
    detail: RecordDetail = record_detail(principal, record_id)
    return [*reversed(detail.supersedes_chain), detail.record, *detail.superseded_by_chain]
