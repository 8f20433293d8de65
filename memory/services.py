"""The memory engine's Python API: every write, and every read that leaves evidence.

Each verb of docs/spec/memory-engine.md is one keyword-only function here.
Views, the HTTP API, MCP tools, management commands and tests all call these
same functions. Each one:

- validates the scope (``ScopeError``) and checks the principal with
  :func:`aetnaweb.access.require` (``AccessDenied``) before touching anything;
- runs in one database transaction, so memory rows, the full-text index and
  the audit events describing them commit together or not at all;
- takes the scope's audit-chain lock first, so concurrent writers to one
  scope are serialized (no chain fork, no lost supersession);
- writes digests, IDs and fact slot names to the audit chain, never message
  text, fact values, queries or selectors.

``principal`` is required: commands, scripts and the demo pass the system
principal explicitly (:data:`aetnaweb.access.SYSTEM`). The audit actor comes
from :func:`aetnaweb.access.audit_actor`: a person or a token is recorded as
itself whatever ``actor`` says; only the system principal may name one, and
otherwise gets the verb's default (``user`` for remember and capture,
``agent`` for recall, ``system`` otherwise).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest, sha256_text
from audit.models import AuditEvent
from audit.receipts import build_deletion_receipt
from audit.services import AuditError, append_event, lock_subject, log_agent_event
from memory import ranking, search, selectors, vectors
from memory.errors import (
    ActionLogError,
    CaptureError,
    ExtractionError,
    ForgetPreviewStale,
    MemoryEngineError,
    ProposalError,
    RecordNotFound,
    RecordStateError,
    SelectorError,
)
from memory.extraction import (
    SAY_WHAT_TO_FORGET,
    UNTRUSTED_CONFIDENCE_CAP,
    Candidate,
    Needle,
    content_digest,
    explicit_fact,
    extract,
    forced_note,
    normalise_key,
    read_source,
    selector_needle,
    utterance_needle,
    word_tokens,
)
from memory.limits import (
    MAX_BLOCK_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_FACT_CONTENT_CHARS,
    MAX_FACT_EVIDENCE,
    MAX_FORGET_RECORDS,
    MAX_KEY_CHARS,
    MAX_KIND_CHARS,
    MAX_PROPOSED_FACTS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_RECALL_LIMIT,
    MAX_TEXT_CHARS,
)
from memory.models import (
    DeletionReceipt,
    Episode,
    Record,
    RecordAuditLink,
    RetrievalEvent,
    RetrievalHit,
    ReviewReason,
    ScopeStats,
    SourceType,
    Status,
    TrustTier,
)

__all__ = [
    "ForgetPreview",
    "MemoryEngineError",
    "RecallBlock",
    "RecallResult",
    "RememberResult",
    "SourceDecision",
    "capture",
    "consolidate",
    "decide_source",
    "forget",
    "forget_preview",
    "inspect",
    "log_action",
    "persona",
    "promote",
    "propose_facts",
    "recall",
    "recall_block",
    "reject",
    "remember",
    "remember_fact",
    "scenes",
]

# Recall (memory-engine.md "Recall").
CANDIDATE_LIMIT = 50  # candidates asked of the index, and logged, per recall
RELEVANCE_WEIGHT = 0.75
TRUST_WEIGHT = 0.15
RECENCY_WEIGHT = 0.10
TRUST_SCORES: dict[str, float] = {
    TrustTier.TRUSTED_USER: 1.0,
    TrustTier.USER_CONFIRMED: 0.9,
    TrustTier.UNTRUSTED_CONTENT: 0.4,
}
RECALL_BLOCK_MIN_SCORE = 0.3
PERSONA_MAX_CHARS = 1500
PERSONA_MAX_LINES = 200
# A forget that would purge more records than this (lineage included) must
# carry the previewed IDs (expected_record_ids): a broad needle is never
# applied blind.
MAX_UNPREVIEWED_FORGET = 10
# Forget reads a scope's records in chunks of this many to match whole words.
MATCH_CHUNK = 2000
# Statuses a forget can match or name: everything still holding content.
MATCHABLE = (Status.ACTIVE, Status.QUARANTINED, Status.SUPERSEDED)
SCENES_LIMIT = 20
SCENE_ITEMS_LIMIT = 50
CAPTURE_EVENT_TYPES = {
    "assistant": "agent.assistant_message",
    "tool_call": "agent.tool_call",
    "tool_result": "agent.tool_result",
}


# -- results ---------------------------------------------------------------------


class _AsDict:
    def as_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))  # type: ignore[call-overload]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    return value


@dataclass(frozen=True)
class StoredRecord(_AsDict):
    record_id: str
    status: str
    fact_key: str
    content: str
    superseded_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class RememberResult(_AsDict):
    """What one remember did: the episode, the records made, what they replaced or repeated."""

    scope: str
    episode_id: str | None
    source_type: str
    trust_tier: str
    records: tuple[StoredRecord, ...]
    superseded_ids: tuple[str, ...]
    duplicate_of: tuple[str, ...]
    ignored: bool

    @property
    def record_ids(self) -> list[str]:
        return [record.record_id for record in self.records]


@dataclass(frozen=True)
class RecallCandidate(_AsDict):
    record_id: str
    scope: str
    content: str
    fact_key: str
    trust_tier: str
    score: float
    parts: dict[str, float]
    rank: int
    above_threshold: bool
    returned: bool


@dataclass(frozen=True)
class RecallResult(_AsDict):
    """Every candidate considered (best first) and the ones returned."""

    scope: str
    retrieval_id: str
    audit_event_id: str
    candidates: tuple[RecallCandidate, ...]

    @property
    def returned(self) -> list[RecallCandidate]:
        return [candidate for candidate in self.candidates if candidate.returned]

    @property
    def record_ids(self) -> list[str]:
        return [candidate.record_id for candidate in self.returned]

    def as_dict(self) -> dict[str, Any]:
        data = super().as_dict()
        data["returned_ids"] = self.record_ids
        return data


@dataclass(frozen=True)
class RecallBlock(_AsDict):
    """The ``<relevant_memories>`` block for a prompt ("" when nothing qualifies)."""

    scope: str
    text: str
    record_ids: tuple[str, ...]
    retrieval_id: str
    audit_event_id: str | None


@dataclass(frozen=True)
class ForgetPreview(_AsDict):
    """Exactly what a forget would purge. Writes nothing."""

    scope: str
    mode: str
    record_ids: tuple[str, ...]
    episode_ids: tuple[str, ...]
    records: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class PromoteResult(_AsDict):
    scope: str
    record_id: str
    status: str
    trust_tier: str
    superseded_ids: tuple[str, ...]
    audit_event_id: str


@dataclass(frozen=True)
class ProposeResult(_AsDict):
    scope: str
    accepted: tuple[StoredRecord, ...]
    duplicates: tuple[dict[str, Any], ...]
    rejected: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class ConsolidateResult(_AsDict):
    scope: str
    changed: bool
    duplicates: tuple[dict[str, Any], ...]
    keys: tuple[dict[str, Any], ...]
    audit_event_id: str | None


@dataclass(frozen=True)
class Persona(_AsDict):
    scope: str
    text: str
    record_ids: tuple[str, ...]
    persona_sha256: str
    audit_event_id: str


@dataclass(frozen=True)
class CaptureResult(_AsDict):
    role: str
    audit_event_id: str | None
    remembered: RememberResult | None = None


@dataclass(frozen=True)
class Scene(_AsDict):
    session_id: str
    # Where this scene sits in the newest-first order: pass it as ``after`` for older ones.
    cursor: str = ""
    episodes: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    records: tuple[dict[str, Any], ...] = field(default_factory=tuple)


# -- shared steps ------------------------------------------------------------------


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _context(name: str, value: str | None) -> str:
    """A session or turn ID: optional, at most 200 characters."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > MAX_CONTEXT_CHARS:
        raise ExtractionError(f"{name} must be text of at most {MAX_CONTEXT_CHARS} characters")
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
            cursor.executemany(
                f"INSERT INTO {RecordAuditLink._meta.db_table} "  # noqa: S608  (model metadata only)
                "(record_id, event_sequence, event_id, event_type) VALUES (%s, %s, %s, %s)",
                [(item, event.sequence, event.event_id, event_type) for item in named],
            )
    return event


_COUNTERS = frozenset(selectors.COUNT_FIELDS)


def _bump(scope: Scope, **deltas: int) -> None:
    """Keep the per-scope counters in step (same transaction as the change).

    Services add up a call's changes and bump once; plain SQL, because every
    remember and recall-side write pays for it.
    """
    deltas = {name: value for name, value in deltas.items() if value}
    if not deltas:
        return
    unknown = set(deltas) - _COUNTERS
    if unknown:
        raise ValueError(f"unknown counters {sorted(unknown)}")
    now = timezone.now()
    assignments = ", ".join(f"{name} = {name} + %s" for name in sorted(deltas))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {ScopeStats._meta.db_table} SET {assignments}, updated_at = %s "  # noqa: S608  (fixed column names)
            "WHERE scope = %s",
            [
                *(deltas[name] for name in sorted(deltas)),
                connection.ops.adapt_datetimefield_value(now),
                str(scope),
            ],
        )
        updated = cursor.rowcount
    if not updated:
        ScopeStats.objects.create(
            scope=str(scope), depth=scope.depth, updated_at=now, **scope.columns(), **deltas
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


def _visible_duplicates(scope: Scope, digest_value: str, *, trusted: bool) -> list[str]:
    """Records with the same normalised content visible at ``scope`` (indexed by digest)."""
    statuses = [Status.ACTIVE.value]
    if not trusted:
        statuses.append(Status.QUARANTINED.value)
    visible = scope.visible_strings()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT record_id FROM {Record._meta.db_table} "  # noqa: S608  (placeholders only)
            f"WHERE scope IN ({', '.join(['%s'] * len(visible))}) AND content_digest = %s "
            f"AND status IN ({', '.join(['%s'] * len(statuses))}) ORDER BY id DESC LIMIT 5",
            [*visible, digest_value, *statuses],
        )
        return [row[0] for row in cursor.fetchall()]


def _corrects_local_slot(scope: Scope, fact_key: str, digest_value: str) -> bool:
    """True when ``scope`` holds ``fact_key`` with a value other than ``digest_value``."""
    if not fact_key:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT content_digest FROM {Record._meta.db_table} "  # noqa: S608  (model metadata only)
            "WHERE scope = %s AND fact_key = %s AND status = %s",
            [str(scope), fact_key, Status.ACTIVE.value],
        )
        held = {row[0] for row in cursor.fetchall()}
    return bool(held) and digest_value not in held


def _store_candidate(
    *,
    scope: Scope,
    candidate: Candidate,
    trusted: bool,
    source_type: str,
    episode: Episode | None,
    session_id: str,
    turn_id: str,
    actor: str,
    now: datetime,
    tally: dict[str, int],
    kind: str = "",
    evidence: Sequence[str] = (),
    extra_payload: dict[str, Any] | None = None,
) -> tuple[StoredRecord | None, list[str]]:
    """Insert one candidate (or note its duplicate). Returns (stored, duplicate_of).

    Counter changes are added to ``tally``; the caller bumps them once.
    """
    digest_value = content_digest(candidate.content)
    duplicates = _visible_duplicates(scope, digest_value, trusted=trusted)
    if duplicates and trusted and _corrects_local_slot(scope, candidate.fact_key, digest_value):
        # The same words stored at an ancestor do not make this a repeat: the
        # write scope holds another value of the slot, and dropping the
        # correction would leave that stale value ranked first here.
        duplicates = []
    trust_tier = TrustTier.TRUSTED_USER if trusted else TrustTier.UNTRUSTED_CONTENT
    episode_id = episode.episode_id if episode else None
    if duplicates:
        _audit(
            scope=scope,
            event_type="memory.duplicate_ignored",
            actor=actor,
            payload={
                "episode_id": episode_id,
                "duplicate_of": duplicates,
                "fact_key": candidate.fact_key,
                "source_type": source_type,
                "trust_tier": trust_tier,
                **(extra_payload or {}),
            },
            session_id=session_id,
            turn_id=turn_id,
            mentions=duplicates,
        )
        return None, duplicates
    status = Status.ACTIVE if trusted else Status.QUARANTINED
    confidence = (
        candidate.confidence if trusted else min(candidate.confidence, UNTRUSTED_CONFIDENCE_CAP)
    )
    record_id = _new_id("mem")
    # Quarantined content never supersedes; an active keyed record replaces the
    # slot's holders at this scope only, and the two point at each other.
    older = _slot_holders(scope, candidate.fact_key) if status == Status.ACTIVE else []
    record = Record.objects.create(
        record_id=record_id,
        supersedes_id=older[-1].record_id if older else None,
        **scope.columns(),
        scope=str(scope),
        episode=episode,
        session_id=session_id,
        turn_id=turn_id,
        source_type=source_type,
        trust_tier=trust_tier,
        confidence=confidence,
        status=status,
        fact_key=candidate.fact_key,
        kind=kind,
        content=candidate.content,
        content_digest=digest_value,
        evidence=list(evidence),
        created_at=now,
        updated_at=now,
    )
    _tally(tally, {status: 1})
    if status == Status.ACTIVE:
        search.index_records([(record.pk, record.record_id, record.scope, record.content)])
    superseded_ids = _retire(scope, older, by=record_id, now=now, tally=tally)
    _audit(
        scope=scope,
        event_type="memory.record_created" if trusted else "memory.record_quarantined",
        actor=actor,
        payload={
            "record_id": record.record_id,
            "episode_id": episode_id,
            "source_type": source_type,
            "trust_tier": trust_tier,
            "status": status,
            "fact_key": candidate.fact_key,
            "superseded_ids": superseded_ids,
            "rule": candidate.rule,
            # Binds the exact content stored, so an edit behind the engine's back
            # shows in verification (memory.selectors.content_binding).
            "content_sha256": sha256_text(candidate.content),
            **(extra_payload or {}),
        },
        session_id=session_id,
        turn_id=turn_id,
        record_id=record.record_id,
        mentions=superseded_ids,
    )
    stored = StoredRecord(
        record.record_id, status, candidate.fact_key, candidate.content, tuple(superseded_ids)
    )
    return stored, []


def _check_text(text: Any, what: str = "text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise ExtractionError(f"the {what} is empty: there is nothing to remember")
    if len(text) > MAX_TEXT_CHARS:
        raise ExtractionError(f"the {what} is longer than {MAX_TEXT_CHARS} characters")
    return text


# -- remember --------------------------------------------------------------------


@storable_text_arguments
@transaction.atomic
def remember(
    *,
    scope: Scope | str,
    text: str,
    session_id: str | None = None,
    turn_id: str | None = None,
    source_type: str | None = None,
    force: bool = False,
    principal: Principal,
    actor: str | None = None,
) -> RememberResult:
    """Store a message as an episode and the facts it states at exactly ``scope``.

    Trusted user text lands active (superseding the same slot at this scope);
    webpage and tool content lands quarantined; duplicates are not stored twice.
    """
    parsed = access.require(principal, access.WRITE, scope)
    text = _check_text(text)
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    reading = read_source(text, source_type)
    if reading.trusted:
        # Trusted user text also keeps every first-person statement as a note;
        # third-party blocks below keep only the keyed shapes (memory-engine.md).
        candidates = extract(text, statements=True)
        if not candidates and force:
            note = forced_note(text)
            candidates = [note] if note else []
    else:
        candidates = [c for block in reading.texts for c in extract(block)]
        if not candidates and force:
            # A forced note from third-party content is still third-party content.
            note = forced_note("\n".join(reading.texts))
            candidates = [note] if note else []
    actor_label = access.audit_actor(principal, actor, default="user")
    trust_tier = TrustTier.TRUSTED_USER if reading.trusted else TrustTier.UNTRUSTED_CONTENT

    lock_subject(str(parsed))
    now = timezone.now()
    episode = Episode.objects.create(
        episode_id=_new_id("ep"),
        scope=str(parsed),
        **parsed.columns(),
        session_id=session,
        turn_id=turn,
        source_type=reading.source_type,
        text=text,
        created_at=now,
    )
    tally: dict[str, int] = {"episodes": 1}
    _audit(
        scope=parsed,
        event_type="episode.ingested",
        actor=actor_label,
        payload={
            "episode_id": episode.episode_id,
            "message_sha256": sha256_text(text),
            "source_type": reading.source_type,
            "trust_tier": trust_tier,
            "chars": len(text),
        },
        session_id=session,
        turn_id=turn,
    )
    stored: list[StoredRecord] = []
    duplicate_of: list[str] = []
    for candidate in candidates:
        record, duplicates = _store_candidate(
            scope=parsed,
            candidate=candidate,
            trusted=reading.trusted,
            source_type=reading.source_type,
            episode=episode,
            session_id=session,
            turn_id=turn,
            actor=actor_label,
            now=now,
            tally=tally,
        )
        if record:
            stored.append(record)
        duplicate_of.extend(duplicates)
    _bump(parsed, **tally)
    if not candidates and not reading.trusted:
        _audit(
            scope=parsed,
            event_type="memory.untrusted_source_ignored",
            actor=actor_label,
            payload={"episode_id": episode.episode_id, "source_type": reading.source_type},
            session_id=session,
            turn_id=turn,
        )
    return RememberResult(
        scope=str(parsed),
        episode_id=episode.episode_id,
        source_type=reading.source_type,
        trust_tier=trust_tier,
        records=tuple(stored),
        superseded_ids=tuple(i for r in stored for i in r.superseded_ids),
        duplicate_of=tuple(dict.fromkeys(duplicate_of)),
        ignored=not candidates,
    )


@storable_text_arguments
@transaction.atomic
def remember_fact(
    *,
    scope: Scope | str,
    key: str,
    value: str,
    kind: str | None = None,
    session_id: str | None = None,
    turn_id: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> RememberResult:
    """Store an explicit key/value fact as a trusted active record with ``fact_key`` = key.

    It supersedes the same slot at this scope, like "my <key> is <value>" does.
    """
    parsed = access.require(principal, access.WRITE, scope)
    candidate = explicit_fact(key, value)
    kind_label = kind or ""
    if not isinstance(kind_label, str) or len(kind_label) > MAX_KIND_CHARS:
        raise ExtractionError(f"a fact kind must be text of at most {MAX_KIND_CHARS} characters")
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    lock_subject(str(parsed))
    tally: dict[str, int] = {}
    record, duplicates = _store_candidate(
        scope=parsed,
        candidate=candidate,
        trusted=True,
        source_type=SourceType.USER_MESSAGE,
        episode=None,
        session_id=session,
        turn_id=turn,
        actor=access.audit_actor(principal, actor, default="user"),
        now=timezone.now(),
        tally=tally,
        kind=kind_label,
        extra_payload={"kind": kind_label},
    )
    _bump(parsed, **tally)
    return RememberResult(
        scope=str(parsed),
        episode_id=None,
        source_type=SourceType.USER_MESSAGE,
        trust_tier=TrustTier.TRUSTED_USER,
        records=(record,) if record else (),
        superseded_ids=record.superseded_ids if record else (),
        duplicate_of=tuple(duplicates),
        ignored=False,
    )


# -- recall ---------------------------------------------------------------------------


def _check_query(query: Any) -> str:
    if not isinstance(query, str):
        raise ExtractionError("a recall query must be text")
    if len(query) > MAX_QUERY_CHARS:
        raise ExtractionError(f"a recall query may be at most {MAX_QUERY_CHARS} characters")
    return query


def _check_limit(name: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ExtractionError(f"{name} must be a whole number from 1 to {high}")
    return value


def _check_min_score(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ExtractionError("min_score must be a number from 0 to 1")
    return float(value)


class _CandidateRow(NamedTuple):
    pk: int
    record_id: str
    scope: str
    content: str
    fact_key: str
    trust_tier: str
    status: str


def _score_candidates(
    scope: Scope, query: str, limit: int, min_score: float
) -> list[RecallCandidate]:
    terms = search.query_terms(query)
    visible = scope.visible_strings()
    hits = {
        hit.pk: hit
        for hit in search.search(visible_scopes=visible, terms=terms, limit=CANDIDATE_LIMIT)
    }
    # Semantic candidates beside the full-text ones (empty when the model or
    # the vector index is unavailable: recall is then exactly lexical).
    # A query of stop words only means nothing, by words or by meaning.
    near = {
        hit.pk: hit
        for hit in (
            vectors.search(visible_scopes=visible, query=query, limit=CANDIDATE_LIMIT)
            if terms
            else []
        )
        if ranking.semantic_part(hit.similarity) > 0 or hit.pk in hits
    }
    if not hits and not near:
        return []
    # Plain rows, not model instances: recall is the hot path.
    rows = {
        row[0]: _CandidateRow(*row)
        for row in Record.objects.filter(pk__in=[*hits, *near]).values_list(*_CandidateRow._fields)
    }
    # Segment-wise re-check of what the database returned (scopes.md): a row
    # outside the lineage is dropped. The exact IN makes this unreachable.
    weights: dict[str, float] = {}
    for name in {row.scope for row in rows.values()}:
        weights[name] = scope.weight(Scope.parse(name))
    usable = []
    for pk in dict.fromkeys([*hits, *near]):
        record = rows.get(pk)
        expected_id = hits[pk].record_id if pk in hits else near[pk].record_id
        if record is None or record.record_id != expected_id or record.status != Status.ACTIVE:
            continue
        if not weights[record.scope]:
            continue
        usable.append((hits.get(pk), near.get(pk), record, weights[record.scope]))
    if not usable:
        return []
    best_raw = max((hit.raw for hit, _, _, _ in usable if hit is not None), default=0.0)
    by_age = sorted(record.pk for _, _, record, _ in usable)
    age_rank = {pk: index for index, pk in enumerate(by_age)}
    span = len(by_age) - 1
    scored = []
    for hit, neighbour, record, weight in usable:
        lexical = 0.0
        if hit is not None:
            share = hit.raw / best_raw if best_raw > 0 else 0.0
            coverage = hit.matched_terms / len(terms)
            # How much of the query the record contains, scaled by how strongly the
            # index ranks it against the best candidate: a record that matches one
            # word of many stays weakly relevant even when it is the only match.
            lexical = round(min(1.0, coverage * (0.5 + 0.5 * share)), 6)
        semantic = round(ranking.semantic_part(neighbour.similarity), 6) if neighbour else 0.0
        relevance = ranking.fuse(lexical, semantic)
        trust = TRUST_SCORES.get(record.trust_tier, 0.4)
        recency = round(age_rank[record.pk] / span, 6) if span else 1.0
        score = round(
            weight
            * (RELEVANCE_WEIGHT * relevance + TRUST_WEIGHT * trust + RECENCY_WEIGHT * recency),
            6,
        )
        parts = {
            "weight": weight,
            "relevance": relevance,
            "lexical": lexical,
            "semantic": semantic,
            "trust": trust,
            "recency": recency,
        }
        scored.append((score, record, parts))
    scored.sort(key=lambda item: (-item[0], -item[1].pk))
    # Two sources of up to 50 each: still at most 50 considered (and logged).
    del scored[CANDIDATE_LIMIT:]
    candidates = []
    returned = 0
    for rank, (score, record, parts) in enumerate(scored, start=1):
        above = score >= min_score
        is_returned = above and returned < limit
        returned += int(is_returned)
        candidates.append(
            RecallCandidate(
                record_id=record.record_id,
                scope=record.scope,
                content=record.content,
                fact_key=record.fact_key,
                trust_tier=record.trust_tier,
                score=score,
                parts=parts,
                rank=rank,
                above_threshold=above,
                returned=is_returned,
            )
        )
    return candidates


def _log_retrieval(
    *,
    scope: Scope,
    query: str,
    limit: int,
    min_score: float,
    session: str,
    actor: str,
    purpose: str,
    candidates: list[RecallCandidate],
) -> tuple[RetrievalEvent, AuditEvent]:
    query_sha256 = sha256_text(query)
    returned_ids = [c.record_id for c in candidates if c.returned]
    retrieval_id = _new_id("ret")
    audit_event = _audit(
        scope=scope,
        event_type="memory.recall",
        actor=actor,
        payload={
            "retrieval_id": retrieval_id,
            "query_sha256": query_sha256,
            "candidate_count": len(candidates),
            "returned_ids": returned_ids,
            "limit": limit,
            "purpose": purpose,
        },
        session_id=session,
        mentions=returned_ids,
    )
    event = RetrievalEvent.objects.create(
        retrieval_id=retrieval_id,
        scope=str(scope),
        **scope.columns(),
        session_id=session,
        actor=actor,
        purpose=purpose,
        query_sha256=query_sha256,
        query_text=query if settings.AETNAWEB_STORE_RECALL_QUERIES else "",
        limit=limit,
        min_score=min_score,
        candidates=[
            {
                "record_id": c.record_id,
                "scope": c.scope,
                "rank": c.rank,
                "score": c.score,
                "parts": c.parts,
                "above_threshold": c.above_threshold,
                "returned": c.returned,
            }
            for c in candidates
        ],
        returned_ids=returned_ids,
        audit_event_id=audit_event.event_id,
        created_at=timezone.now(),
    )
    if candidates:
        # Up to 50 rows per recall: a plain executemany keeps the ORM's
        # per-object work off the hot path.
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {RetrievalHit._meta.db_table} "  # noqa: S608  (model metadata only)
                "(retrieval_event_id, record_id, rank, score, returned) VALUES (%s, %s, %s, %s, %s)",
                [(event.pk, c.record_id, c.rank, c.score, c.returned) for c in candidates],
            )
    return event, audit_event


@storable_text_arguments
@transaction.atomic
def recall(
    *,
    scope: Scope | str,
    query: str,
    limit: int = 5,
    min_score: float = 0.0,
    session_id: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> RecallResult:
    """Top ``limit`` active records visible from ``scope`` (itself and its ancestors), scored.

    Every recall is logged as a retrieval event and a ``memory.recall`` audit event,
    in the chain of ``scope`` itself; so an operator recalls only inside their own
    subtree (an ancestor they may read is reached by recalling from below it).
    """
    parsed = access.require_act(principal, access.READ, scope)
    query = _check_query(query)
    limit = _check_limit("limit", limit, MAX_RECALL_LIMIT)
    threshold = _check_min_score(min_score)
    session = _context("session_id", session_id)
    actor_label = access.audit_actor(principal, actor, default="agent")
    candidates = _score_candidates(parsed, query, limit, threshold)
    event, audit_event = _log_retrieval(
        scope=parsed,
        query=query,
        limit=limit,
        min_score=threshold,
        session=session,
        actor=actor_label,
        purpose="recall",
        candidates=candidates,
    )
    return RecallResult(str(parsed), event.retrieval_id, audit_event.event_id, tuple(candidates))


def _block_line(candidate: RecallCandidate) -> str:
    # Stored content may come from a promoted webpage: angle brackets are
    # escaped so it cannot close the block or open a new one.
    content = " ".join(candidate.content.split()).replace("<", "&lt;").replace(">", "&gt;")
    return f"- [{candidate.record_id}] {content}"


@storable_text_arguments
@transaction.atomic
def recall_block(
    *,
    scope: Scope | str,
    query: str,
    max_items: int = 5,
    max_chars: int = 2000,
    min_score: float = RECALL_BLOCK_MIN_SCORE,
    session_id: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> RecallBlock:
    """A ``<relevant_memories>`` block of at most ``max_items`` lines and ``max_chars`` characters.

    Only candidates scoring at least ``min_score`` (0.3) are injected, so trust
    and recency alone never inject; the injection is audited.
    """
    parsed = access.require_act(principal, access.READ, scope)
    query = _check_query(query)
    max_items = _check_limit("max_items", max_items, MAX_RECALL_LIMIT)
    max_chars = _check_limit("max_chars", max_chars, MAX_BLOCK_CHARS)
    threshold = _check_min_score(min_score)
    session = _context("session_id", session_id)
    actor_label = access.audit_actor(principal, actor, default="agent")
    candidates = _score_candidates(parsed, query, max_items, threshold)
    header, footer = "<relevant_memories>\n", "</relevant_memories>"
    lines: list[str] = []
    injected: list[str] = []
    used = len(header) + len(footer)
    for candidate in candidates:
        if not candidate.returned:
            continue
        line = _block_line(candidate) + "\n"
        if used + len(line) > max_chars:
            break
        lines.append(line)
        injected.append(candidate.record_id)
        used += len(line)
    # What the retrieval log calls "returned" is what actually reached the prompt.
    injected_set = set(injected)
    candidates = [
        RecallCandidate(**{**asdict(c), "returned": c.record_id in injected_set})
        for c in candidates
    ]
    event, _ = _log_retrieval(
        scope=parsed,
        query=query,
        limit=max_items,
        min_score=threshold,
        session=session,
        actor=actor_label,
        purpose="recall_block",
        candidates=candidates,
    )
    text = header + "".join(lines) + footer if lines else ""
    audit_event_id = None
    if injected:
        audit_event = _audit(
            scope=parsed,
            event_type="memory.context_injected",
            actor=actor_label,
            payload={
                "retrieval_id": event.retrieval_id,
                "record_ids": injected,
                "block_sha256": sha256_text(text),
                "chars": len(text),
            },
            session_id=session,
            mentions=injected,
        )
        audit_event_id = audit_event.event_id
    return RecallBlock(str(parsed), text, tuple(injected), event.retrieval_id, audit_event_id)


# -- forget -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _ForgetRequest:
    mode: str
    selector_sha256: str
    utterance_sha256: str | None
    records: list[Record]
    # What the caller's request matched or named, before the lineage was added.
    matched_ids: tuple[str, ...]
    needle: Needle | None


def _forget_mode(
    selector: str | None, record_ids: Sequence[str] | None, utterance: str | None
) -> str:
    if record_ids is not None:
        return "record_ids"
    return "utterance" if utterance is not None else "selector"


def _named_records(scope: Scope, record_ids: Sequence[str]) -> tuple[list[_Match], str]:
    """The records a forget by ID names, each at exactly ``scope`` and not yet forgotten."""
    if isinstance(record_ids, str) or not all(isinstance(i, str) for i in record_ids):
        raise SelectorError("record_ids must be a list of record IDs", reason="bad_record_ids")
    wanted = list(dict.fromkeys(i.strip() for i in record_ids if i.strip()))
    if not wanted:
        raise SelectorError(
            f"no record IDs given: an empty list is never read as 'everything'; {SAY_WHAT_TO_FORGET}",
            reason="empty_selector",
        )
    if len(wanted) > MAX_FORGET_RECORDS:
        raise SelectorError(f"at most {MAX_FORGET_RECORDS} records per forget", reason="too_broad")
    found = {r.record_id: r for r in Record.objects.filter(scope=str(scope), record_id__in=wanted)}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise RecordNotFound(
            f"no record {', '.join(missing)} at scope {scope}: a forget acts on exactly "
            "the scope named"
        )
    gone = [r.record_id for r in found.values() if r.status == Status.TOMBSTONED]
    if gone:
        raise RecordStateError(
            f"{', '.join(gone)} {'is' if len(gone) == 1 else 'are'} already tombstoned: "
            "rejected or forgotten, content purged"
        )
    named = [
        _Match(r.pk, r.record_id, r.supersedes_id, r.superseded_by_id)
        for r in sorted(found.values(), key=lambda r: r.pk)
    ]
    return named, digest(sorted(wanted))


class _Match(NamedTuple):
    pk: int
    record_id: str
    supersedes_id: str | None
    superseded_by_id: str | None


def _matching_records(scope: Scope, needle: Needle) -> list[_Match]:
    """Records at exactly ``scope`` whose content holds the needle as whole words.

    SQL ``LIKE`` folds case for ASCII only and knows no word boundaries, so the
    words are compared in Python with the tokeniser recall and duplicate
    detection use, reading the scope's unforgotten records in key order.
    """
    matched: list[_Match] = []
    last = 0
    while True:
        rows = list(
            Record.objects.filter(scope=str(scope), status__in=MATCHABLE, pk__gt=last)
            .order_by("pk")
            .values_list("pk", "content", "record_id", "supersedes_id", "superseded_by_id")[
                :MATCH_CHUNK
            ]
        )
        matched += [
            _Match(pk, record_id, older, newer)
            for pk, content, record_id, older, newer in rows
            if needle.matches(content)
        ]
        if len(matched) > MAX_FORGET_RECORDS:
            raise SelectorError(
                f"the request matches more than {MAX_FORGET_RECORDS} records at {scope}; "
                "narrow it or forget by record IDs",
                reason="too_broad",
            )
        if len(rows) < MATCH_CHUNK:
            return matched
        last = rows[-1][0]


def _lineage(scope: Scope, records: Sequence[Record | _Match]) -> list[str]:
    """Every record ID linked to ``records`` by supersession at ``scope``, transitively.

    Both directions and any status: what they superseded, what superseded
    them, and so on, so no older or newer value of a forgotten fact stays.
    Supersession never crosses scopes, and the scope filter keeps it so.
    """
    known = {r.record_id for r in records}
    # Every write that links two records sets a link on both (the newer's
    # ``supersedes``, the older's ``superseded_by``), so a record with neither
    # link is alone in its lineage and costs no query.
    linked = [r for r in records if r.supersedes_id or r.superseded_by_id]
    frontier = {r.record_id for r in linked} | {
        link for r in linked for link in (r.supersedes_id, r.superseded_by_id) if link
    }
    explored: set[str] = set()
    while frontier:
        explored |= frontier
        rows = list(
            Record.objects.filter(scope=str(scope))
            .filter(
                Q(record_id__in=frontier)
                | Q(supersedes_id__in=frontier)
                | Q(superseded_by_id__in=frontier)
            )
            .values_list("record_id", "supersedes_id", "superseded_by_id")
        )
        # Only rows stored at this scope join the lineage; a link to a record
        # elsewhere is explored once, finds nothing here, and is not followed.
        known |= {row[0] for row in rows}
        frontier = {i for row in rows for i in row if i} - explored
        if len(known) > MAX_FORGET_RECORDS * 2:
            raise SelectorError(
                f"this forget would purge more than {MAX_FORGET_RECORDS} records with their "
                "lineage; forget fewer at a time",
                reason="too_broad",
            )
    return sorted(known)


def _forget_request(
    scope: Scope,
    *,
    selector: str | None,
    record_ids: Sequence[str] | None,
    utterance: str | None,
    lock: bool,
) -> _ForgetRequest:
    given = [
        name
        for name, value in (
            ("selector", selector),
            ("record_ids", record_ids),
            ("utterance", utterance),
        )
        if value is not None
    ]
    if not given:
        raise SelectorError(
            "a forget needs a selector, record IDs or an utterance; an empty request is "
            f"never read as 'everything': {SAY_WHAT_TO_FORGET}",
            reason="empty_selector",
        )
    if len(given) > 1:
        raise SelectorError(
            f"give exactly one of selector, record_ids or utterance (got {', '.join(given)})",
            reason="ambiguous_request",
        )
    utterance_sha256 = None
    needle: Needle | None = None
    if record_ids is not None:
        named, selector_sha256 = _named_records(scope, record_ids)
    else:
        if utterance is not None:
            if not isinstance(utterance, str):
                raise SelectorError("an utterance must be text", reason="empty_selector")
            utterance_sha256 = sha256_text(utterance)
            try:
                needle = utterance_needle(utterance)
            except SelectorError as exc:
                if "embeds third-party" in str(exc):
                    raise SelectorError(str(exc), reason="embedded_content") from exc
                raise
        else:
            if not isinstance(selector, str):
                raise SelectorError("a selector must be text", reason="empty_selector")
            if not selector.strip():
                raise SelectorError(
                    "the selector is empty; an empty selector is never read as 'everything': "
                    f"{SAY_WHAT_TO_FORGET}",
                    reason="empty_selector",
                )
            needle = selector_needle(selector)
        named = _matching_records(scope, needle)
        selector_sha256 = sha256_text(needle.text)
        if not named:
            raise SelectorError(
                f"nothing matched: no record at exactly {scope} holds the words "
                f"{needle.text!r}, so nothing was forgotten (records at its ancestors or "
                "below it are not touched by a forget here)",
                reason="nothing_matched",
            )
    ids = _lineage(scope, named)
    base = Record.objects.filter(scope=str(scope), record_id__in=ids).exclude(
        status=Status.TOMBSTONED
    )
    if lock:
        base = base.select_for_update()
    records = list(base.order_by("id"))
    if len(records) > MAX_FORGET_RECORDS:
        raise SelectorError(
            f"this forget would purge {len(records)} records with their lineage, more than "
            f"{MAX_FORGET_RECORDS}; forget fewer at a time",
            reason="too_broad",
        )
    mode = _forget_mode(selector, record_ids, utterance)
    return _ForgetRequest(
        mode,
        selector_sha256,
        utterance_sha256,
        records,
        tuple(r.record_id for r in named),
        needle,
    )


def _episode_ids(records: Iterable[Record]) -> list[str]:
    return sorted({r.episode_id for r in records if r.episode_id})


def _forget_recall_queries(scope: Scope, records: list[Record], needle: Needle | None) -> None:
    """Clear stored recall query text that could repeat what was forgotten.

    Query text is kept only when the operator turned query storage on. A
    recall that considered a purged record, or one at this scope or below
    whose query shares a word with the purged content or the needle (stop
    words aside), keeps its ``query_sha256`` only. Erring wide is the point:
    stored query text is a debugging aid, a forgotten value is not.
    """
    considered = RetrievalHit.objects.filter(record_id__in=[r.record_id for r in records]).values(
        "retrieval_event_id"
    )
    stored = RetrievalEvent.objects.exclude(query_text="")
    stored.filter(pk__in=considered).update(query_text="")
    words = {word for r in records for word in word_tokens(r.content)}
    if needle is not None:
        words.update(word for phrase in needle.phrases for word in phrase)
    words -= search.STOP_WORDS
    if not words:
        return
    last = 0
    while True:
        rows = list(
            stored.filter(pk__gt=last, **scope.subtree_filter())
            .order_by("pk")
            .values_list("pk", "query_text")[:MATCH_CHUNK]
        )
        if not rows:
            return
        repeating = [pk for pk, text in rows if words.intersection(word_tokens(text))]
        if repeating:
            RetrievalEvent.objects.filter(pk__in=repeating).update(query_text="")
        last = rows[-1][0]


def _purge(scope: Scope, records: list[Record], now: datetime) -> tuple[list[str], list[str]]:
    """Tombstone records, clear their source episodes' text; returns the purged IDs.

    After the transaction commits, the database is asked to drop the freed
    bytes (see :func:`_drop_freed_bytes`).
    """
    if not records:
        return [], []
    pks = [r.pk for r in records]
    # Only active records are in the index (supersession and quarantine keep them out).
    search.unindex_records([r.pk for r in records if r.status == Status.ACTIVE])
    Record.objects.filter(pk__in=pks).update(
        status=Status.TOMBSTONED,
        content="",
        fact_key="",
        content_digest="",
        deleted_at=now,
        updated_at=now,
    )
    _bump(scope, **_status_deltas(records, Status.TOMBSTONED))
    # A review reason may quote the content: it goes with it.
    ReviewReason.objects.filter(record_id__in=[r.record_id for r in records]).update(reason="")
    episode_ids = _episode_ids(records)
    if episode_ids:
        # A message's text is cleared even when another fact drawn from it stays
        # active: the text holds the forgotten words too. That fact keeps its own content.
        Episode.objects.filter(episode_id__in=episode_ids).update(text="", purged_at=now)
    transaction.on_commit(_drop_freed_bytes)
    return [r.record_id for r in records], episode_ids


def _drop_freed_bytes() -> None:
    """SQLite: copy the write-ahead log into the database file and truncate it.

    ``PRAGMA secure_delete`` (settings) zeroes freed space in the pages, and
    FTS5 ``secure-delete`` removes a deleted row's words from the index
    segments; the log still holds the pages as they were before the forget
    until a checkpoint. A checkpoint that a concurrent reader blocks is
    retried by SQLite's next automatic checkpoint; operators.md says so.
    PostgreSQL keeps dead row versions until VACUUM (operators.md).
    """
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _preview_rows(records: list[Record], matched: set[str]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "record_id": r.record_id,
            # False: not matched itself, purged as part of a match's lineage.
            "matched": r.record_id in matched,
            "status": r.status,
            "fact_key": r.fact_key,
            "content": r.content,
            "source_type": r.source_type,
            "trust_tier": r.trust_tier,
            "episode_id": r.episode_id,
            "created_at": r.created_at.isoformat(),
        }
        for r in records
    )


@storable_text_arguments
@transaction.atomic
def forget_preview(
    *,
    scope: Scope | str,
    selector: str | None = None,
    record_ids: Sequence[str] | None = None,
    utterance: str | None = None,
    principal: Principal,
) -> ForgetPreview:
    """Exactly the records (and source episodes) a forget with these arguments would purge.

    The matches and their whole lineage; each row says whether it matched
    itself. Writes nothing; an empty or vague request, or one that matches
    nothing, raises :class:`SelectorError`.
    """
    parsed = access.require(principal, access.FORGET, scope)
    request = _forget_request(
        parsed, selector=selector, record_ids=record_ids, utterance=utterance, lock=False
    )
    return ForgetPreview(
        scope=str(parsed),
        mode=request.mode,
        record_ids=tuple(r.record_id for r in request.records),
        episode_ids=tuple(_episode_ids(request.records)),
        records=_preview_rows(request.records, set(request.matched_ids)),
    )


@transaction.atomic
def _record_forget_rejected(
    scope: Scope, *, actor: str, reason: str, mode: str, utterance: str | None
) -> AuditEvent:
    payload: dict[str, Any] = {"reason": reason, "mode": mode}
    if isinstance(utterance, str):
        payload["utterance_sha256"] = sha256_text(utterance)
    lock_subject(str(scope))
    return _audit(scope=scope, event_type="memory.forget_rejected", actor=actor, payload=payload)


@storable_text_arguments
def forget(
    *,
    scope: Scope | str,
    selector: str | None = None,
    record_ids: Sequence[str] | None = None,
    utterance: str | None = None,
    expected_record_ids: Sequence[str] | None = None,
    principal: Principal,
    actor: str | None = None,
) -> dict[str, Any]:
    """Purge the matching records at exactly ``scope`` with their whole lineage; return the receipt.

    A selector or utterance matches whole words (case-insensitive); record IDs
    name records directly (superseded ones too). Every record linked to a
    match by supersession is purged with it: content, fact key and source
    episode text cleared, out of the full-text index, stored recall queries
    that repeat it cleared, freed bytes dropped after commit. Returns an
    ``aetnamem-deletion-receipt-v1`` bound to the ``memory.forget`` event.
    With ``expected_record_ids`` (the previewed IDs) it purges exactly those
    or refuses with :class:`ForgetPreviewStale`; without them, more than
    ``MAX_UNPREVIEWED_FORGET`` records are refused. An empty or vague request,
    one that matches nothing or one that needs a preview is refused with
    :class:`SelectorError` and recorded as ``memory.forget_rejected`` (that
    one event commits even though the call raises; nothing else is written).
    """
    parsed = access.require(principal, access.FORGET, scope)
    actor_label = access.audit_actor(principal, actor, default="user")
    try:
        return _forget_apply(
            parsed,
            selector=selector,
            record_ids=record_ids,
            utterance=utterance,
            expected_record_ids=expected_record_ids,
            actor=actor_label,
        )
    except SelectorError as exc:
        mode = _forget_mode(selector, record_ids, utterance)
        _record_forget_rejected(
            parsed, actor=actor_label, reason=exc.reason, mode=mode, utterance=utterance
        )
        raise


@transaction.atomic
def _forget_apply(
    scope: Scope,
    *,
    selector: str | None,
    record_ids: Sequence[str] | None,
    utterance: str | None,
    expected_record_ids: Sequence[str] | None,
    actor: str,
) -> dict[str, Any]:
    lock_subject(str(scope))
    request = _forget_request(
        scope, selector=selector, record_ids=record_ids, utterance=utterance, lock=True
    )
    if expected_record_ids is None and len(request.records) > MAX_UNPREVIEWED_FORGET:
        raise SelectorError(
            f"this forget would purge {len(request.records)} records (with their lineage), "
            f"more than {MAX_UNPREVIEWED_FORGET} without a preview: preview first, then "
            "forget passing the previewed record IDs as expected_record_ids",
            reason="preview_required",
        )
    if expected_record_ids is not None:
        expected = set(expected_record_ids)
        actual = {r.record_id for r in request.records}
        if expected != actual:
            added = sorted(actual - expected)
            gone = sorted(expected - actual)
            raise ForgetPreviewStale(
                "the records this forget matches changed since the preview "
                f"(now also matches: {added or 'none'}; no longer matches: {gone or 'none'}); "
                "preview again and confirm the new list"
            )
    now = timezone.now()
    _forget_recall_queries(scope, request.records, request.needle)
    purged_ids, episode_ids = _purge(scope, request.records, now)
    payload: dict[str, Any] = {
        "mode": request.mode,
        "selector_sha256": request.selector_sha256,
        "purged_record_ids": purged_ids,
        "purged_episode_ids": episode_ids,
        "count": len(purged_ids),
    }
    if request.utterance_sha256:
        payload["utterance_sha256"] = request.utterance_sha256
    event = _audit(
        scope=scope, event_type="memory.forget", actor=actor, payload=payload, mentions=purged_ids
    )
    return _keep_receipt(scope, event, request.selector_sha256, purged_ids, episode_ids)


def _keep_receipt(
    scope: Scope,
    event: AuditEvent,
    selector_sha256: str,
    purged_ids: list[str],
    episode_ids: list[str],
) -> dict[str, Any]:
    receipt = build_deletion_receipt(
        event=event,
        selector_sha256=selector_sha256,
        purged_record_ids=purged_ids,
        purged_episode_ids=episode_ids,
    )
    DeletionReceipt.objects.create(
        scope=str(scope),
        **scope.columns(),
        audit_event_id=event.event_id,
        event_type=event.event_type,
        receipt=receipt,
        record_count=len(purged_ids),
        created_at=timezone.now(),
    )
    return receipt


# -- review: promote and reject -------------------------------------------------------


def _require_quarantined(record: Record, verb: str) -> None:
    if record.status == Status.QUARANTINED:
        return
    reasons: dict[str, str] = {
        Status.ACTIVE: "it is already active (someone may have promoted it already)",
        Status.SUPERSEDED: "it is superseded by a newer record",
        Status.TOMBSTONED: "it was rejected or forgotten and its content purged",
    }
    why = reasons.get(record.status, f"its status is {record.status}")
    raise RecordStateError(
        f"cannot {verb} {record.record_id}: only quarantined records can be "
        f"{'promoted' if verb == 'promote' else 'rejected'}, and {why}; "
        "reload the review queue"
    )


def _reason_payload(reason: str | None) -> dict[str, Any]:
    if reason is None or reason == "":
        return {}
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise RecordStateError(f"a reason must be text of at most {MAX_REASON_CHARS} characters")
    # The reason may quote content, so the chain keeps its digest only.
    return {"reason_sha256": sha256_text(reason)}


@storable_text_arguments
@transaction.atomic
def promote(
    *,
    scope: Scope | str,
    record_id: str,
    reason: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> PromoteResult:
    """Make a quarantined record at ``scope`` active and ``user_confirmed``.

    It supersedes active records with its ``fact_key`` at that scope.
    """
    parsed = access.require(principal, access.REVIEW, scope)
    reason_fields = _reason_payload(reason)
    lock_subject(str(parsed))
    record = _record_at(parsed, record_id)
    _require_quarantined(record, "promote")
    now = timezone.now()
    # Read while the record is still quarantined, so the slot holders are the
    # others: one UPDATE then activates it and links what it replaces.
    older = _slot_holders(parsed, record.fact_key)
    links = {"supersedes": older[-1].record_id} if older else {}
    Record.objects.filter(pk=record.pk).update(
        status=Status.ACTIVE, trust_tier=TrustTier.USER_CONFIRMED, updated_at=now, **links
    )
    tally = _status_deltas([record], Status.ACTIVE)
    search.index_records([(record.pk, record.record_id, record.scope, record.content)])
    superseded_ids = _retire(parsed, older, by=record.record_id, now=now, tally=tally)
    _bump(parsed, **tally)
    event = _audit(
        scope=parsed,
        event_type="memory.record_promoted",
        actor=access.audit_actor(principal, actor, default="system"),
        payload={
            "record_id": record.record_id,
            "status": Status.ACTIVE,
            "trust_tier": TrustTier.USER_CONFIRMED,
            "fact_key": record.fact_key,
            "superseded_ids": superseded_ids,
            **reason_fields,
        },
        record_id=record.record_id,
        mentions=superseded_ids,
    )
    _keep_reason(parsed, record.record_id, "promote", reason, event.event_id, now)
    return PromoteResult(
        str(parsed),
        record.record_id,
        Status.ACTIVE,
        TrustTier.USER_CONFIRMED,
        tuple(superseded_ids),
        event.event_id,
    )


@storable_text_arguments
@transaction.atomic
def reject(
    *,
    scope: Scope | str,
    record_id: str,
    reason: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> dict[str, Any]:
    """Purge a quarantined record at ``scope`` the way forget does; return the deletion receipt."""
    parsed = access.require(principal, access.REVIEW, scope)
    reason_fields = _reason_payload(reason)
    lock_subject(str(parsed))
    record = _record_at(parsed, record_id)
    _require_quarantined(record, "reject")
    selector_sha256 = digest([record.record_id])
    now = timezone.now()
    purged_ids, episode_ids = _purge(parsed, [record], now)
    event = _audit(
        scope=parsed,
        event_type="memory.record_rejected",
        actor=access.audit_actor(principal, actor, default="system"),
        payload={
            "record_id": record.record_id,
            "selector_sha256": selector_sha256,
            "purged_record_ids": purged_ids,
            "purged_episode_ids": episode_ids,
            "count": len(purged_ids),
            **reason_fields,
        },
        record_id=record.record_id,
    )
    _keep_reason(parsed, record.record_id, "reject", reason, event.event_id, now)
    return _keep_receipt(parsed, event, selector_sha256, purged_ids, episode_ids)


def _keep_reason(
    scope: Scope, record_id: str, decision: str, reason: str | None, event_id: str, now: datetime
) -> None:
    """Keep a review reason as typed, for those who may review the scope (the chain has its
    digest only)."""
    if reason and reason.strip():
        ReviewReason.objects.create(
            scope=str(scope),
            **scope.columns(),
            audit_event_id=event_id,
            record_id=record_id,
            decision=decision,
            reason=reason.strip(),
            created_at=now,
        )


@dataclass(frozen=True)
class SourceDecision(_AsDict):
    """Every fact of one source message, decided at once."""

    scope: str
    episode_id: str
    promoted: tuple[PromoteResult, ...]
    receipts: tuple[dict[str, Any], ...]


SOURCE_DECISIONS = ("promote", "reject")


@transaction.atomic
def decide_source(
    *,
    scope: Scope | str,
    episode_id: str,
    decisions: dict[str, str],
    reason: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> SourceDecision:
    """Promote or reject every quarantined fact extracted from one source message, together.

    A rejection purges the source text (as forget does), so deciding one fact
    alone would leave its siblings to be judged without their source. Here the
    decisions must name exactly the facts still waiting; promotions run first,
    then rejections. All or nothing: any refusal writes nothing.
    """
    parsed = access.require(principal, access.REVIEW, scope)
    _reason_payload(reason)
    if not isinstance(decisions, dict) or not decisions:
        raise RecordStateError("decide at least one fact of the source")
    unknown = sorted({str(d) for d in decisions.values() if d not in SOURCE_DECISIONS})
    if unknown:
        raise RecordStateError(f"a decision is promote or reject, not {', '.join(unknown)}")
    lock_subject(str(parsed))
    waiting = set(
        Record.objects.select_for_update()
        .filter(scope=str(parsed), episode_id=episode_id, status=Status.QUARANTINED)
        .values_list("record_id", flat=True)
    )
    if not waiting:
        raise RecordStateError(
            f"no fact from source {episode_id} awaits review at {parsed}: "
            "it was decided already, or the ID is wrong"
        )
    missing, extra = sorted(waiting - set(decisions)), sorted(set(decisions) - waiting)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"also decide {', '.join(missing)} (from the same source)")
        if extra:
            parts.append(f"{', '.join(extra)} no longer await review from this source")
        raise RecordStateError("; ".join(parts) + ". Nothing was changed.")
    promoted = tuple(
        promote(scope=parsed, record_id=record_id, reason=reason, principal=principal, actor=actor)
        for record_id in sorted(waiting)
        if decisions[record_id] == "promote"
    )
    receipts = tuple(
        reject(scope=parsed, record_id=record_id, reason=reason, principal=principal, actor=actor)
        for record_id in sorted(waiting)
        if decisions[record_id] == "reject"
    )
    return SourceDecision(str(parsed), episode_id, promoted, receipts)


# -- proposals, consolidation --------------------------------------------------------


def _proposal_rejection(index: int, reason: str, message: str) -> dict[str, Any]:
    return {"index": index, "reason": reason, "message": message}


def _check_evidence(scope: Scope, evidence: Any) -> tuple[list[str], str, str]:
    """Return (evidence IDs, rejection code, message); code is "" when acceptable."""
    if not isinstance(evidence, list) or not evidence:
        return [], "no_evidence", "cite at least one episode or record ID of this scope as evidence"
    if (
        not all(isinstance(item, str) and item for item in evidence)
        or len(evidence) > MAX_FACT_EVIDENCE
    ):
        return (
            [],
            "bad_evidence",
            f"evidence must be a list of at most {MAX_FACT_EVIDENCE} episode or record IDs",
        )
    ids = list(dict.fromkeys(evidence))
    episodes = dict(
        Episode.objects.filter(scope=str(scope), episode_id__in=ids).values_list(
            "episode_id", "purged_at"
        )
    )
    records = dict(
        Record.objects.filter(scope=str(scope), record_id__in=ids).values_list(
            "record_id", "status"
        )
    )
    for item in ids:
        if item in episodes:
            if episodes[item] is not None:
                return ids, "evidence_forgotten", f"evidence {item} was forgotten"
        elif item in records:
            if records[item] == Status.TOMBSTONED:
                return ids, "evidence_forgotten", f"evidence {item} was forgotten"
        else:
            return (
                ids,
                "unknown_evidence",
                f"evidence {item} is not an episode or record of {scope}",
            )
    return ids, "", ""


@storable_text_arguments
@transaction.atomic
def propose_facts(
    *,
    scope: Scope | str,
    facts: Sequence[dict[str, Any]],
    principal: Principal,
    actor: str | None = None,
) -> ProposeResult:
    """Accept outside proposals that cite this scope's episodes or records, into quarantine.

    Each fact is ``{"content", "evidence": [ids], "fact_key"?, "confidence"?}``;
    a fact without valid evidence is rejected with the reason, a duplicate is
    not stored twice, accepted ones wait for review as ``derived``.
    """
    parsed = access.require(principal, access.PROPOSE, scope)
    if not isinstance(facts, list | tuple) or not facts:
        raise ProposalError("facts must be a non-empty list of objects")
    if len(facts) > MAX_PROPOSED_FACTS:
        raise ProposalError(f"at most {MAX_PROPOSED_FACTS} facts per proposal")
    actor_label = access.audit_actor(principal, actor, default="system")
    lock_subject(str(parsed))
    now = timezone.now()
    accepted: list[StoredRecord] = []
    duplicates: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    tally: dict[str, int] = {}
    for index, fact in enumerate(facts):
        if not isinstance(fact, dict):
            rejected.append(
                _proposal_rejection(index, "not_an_object", "each fact must be an object")
            )
            continue
        content = fact.get("content")
        if (
            not isinstance(content, str)
            or not content.strip()
            or len(content) > MAX_FACT_CONTENT_CHARS
        ):
            rejected.append(
                _proposal_rejection(
                    index,
                    "bad_content",
                    f"content must be 1 to {MAX_FACT_CONTENT_CHARS} characters",
                )
            )
            continue
        content = " ".join(content.split())
        key = fact.get("fact_key") or ""
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
            rejected.append(
                _proposal_rejection(index, "bad_fact_key", "fact_key must be short text")
            )
            continue
        confidence = fact.get("confidence", UNTRUSTED_CONFIDENCE_CAP)
        if (
            isinstance(confidence, bool)
            or not isinstance(confidence, int | float)
            or not 0 <= confidence <= 1
        ):
            rejected.append(
                _proposal_rejection(index, "bad_confidence", "confidence must be from 0 to 1")
            )
            continue
        evidence, code, message = _check_evidence(parsed, fact.get("evidence"))
        content_sha256 = sha256_text(content)
        if code:
            rejected.append(_proposal_rejection(index, code, message))
            _audit(
                scope=parsed,
                event_type="memory.proposal_rejected",
                actor=actor_label,
                payload={"index": index, "reason": code, "content_sha256": content_sha256},
            )
            continue
        candidate = Candidate(content, normalise_key(key), float(confidence), "proposed")
        stored, dupes = _store_candidate(
            scope=parsed,
            candidate=candidate,
            trusted=False,
            source_type=SourceType.DERIVED,
            episode=None,
            session_id="",
            turn_id="",
            actor=actor_label,
            now=now,
            tally=tally,
            evidence=evidence,
            extra_payload={"content_sha256": content_sha256, "evidence": evidence},
        )
        if stored:
            accepted.append(stored)
        else:
            duplicates.append({"index": index, "duplicate_of": dupes})
    _bump(parsed, **tally)
    return ProposeResult(str(parsed), tuple(accepted), tuple(duplicates), tuple(rejected))


@storable_text_arguments
@transaction.atomic
def consolidate(
    *, scope: Scope | str, principal: Principal, actor: str | None = None
) -> ConsolidateResult:
    """Collapse duplicate active contents and leave one active record per ``fact_key`` at ``scope``.

    Newest wins in both steps; older ones become superseded (kept, linked).
    A second run changes nothing and writes nothing.
    """
    parsed = access.require(principal, access.WRITE, scope)
    lock_subject(str(parsed))
    now = timezone.now()
    # The scope's chain lock (taken above) already serializes writers here;
    # PostgreSQL refuses FOR UPDATE on the GROUP BY queries below.
    active = Record.objects.filter(scope=str(parsed), status=Status.ACTIVE)
    collapsed: list[dict[str, Any]] = []
    retired: list[Record] = []

    def retire(group: list[Record]) -> dict[str, Any]:
        keeper, older = group[-1], group[:-1]
        Record.objects.filter(pk__in=[r.pk for r in older]).update(
            status=Status.SUPERSEDED, superseded_by=keeper.record_id, updated_at=now
        )
        if keeper.supersedes_id is None:
            Record.objects.filter(pk=keeper.pk).update(supersedes=older[-1].record_id)
        retired.extend(older)
        return {"kept": keeper.record_id, "superseded_ids": [r.record_id for r in older]}

    repeated = active.values("content_digest").annotate(n=Count("id")).filter(n__gt=1).order_by()
    for digest_value in sorted(row["content_digest"] for row in repeated):
        group = list(active.filter(content_digest=digest_value).order_by("id"))
        collapsed.append(retire(group))
    keys: list[dict[str, Any]] = []
    clashing = (
        active.exclude(fact_key="")
        .values("fact_key")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .order_by()
    )
    for fact_key in sorted(row["fact_key"] for row in clashing):
        group = list(active.filter(fact_key=fact_key).order_by("id"))
        keys.append({"fact_key": fact_key, **retire(group)})
    if not retired:
        return ConsolidateResult(str(parsed), False, (), (), None)
    search.unindex_records([r.pk for r in retired])
    _bump(parsed, **_status_deltas(retired, Status.SUPERSEDED))
    retired_ids = [r.record_id for r in retired]
    event = _audit(
        scope=parsed,
        event_type="memory.consolidated",
        actor=access.audit_actor(principal, actor, default="system"),
        payload={"duplicates": collapsed, "fact_keys": keys, "superseded_count": len(retired)},
        mentions=retired_ids,
    )
    return ConsolidateResult(str(parsed), True, tuple(collapsed), tuple(keys), event.event_id)


# -- derived views: persona, scenes -------------------------------------------------------


@storable_text_arguments
@transaction.atomic
def persona(
    *,
    scope: Scope | str,
    max_chars: int = PERSONA_MAX_CHARS,
    principal: Principal,
    actor: str | None = None,
) -> Persona:
    """A bounded text of the active facts visible from ``scope``; building it is audited.

    Keyed facts first, by key (the nearest scope's value when a slot is set at
    several levels), then unkeyed facts newest first; one ``- [record_id]
    content`` line each, cut at ``max_chars``.
    """
    parsed = access.require_act(principal, access.READ, scope)
    max_chars = _check_limit("max_chars", max_chars, MAX_BLOCK_CHARS)
    visible = parsed.visible_strings()
    depth = {name: index for index, name in enumerate(visible)}  # 0 = nearest
    keyed_rows = (
        Record.objects.filter(scope__in=visible, status=Status.ACTIVE)
        .exclude(fact_key="")
        .order_by("fact_key", "-id")[: PERSONA_MAX_LINES * 4]
    )
    chosen: dict[str, Record] = {}
    for record in keyed_rows:
        current = chosen.get(record.fact_key)
        if current is None or depth[record.scope] < depth[current.scope]:
            chosen[record.fact_key] = record
    unkeyed = Record.objects.filter(scope__in=visible, status=Status.ACTIVE, fact_key="").order_by(
        "-id"
    )[:PERSONA_MAX_LINES]
    lines: list[str] = []
    record_ids: list[str] = []
    used = 0
    for record in [*(chosen[key] for key in sorted(chosen)), *unkeyed]:
        line = f"- [{record.record_id}] {' '.join(record.content.split())}\n"
        if used + len(line) > max_chars or len(lines) >= PERSONA_MAX_LINES:
            break
        lines.append(line)
        record_ids.append(record.record_id)
        used += len(line)
    text = "".join(lines)
    persona_sha256 = sha256_text(text)
    event = _audit(
        scope=parsed,
        event_type="memory.persona_built",
        actor=access.audit_actor(principal, actor, default="agent"),
        payload={"record_ids": record_ids, "persona_sha256": persona_sha256, "chars": len(text)},
        mentions=record_ids,
    )
    return Persona(str(parsed), text, tuple(record_ids), persona_sha256, event.event_id)


@storable_text_arguments
@transaction.atomic
def scenes(
    *,
    scope: Scope | str,
    limit: int = SCENES_LIMIT,
    after: int | None = None,
    principal: Principal,
) -> list[Scene]:
    """One scene per session at exactly ``scope``, newest first, with its episodes and records.

    ``after`` is a scene's ``cursor``: only sessions older than it. Derived on the
    fly; nothing is stored or audited.
    """
    parsed = access.require(principal, access.READ, scope)
    limit = _check_limit("limit", limit, 200)
    grouped = (
        Episode.objects.filter(scope=str(parsed)).values("session_id").annotate(last=Max("id"))
    )
    if after is not None:
        grouped = grouped.filter(last__lt=after)
    sessions = list(grouped.order_by("-last").values_list("session_id", "last")[:limit])
    result = []
    for session, last in sessions:
        episodes = Episode.objects.filter(scope=str(parsed), session_id=session).order_by("-id")[
            :SCENE_ITEMS_LIMIT
        ]
        records = Record.objects.filter(scope=str(parsed), session_id=session).order_by("-id")[
            :SCENE_ITEMS_LIMIT
        ]
        result.append(
            Scene(
                session_id=session,
                cursor=str(last),
                episodes=tuple(
                    {
                        "episode_id": e.episode_id,
                        "turn_id": e.turn_id,
                        "source_type": e.source_type,
                        "text": e.text,
                        "purged": e.purged_at is not None,
                        "created_at": e.created_at.isoformat(),
                    }
                    for e in episodes
                ),
                records=tuple(
                    {
                        "record_id": r.record_id,
                        "status": r.status,
                        "fact_key": r.fact_key,
                        "content": r.content,
                        "trust_tier": r.trust_tier,
                        "episode_id": r.episode_id,
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in records
                ),
            )
        )
    return result


# -- host hooks: capture and log_action ------------------------------------------------------


@storable_text_arguments
@transaction.atomic
def capture(
    *,
    scope: Scope | str,
    role: str,
    content: str,
    session_id: str | None = None,
    turn_id: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> CaptureResult:
    """A host's turn hook: a ``user`` turn is remembered; agent turns leave digests only.

    ``assistant``, ``tool_call`` and ``tool_result`` append ``agent.*`` events
    with a digest and size, never content, so an agent cannot poison its own
    memory. Any other role is refused.
    """
    if role == "user":
        result = remember(
            scope=scope,
            text=content,
            session_id=session_id,
            turn_id=turn_id,
            principal=principal,
            actor=actor,
        )
        return CaptureResult(role, None, result)
    if role not in CAPTURE_EVENT_TYPES:
        raise CaptureError(f"unknown role {role!r}: use user, assistant, tool_call or tool_result")
    parsed = access.require(principal, access.WRITE, scope)
    if not isinstance(content, str):
        raise CaptureError("captured content must be text")
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    lock_subject(str(parsed))
    event = _audit(
        scope=parsed,
        event_type=CAPTURE_EVENT_TYPES[role],
        actor=access.audit_actor(principal, actor, default="agent"),
        payload={"role": role, "content_sha256": sha256_text(content), "chars": len(content)},
        session_id=session,
        turn_id=turn,
    )
    return CaptureResult(role, event.event_id, None)


@storable_text_arguments
@transaction.atomic
def log_action(
    *,
    scope: Scope | str,
    event_type: str,
    payload: dict[str, Any],
    session_id: str | None = None,
    turn_id: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> dict[str, Any]:
    """Append the caller's ``agent.*`` event to the scope's chain, as ``agent.log.*``.

    The payload is the caller's: it must hold digests, IDs and counts, not
    content, and never the keys of deletion evidence (see
    :func:`audit.services.log_agent_event`).
    """
    # The scope is checked here so a bad one surfaces as ScopeError (the API's
    # "scope" field) and an out-of-reach one as AccessDenied, like every verb.
    parsed = access.require(principal, access.WRITE, scope)
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    try:
        event = log_agent_event(
            subject=parsed,
            event_type=event_type,
            payload=payload,
            actor=access.audit_actor(principal, actor, default="agent"),
            session_id=session or None,
            turn_id=turn or None,
            principal=principal,
        )
    except AuditError as exc:
        raise ActionLogError(str(exc), field=exc.field or "payload") from exc
    return {
        "audit_event_id": event.event_id,
        "sequence": event.sequence,
        "event_hash": event.event_hash,
        "subject_id": event.subject_id,
        "event_type": event.event_type,
    }


# -- inspection (a read, here for the API's convenience) ------------------------------------


def inspect(*, scope: Scope | str, principal: Principal) -> dict[str, Any]:
    """Records (all statuses), episodes, retrieval events, audit events and chain status at ``scope``."""
    return selectors.inspect(principal, scope=scope)
