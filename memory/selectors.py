"""Every read of memory the outside uses, with visibility built in.

A selector never returns a row the principal may not see: scoped reads first
check the scope with :func:`aetnaweb.access.require` (``AccessDenied`` when out
of reach; views answer 404), and cross-scope lists filter with
:func:`aetnaweb.access.scope_q`. Lists are paginated by key (the integer
``id``, newest first unless noted), bounded, and served by an index; counts
come from the per-scope counters, never from ``COUNT(*)`` over records.

An operator also reads the ancestors of their grants, but only what a recall
inside their subtree reads there (scopes.md): active records, never
quarantined, rejected or superseded ones, and never an ancestor's episodes
(recall does not show source episodes). :func:`readable_records_q`,
:func:`readable_episodes_q` and :func:`may_read_record` hold that rule for
every record and episode read below.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q, Sum

from aetnaweb import access
from aetnaweb.access import SYSTEM, Principal
from aetnaweb.scopes import WILDCARD, Scope
from audit.models import AuditEvent, AuditSubject
from audit.verification import verify_subject
from memory import binding
from memory import metadata as record_metadata
from memory.errors import QueryError, RecordNotFound
from memory.extraction import review_warnings
from memory.limits import MAX_PAGE
from memory.models import (
    DeletionReceipt,
    Episode,
    ForgetBundle,
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

CHAIN_STEPS = 50
DETAIL_EVENTS = 200
DETAIL_RECALLS = 50
INSPECT_ROWS = 100
TREE_MAX_SCOPES = 5000


@dataclass(frozen=True)
class Page:
    """One page of a key-paginated list; pass ``next_cursor`` as ``after`` for the next."""

    items: list[Any]
    next_cursor: str | None


# -- shared -------------------------------------------------------------------------


def _limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise QueryError(f"limit must be a whole number from 1 to {MAX_PAGE}")
    return limit


def _cursor(after: Any) -> int | None:
    if after is None or after == "":
        return None
    try:
        value = int(str(after))
    except ValueError:
        raise QueryError(
            f"invalid cursor {after!r}: pass the next_cursor of the previous page"
        ) from None
    if value < 0:
        raise QueryError(f"invalid cursor {after!r}: pass the next_cursor of the previous page")
    return value


def _choice(name: str, value: str | None, choices: list[str]) -> str | None:
    if value is None or value == "":
        return None
    if value not in choices:
        raise QueryError(f"unknown {name} {value!r}: use one of {', '.join(choices)}")
    return value


def _page(queryset: Any, after: int | None, limit: int, *, newest_first: bool) -> Page:
    """One page by ``id``, newest first or oldest first (queues): ``after`` is the last ``id`` seen."""
    if after is not None:
        queryset = queryset.filter(id__lt=after) if newest_first else queryset.filter(id__gt=after)
    rows = list(queryset.order_by("-id" if newest_first else "id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, str(rows[-1].id) if more and rows else None)


def record_as_dict(record: Record) -> dict[str, Any]:
    """A record as plain data (for ``--json`` and the API)."""
    return {
        "record_id": record.record_id,
        "scope": record.scope,
        "status": record.status,
        "content": record.content,
        "fact_key": record.fact_key,
        "kind": record.kind,
        "source_type": record.source_type,
        "trust_tier": record.trust_tier,
        "confidence": record.confidence,
        "episode_id": record.episode_id,
        "session_id": record.session_id,
        "turn_id": record.turn_id,
        "supersedes": record.supersedes_id,
        "superseded_by": record.superseded_by_id,
        "evidence": record.evidence,
        "metadata": record.metadata or {},
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "deleted_at": record.deleted_at.isoformat() if record.deleted_at else None,
        "expires_at": record.expires_at.isoformat() if record.expires_at else None,
    }


def episode_as_dict(episode: Episode) -> dict[str, Any]:
    return {
        "episode_id": episode.episode_id,
        "scope": episode.scope,
        "session_id": episode.session_id,
        "turn_id": episode.turn_id,
        "source_type": episode.source_type,
        "text": episode.text,
        "purged": episode.purged_at is not None,
        "created_at": episode.created_at.isoformat(),
    }


def audit_event_as_dict(event: AuditEvent) -> dict[str, Any]:
    return {
        "sequence": event.sequence,
        "event_id": event.event_id,
        "subject_id": event.subject_id,
        "event_type": event.event_type,
        "created_at": event.created_at,
        "actor": event.actor,
        "session_id": event.session_id,
        "turn_id": event.turn_id,
        "record_id": event.record_id,
        "payload": event.payload,
        "prev_hash": event.prev_hash,
        "event_hash": event.event_hash,
    }


def retrieval_as_dict(event: RetrievalEvent) -> dict[str, Any]:
    return {
        "retrieval_id": event.retrieval_id,
        "scope": event.scope,
        "session_id": event.session_id,
        "actor": event.actor,
        "purpose": event.purpose,
        "query_sha256": event.query_sha256,
        "query_text": event.query_text,
        "limit": event.limit,
        "min_score": event.min_score,
        "candidates": event.candidates,
        "returned_ids": event.returned_ids,
        "audit_event_id": event.audit_event_id,
        "created_at": event.created_at.isoformat(),
    }


# -- records ----------------------------------------------------------------------------


def list_records(
    principal: Principal,
    *,
    scope: Scope | str,
    status: str | None = None,
    source_type: str | None = None,
    trust_tier: str | None = None,
    session_id: str | None = None,
    text: str | None = None,
    include_descendants: bool = False,
    metadata: Mapping[str, Any] | None = None,
    created_at: Mapping[str, Any] | None = None,
    after: Any = None,
    limit: int = 50,
) -> Page:
    """Records stored at ``scope`` (or its subtree), newest first, filtered.

    ``text`` is a case-insensitive substring of the content; ``metadata`` keeps
    records holding every one of those keys with exactly that typed value (or
    meeting its operators), ``created_at`` those stored in that range
    (:func:`memory.metadata.check_filter`).
    """
    parsed = access.require(principal, access.READ, scope)
    wanted = record_metadata.check_filter(metadata, created_at=created_at)
    queryset = Record.objects.all()
    if include_descendants:
        queryset = queryset.filter(**parsed.subtree_filter()).filter(readable_records_q(principal))
    else:
        queryset = queryset.filter(scope=str(parsed))
        if not access.may_act(principal, access.READ, parsed):
            # An operator's lineage-only ancestor: what a recall reads there, no more.
            queryset = queryset.filter(status=Status.ACTIVE)
    status = _choice("status", status, Status.values)
    if status:
        queryset = queryset.filter(status=status)
    source_type = _choice("source type", source_type, SourceType.values)
    if source_type:
        queryset = queryset.filter(source_type=source_type)
    trust_tier = _choice("trust tier", trust_tier, TrustTier.values)
    if trust_tier:
        queryset = queryset.filter(trust_tier=trust_tier)
    if session_id:
        queryset = queryset.filter(session_id=session_id)
    if text:
        queryset = queryset.filter(content__icontains=text)
    if wanted:
        # The indexed condition recall uses too (GIN on PostgreSQL, the side
        # table on SQLite); the table name is the ORM's own alias.
        condition, params = record_metadata.sql_condition(Record._meta.db_table, wanted)
        queryset = queryset.extra(where=[condition], params=params)  # noqa: S610  (placeholders only)
    page = _page(with_chain_purged(queryset), _cursor(after), _limit(limit), newest_first=True)
    for record in page.items:
        if record.chain_purged:
            as_purged(record)
    return page


def with_chain_purged(queryset: Any) -> Any:
    """``queryset`` with each record's ``chain_purged``: whether a purge marker names it.

    A record its chain purged is shown as purged (:func:`as_purged`) whatever its
    row says; the marker (written with the forget event, checked by the
    verifiers) is looked up per row inside the same query.
    """
    return queryset.annotate(
        chain_purged=Exists(
            RecordAuditLink.objects.filter(
                record_id=OuterRef("record_id"), event_type__in=binding.PURGE_EVENTS
            )
        )
    )


WARNING_CHOICES = ["warned", "clean"]
WARNING_SCAN_ROWS = 2000  # quarantined rows read per request to judge warnings, at most


def _judged(rows: Iterator[Record], warning: str) -> Iterator[Record]:
    """The rows whose content does (``warned``) or does not (``clean``) carry a review
    warning. The warning is a heuristic over the text (memory.extraction), not a column,
    so it is judged here, over a bounded scan."""
    wanted = warning == "warned"
    for row in rows:
        if bool(review_warnings(row.content)) == wanted:
            yield row


def _review_queryset(
    principal: Principal,
    scope: Scope | str | None,
    source_type: str | None,
    waiting_since: datetime | None,
) -> Any:
    queryset = Record.objects.filter(status=Status.QUARANTINED).filter(
        access.scope_q(principal, access.REVIEW)
    )
    if scope is not None:
        parsed = access.require(principal, access.REVIEW, scope)
        queryset = queryset.filter(**parsed.subtree_filter())
    elif not access.has_capability_anywhere(principal, access.REVIEW):
        raise access.AccessDenied(f"{principal.label} may not review anywhere")
    source_type = _choice("source type", source_type, SourceType.values)
    if source_type:
        queryset = queryset.filter(source_type=source_type)
    if waiting_since is not None:
        queryset = queryset.filter(created_at__lte=waiting_since)
    return queryset


def review_queue(
    principal: Principal,
    *,
    scope: Scope | str | None = None,
    source_type: str | None = None,
    waiting_since: datetime | None = None,
    warning: str | None = None,
    after: Any = None,
    limit: int = 50,
) -> Page:
    """Quarantined records across every scope the principal may review, oldest first.

    Each item has its source episode loaded (``record.episode``; its text
    unless purged). ``scope`` narrows to that subtree, ``source_type`` to one
    kind of source, ``waiting_since`` to records quarantined at or before then,
    ``warning`` to facts that do (``warned``) or do not (``clean``) carry a review
    warning (judged over at most ``WARNING_SCAN_ROWS`` rows a page).
    """
    queryset = _review_queryset(principal, scope, source_type, waiting_since)
    warning = _choice("warning", warning, WARNING_CHOICES)
    if warning is None:
        return _page(
            queryset.select_related("episode"), _cursor(after), _limit(limit), newest_first=False
        )
    limit = _limit(limit)
    cursor = _cursor(after)
    if cursor is not None:
        queryset = queryset.filter(id__gt=cursor)
    scanned = list(queryset.select_related("episode").order_by("id")[:WARNING_SCAN_ROWS])
    kept = list(_judged(iter(scanned), warning))
    if len(kept) > limit:
        return Page(kept[:limit], str(kept[limit - 1].id))
    # The scan stopped at its bound: the next page goes on from the last row read.
    more = len(scanned) == WARNING_SCAN_ROWS
    return Page(kept, str(scanned[-1].id) if more else None)


REVIEW_COUNT_CAP = 10_000


@dataclass(frozen=True)
class QueuePosition:
    """How many records wait (``total``, capped at ``capped``) and how many precede a page."""

    total: int
    before: int
    capped: bool


def review_queue_position(
    principal: Principal,
    *,
    scope: Scope | str | None = None,
    source_type: str | None = None,
    waiting_since: datetime | None = None,
    warning: str | None = None,
    after: Any = None,
) -> QueuePosition:
    """The queue's size and where a page starting after ``after`` sits in it.

    Counts only quarantined rows (the status index), each count bounded by
    ``REVIEW_COUNT_CAP`` so a flood of quarantined facts cannot slow the page.
    """
    queryset = _review_queryset(principal, scope, source_type, waiting_since)
    cursor = _cursor(after)
    warning = _choice("warning", warning, WARNING_CHOICES)
    if warning is not None:
        # Judged in Python over a bounded scan: counted up to WARNING_SCAN_ROWS rows read.
        rows = list(queryset.order_by("id").only("id", "content")[: WARNING_SCAN_ROWS + 1])
        judged = list(_judged(iter(rows[:WARNING_SCAN_ROWS]), warning))
        before = sum(1 for row in judged if cursor is not None and row.id <= cursor)
        return QueuePosition(len(judged), before, len(rows) > WARNING_SCAN_ROWS)
    total = queryset.order_by()[: REVIEW_COUNT_CAP + 1].count()
    before = 0
    if cursor is not None:
        before = queryset.filter(id__lte=cursor).order_by()[:REVIEW_COUNT_CAP].count()
    return QueuePosition(min(total, REVIEW_COUNT_CAP), before, total > REVIEW_COUNT_CAP)


def review_queue_items(
    principal: Principal,
    *,
    scope: Scope | str | None = None,
    source_type: str | None = None,
    waiting_since: datetime | None = None,
    warning: str | None = None,
    limit: int = 200,
) -> list[tuple[str, str]]:
    """(scope, record ID) of the oldest ``limit`` records matching the queue's filter:
    "tick all matching the filter" decides these (a bulk decision takes at most 200)."""
    queryset = _review_queryset(principal, scope, source_type, waiting_since)
    limit = _limit(limit)
    warning = _choice("warning", warning, WARNING_CHOICES)
    if warning is not None:
        rows = queryset.order_by("id").only("id", "scope", "record_id", "content")
        picked = list(_judged(iter(rows[:WARNING_SCAN_ROWS]), warning))[:limit]
        pairs = [(row.scope, row.record_id) for row in picked]
    else:
        pairs = list(queryset.order_by("id").values_list("scope", "record_id")[:limit])
    return [
        (row_scope, record_id)
        for row_scope, record_id in pairs
        if access.may(principal, access.REVIEW, row_scope)
    ]


def current_slot_values(principal: Principal, records: list[Record]) -> dict[str, Record]:
    """Per quarantined record with a ``fact_key``, the newest active record it would
    supersede if promoted (same scope, same key), among records the principal may read."""
    keyed = [r for r in records if r.fact_key]
    if not keyed:
        return {}
    condition = Q()
    for record in keyed:
        condition |= Q(scope=record.scope, fact_key=record.fact_key)
    holders: dict[tuple[str, str], Record] = {}
    for row in (
        Record.objects.filter(status=Status.ACTIVE)
        .filter(condition)
        .filter(readable_records_q(principal))
        .order_by("id")
    ):
        holders[(row.scope, row.fact_key or "")] = row  # the newest wins
    return {
        r.record_id: holders[(r.scope, r.fact_key or "")]
        for r in keyed
        if (r.scope, r.fact_key or "") in holders
    }


def waiting_siblings(principal: Principal, records: list[Record]) -> dict[str, list[Record]]:
    """Per source episode of ``records``, every fact from it still quarantined (oldest first),
    among those the principal may review: the review queue shows them together."""
    episode_ids = sorted({r.episode_id for r in records if r.episode_id})
    if not episode_ids:
        return {}
    rows = (
        Record.objects.filter(status=Status.QUARANTINED, episode_id__in=episode_ids)
        .filter(access.scope_q(principal, access.REVIEW))
        .select_related("episode")
        .order_by("id")
    )
    grouped: dict[str, list[Record]] = {}
    for row in rows:
        if access.may(principal, access.REVIEW, row.scope) and row.episode_id:
            grouped.setdefault(row.episode_id, []).append(row)
    return grouped


def quarantined_for_review(
    principal: Principal, items: list[tuple[Scope, str]]
) -> dict[str, Record]:
    """The quarantined records among ``items`` (scope, record ID) the principal may review."""
    if not items:
        return {}
    wanted = {(str(scope), record_id) for scope, record_id in items}
    rows = Record.objects.filter(
        status=Status.QUARANTINED, record_id__in=sorted({r for _, r in wanted})
    ).filter(access.scope_q(principal, access.REVIEW))
    return {
        row.record_id: row
        for row in rows
        if (row.scope, row.record_id) in wanted and access.may(principal, access.REVIEW, row.scope)
    }


def lineage_only_scopes(principal: Principal) -> list[str]:
    """Scopes an operator reads only as a recall from their subtree would: the ancestors
    of their read grants that no grant of theirs covers (sorted; empty for tokens and
    the system, whose reads of ancestors go through :func:`_recalled_ancestor_record`)."""
    if principal.is_system or not principal.is_operator:
        return []
    found = {
        str(ancestor)
        for granted, caps in principal.bindings
        if access.READ in caps
        for ancestor in granted.ancestors()
    }
    return sorted(scope for scope in found if not access.may_act(principal, access.READ, scope))


def readable_records_q(principal: Principal) -> Q:
    """Records the principal may read: everything in a granted subtree, and at an
    operator's lineage-only ancestors the active records alone."""
    q = access.scope_q(principal, access.READ)
    lineage = lineage_only_scopes(principal)
    if lineage:
        q &= ~Q(scope__in=lineage) | Q(status=Status.ACTIVE)
    return q


def readable_episodes_q(principal: Principal) -> Q:
    """Episodes the principal may read: inside a granted subtree only (a recall never
    shows an episode, so an ancestor's are not read through the lineage)."""
    q = access.scope_q(principal, access.READ)
    lineage = lineage_only_scopes(principal)
    if lineage:
        q &= ~Q(scope__in=lineage)
    return q


def may_read_record(principal: Principal, record: Record) -> bool:
    """The per-row re-check of :func:`readable_records_q` (segment-wise, no SQL)."""
    if not access.may(principal, access.READ, record.scope):
        return False
    return record.status == Status.ACTIVE or access.may_act(principal, access.READ, record.scope)


def _visible_record(principal: Principal, record_id: str) -> Record:
    record = (
        Record.objects.filter(readable_records_q(principal))
        .filter(record_id=record_id)
        .select_related("episode")
        .first()
    )
    if record is not None and may_read_record(principal, record):
        return record
    if Record.objects.filter(record_id=record_id).exists():
        raise access.AccessDenied(f"{principal.label} may not read record {record_id}")
    raise RecordNotFound(f"no record {record_id}: check the ID")


def _recalled_ancestor_record(principal: Principal, record_id: str) -> Record:
    ancestors = access.recalled_ancestors(principal)
    record = (
        Record.objects.filter(scope__in=ancestors, record_id=record_id, status=Status.ACTIVE)
        .select_related("episode")
        .first()
        if ancestors
        else None
    )
    if record is None:
        raise access.AccessDenied(f"{principal.label} may not read record {record_id}")
    return record


@dataclass(frozen=True)
class RecordDetail:
    """A record with everything a reviewer or auditor asks about it."""

    record: Record
    supersedes_chain: list[Record]  # what it replaced, nearest first
    superseded_by_chain: list[Record]  # what replaced it, nearest first
    episode: Episode | None
    audit_events: list[AuditEvent]
    recalls: list[RetrievalHit]  # newest first, with .retrieval_event loaded
    # Whether the record agrees with its scope's chain (the page's banner).
    binding: ContentBinding

    def as_dict(self) -> dict[str, Any]:
        return {
            "record": record_as_dict(self.record),
            "supersedes_chain": [record_as_dict(r) for r in self.supersedes_chain],
            "superseded_by_chain": [record_as_dict(r) for r in self.superseded_by_chain],
            "episode": episode_as_dict(self.episode) if self.episode else None,
            "audit_events": [audit_event_as_dict(e) for e in self.audit_events],
            "recalls": [
                {
                    "retrieval_id": hit.retrieval_event.retrieval_id,
                    "scope": hit.retrieval_event.scope,
                    "created_at": hit.retrieval_event.created_at.isoformat(),
                    "rank": hit.rank,
                    "score": hit.score,
                    "returned": hit.returned,
                }
                for hit in self.recalls
            ],
        }


def _follow(principal: Principal, start: str | None, attribute: str) -> list[Record]:
    chain: list[Record] = []
    seen: set[str] = set()
    current = start
    while current and current not in seen and len(chain) < CHAIN_STEPS:
        seen.add(current)
        record = (
            Record.objects.filter(readable_records_q(principal)).filter(record_id=current).first()
        )
        if record is None or not may_read_record(principal, record):
            break
        chain.append(record)
        current = getattr(record, attribute)
    return chain


def record_detail(principal: Principal, record_id: str) -> RecordDetail:
    """The record, its supersession chain both ways, its source episode, the audit
    events that name it and the recalls that considered it.

    A token may also open an active record of an ancestor scope (recall gave
    it that record): without the source episode, which recall never shows.
    """
    try:
        record = _visible_record(principal, record_id)
    except access.AccessDenied:
        record = _recalled_ancestor_record(principal, record_id)
    binding = content_binding(record)
    if binding.chain_purged:
        as_purged(record)
    sequences = list(
        RecordAuditLink.objects.filter(record_id=record.record_id)
        .order_by("event_sequence")
        .values_list("event_sequence", flat=True)[:DETAIL_EVENTS]
    )
    events = [
        event
        for event in AuditEvent.objects.filter(sequence__in=sequences).order_by("sequence")
        # An event in another scope's chain may name this record (a duplicate
        # noticed below it): show it only to those who may read that scope.
        if access.may(principal, access.READ, event.subject_id)
    ]
    hits = [
        hit
        for hit in RetrievalHit.objects.filter(record_id=record.record_id)
        .select_related("retrieval_event")
        .order_by("-id")[:DETAIL_RECALLS]
        if access.may(principal, access.READ, hit.retrieval_event.scope)
    ]
    return RecordDetail(
        record=record,
        supersedes_chain=_follow(principal, record.supersedes_id, "supersedes_id"),
        superseded_by_chain=_follow(principal, record.superseded_by_id, "superseded_by_id"),
        # A source episode is shown inside a granted subtree only: recall never shows one,
        # so neither a token's ancestor record nor an operator's lineage read reaches it.
        episode=record.episode if access.may_act(principal, access.READ, record.scope) else None,
        audit_events=events,
        recalls=hits,
        binding=binding,
    )


def as_purged(record: Record) -> None:
    """Show a record its chain purged as purged, whatever its row was set back to.

    Only this in-memory copy changes (a read never writes); the binding's
    reasons say what the row holds, and the verifiers name it.
    """
    record.status = Status.TOMBSTONED
    record.content = record.fact_key = ""
    record.metadata = {}
    # Only an episode already loaded with the record (no query per listed row).
    if Record.episode.is_cached(record) and record.episode is not None:
        record.episode.text = ""


def get_episode(principal: Principal, episode_id: str) -> Episode:
    episode = (
        Episode.objects.filter(readable_episodes_q(principal)).filter(episode_id=episode_id).first()
    )
    if episode is not None and access.may_act(principal, access.READ, episode.scope):
        return episode
    if Episode.objects.filter(episode_id=episode_id).exists():
        raise access.AccessDenied(f"{principal.label} may not read episode {episode_id}")
    raise RecordNotFound(f"no episode {episode_id}: check the ID")


# -- retrieval log, receipts -------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalCandidate:
    """One candidate as the recall scored it, and its record if the viewer may read it."""

    record_id: str
    scope: str
    rank: int
    score: float
    parts: dict[str, Any]
    above_threshold: bool
    returned: bool
    record: Record | None  # None: outside the viewer's grants, or gone
    # The calibrated match confidence (None in recalls logged before it existed).
    confidence: float | None = None


@dataclass(frozen=True)
class RetrievalDetail:
    """A stored recall, read after the fact: who asked, what, and why each candidate ranked."""

    event: RetrievalEvent
    candidates: list[RetrievalCandidate]
    audit_event: AuditEvent | None  # its memory.recall event, when readable

    @property
    def returned(self) -> list[RetrievalCandidate]:
        return [c for c in self.candidates if c.returned]


def _stored_candidate(stored: dict[str, Any], records: dict[str, Record]) -> RetrievalCandidate:
    """A candidate as saved in the retrieval event's JSON (tolerant: it is a stored row)."""
    parts = stored.get("parts")
    record_id = str(stored.get("record_id", ""))
    return RetrievalCandidate(
        record_id=record_id,
        scope=str(stored.get("scope", "")),
        rank=int(stored.get("rank") or 0),
        score=float(stored.get("score") or 0.0),
        parts=parts if isinstance(parts, dict) else {},
        above_threshold=bool(stored.get("above_threshold")),
        returned=bool(stored.get("returned")),
        record=records.get(record_id),
        confidence=(
            float(stored["confidence"])
            if isinstance(stored.get("confidence"), int | float)
            and not isinstance(stored.get("confidence"), bool)
            else None
        ),
    )


def get_retrieval(principal: Principal, retrieval_id: str) -> RetrievalDetail:
    """A recall by ``ret_`` ID for someone who may read the scope it was made at.

    A candidate's record (content, status) is attached only when the viewer
    may read that record's scope, checked per record rather than assumed from
    the recall's scope: the candidate list is a stored row, and a token's
    grant does not reach ancestors as an operator's does. Out of reach is
    ``AccessDenied``, unknown is ``RecordNotFound`` (both 404 in views).
    """
    event = RetrievalEvent.objects.filter(retrieval_id=retrieval_id).first()
    if event is None:
        raise RecordNotFound(f"no retrieval {retrieval_id}: check the ID")
    access.require(principal, access.READ, event.scope)
    stored = [c for c in event.candidates if isinstance(c, dict)]
    ids = [str(c.get("record_id")) for c in stored if c.get("record_id")]
    records = {
        record.record_id: record
        for record in Record.objects.filter(readable_records_q(principal)).filter(record_id__in=ids)
        if may_read_record(principal, record)
    }
    candidates = [_stored_candidate(c, records) for c in stored]
    audit_event = None
    if event.audit_event_id:
        audit_event = AuditEvent.objects.filter(event_id=event.audit_event_id).first()
        if audit_event is not None and not access.may(
            principal, access.READ, audit_event.subject_id
        ):
            audit_event = None
    return RetrievalDetail(event=event, candidates=candidates, audit_event=audit_event)


def records_by_id_prefix(principal: Principal, prefix: str, *, limit: int = 20) -> list[Record]:
    """Records whose ``record_id`` starts with ``prefix`` (a whole ID: exactly it), readable only."""
    rows = Record.objects.filter(readable_records_q(principal))
    rows = (
        rows.filter(record_id=prefix)
        if len(prefix) == 36
        else rows.filter(record_id__startswith=prefix)
    )
    found = rows.order_by("record_id")[:limit]
    return [row for row in found if may_read_record(principal, row)]


def retrievals_by_id_prefix(
    principal: Principal, prefix: str, *, limit: int = 20
) -> list[RetrievalEvent]:
    """Stored recalls whose ``retrieval_id`` starts with ``prefix``, at readable scopes only."""
    rows = RetrievalEvent.objects.filter(access.scope_q(principal, access.READ))
    rows = (
        rows.filter(retrieval_id=prefix)
        if len(prefix) == 36
        else rows.filter(retrieval_id__startswith=prefix)
    )
    found = rows.order_by("retrieval_id")[:limit]
    return [row for row in found if access.may(principal, access.READ, row.scope)]


def review_reasons(principal: Principal, record_id: str) -> dict[str, str]:
    """The typed reasons of a record's review decisions, by audit event ID, for those who
    may review the record's scope (everyone else: none)."""
    rows = ReviewReason.objects.filter(record_id=record_id).filter(
        access.scope_q(principal, access.REVIEW)
    )
    return {
        row.audit_event_id: row.reason
        for row in rows
        if row.reason and access.may(principal, access.REVIEW, row.scope)
    }


def session_retrievals(
    principal: Principal, session_id: str, *, limit: int = 20
) -> list[RetrievalEvent]:
    """The newest recalls of one session, at scopes the principal may read."""
    rows = (
        RetrievalEvent.objects.filter(access.scope_q(principal, access.READ))
        .filter(session_id=session_id)
        .order_by("-id")[:limit]
    )
    return [row for row in rows if access.may(principal, access.READ, row.scope)]


def retrieval_log(
    principal: Principal, *, scope: Scope | str, after: Any = None, limit: int = 50
) -> Page:
    """Recalls made at exactly ``scope``, newest first, with their candidates."""
    parsed = access.require(principal, access.READ, scope)
    return _page(
        RetrievalEvent.objects.filter(scope=str(parsed)),
        _cursor(after),
        _limit(limit),
        newest_first=True,
    )


def list_receipts(
    principal: Principal, *, scope: Scope | str, after: Any = None, limit: int = 50
) -> Page:
    """Deletion receipts issued at exactly ``scope`` (forget and reject), newest first."""
    parsed = access.require(principal, access.READ, scope)
    return _page(
        DeletionReceipt.objects.filter(scope=str(parsed)),
        _cursor(after),
        _limit(limit),
        newest_first=True,
    )


def get_receipt(principal: Principal, audit_event_id: str) -> dict[str, Any]:
    """The receipt bound to one ``memory.forget`` / ``memory.record_rejected`` event."""
    return get_receipt_entry(principal, audit_event_id).receipt


@dataclass(frozen=True)
class ReceiptEntry:
    receipt: dict[str, Any]
    # The request's reference as typed ("" when none was given).
    reference: str
    # The closing event of the forget bundle holding this receipt ("" when alone).
    bundle_event_id: str


def get_receipt_entry(principal: Principal, audit_event_id: str) -> ReceiptEntry:
    """A receipt with what is kept beside it: the request's reference and its bundle."""
    row = (
        DeletionReceipt.objects.filter(access.scope_q(principal, access.READ))
        .filter(audit_event_id=audit_event_id)
        .first()
    )
    if row is None:
        if DeletionReceipt.objects.filter(audit_event_id=audit_event_id).exists():
            raise access.AccessDenied(f"{principal.label} may not read that receipt")
        raise RecordNotFound(f"no deletion receipt for event {audit_event_id}")
    return ReceiptEntry(dict(row.receipt), row.reference, row.bundle_event_id)


def get_forget_bundle(principal: Principal, closing_event_id: str) -> dict[str, Any]:
    """A forget's bundle, for those who may read the scope it was asked at (else not found)."""
    row = (
        ForgetBundle.objects.filter(access.scope_q(principal, access.READ))
        .filter(closing_event_id=closing_event_id)
        .first()
    )
    # Every receipt in it must be readable too: an operator who reads the scope only as an
    # ancestor of a sibling's does not see what was forgotten beside them.
    if row is None or not all(
        access.may(principal, access.READ, r["subject_id"]) for r in row.document["receipts"]
    ):
        raise RecordNotFound(f"no forget bundle for event {closing_event_id}")
    return dict(row.document)


# -- scopes ----------------------------------------------------------------------------------


COUNT_FIELDS = ("active", "quarantined", "superseded", "tombstoned", "episodes")


def _counts(row: ScopeStats | None) -> dict[str, int]:
    return {name: getattr(row, name) if row is not None else 0 for name in COUNT_FIELDS}


def inspect(principal: Principal, *, scope: Scope | str) -> dict[str, Any]:
    """What is stored at exactly ``scope``: the latest records (all statuses), episodes,
    retrieval events and audit events, the counters, and whether its chain verifies."""
    parsed = access.require(principal, access.READ, scope)
    name = str(parsed)
    records = Record.objects.filter(scope=name).order_by("-id")[:INSPECT_ROWS]
    episodes = Episode.objects.filter(scope=name).order_by("-id")[:INSPECT_ROWS]
    retrievals = RetrievalEvent.objects.filter(scope=name).order_by("-id")[:INSPECT_ROWS]
    events = AuditEvent.objects.filter(subject_id=name).order_by("-sequence")[:INSPECT_ROWS]
    chain = verify_subject(name, principal=SYSTEM)
    return {
        "scope": name,
        "counts": _counts(ScopeStats.objects.filter(scope=name).first()),
        "records": [record_as_dict(r) for r in records],
        "episodes": [episode_as_dict(e) for e in episodes],
        "retrieval_events": [retrieval_as_dict(r) for r in retrievals],
        "audit_events": [audit_event_as_dict(e) for e in events],
        "chain": chain.as_dict(),
    }


def scope_counts(principal: Principal, *, scope: Scope | str) -> dict[str, int]:
    """The counters of exactly ``scope`` (records by status, episodes); zeros when it holds nothing."""
    parsed = access.require(principal, access.READ, scope)
    return _counts(ScopeStats.objects.filter(scope=str(parsed)).first())


def chain_status(principal: Principal, *, scope: Scope | str) -> dict[str, Any]:
    """Whether ``scope``'s audit chain verifies (as :func:`inspect` reports it): ok, events
    checked, first bad sequence and the reasons. Reveals no content, so readers may ask."""
    parsed = access.require(principal, access.READ, scope)
    return verify_subject(str(parsed), principal=SYSTEM).as_dict()


def chain_length(principal: Principal, *, scope: Scope | str) -> int:
    """How many events ``scope``'s audit chain holds, from the audit layer's subject index
    (one indexed row, no count over ``audit_log``); 0 for a chain never written."""
    parsed = access.require(principal, access.READ, scope)
    count = (
        AuditSubject.objects.filter(subject_id=str(parsed))
        .values_list("event_count", flat=True)
        .first()
    )
    return int(count or 0)


def effective_recall_scopes(principal: Principal, *, scope: Scope | str) -> list[dict[str, Any]]:
    """What a recall at ``scope`` reads: the scope and each ancestor, with weight and count."""
    parsed = access.require(principal, access.READ, scope)
    lineage = parsed.lineage()
    stats = {
        row.scope: row for row in ScopeStats.objects.filter(scope__in=[str(s) for s in lineage])
    }
    return [
        {
            "scope": str(item),
            "level": item.level,
            "weight": parsed.weight(item),
            "active": stats[str(item)].active if str(item) in stats else 0,
        }
        for item in lineage
    ]


def scope_tree(principal: Principal, *, tenant: str | None = None) -> list[dict[str, Any]]:
    """Scopes that hold memory, as tenant -> user -> project nodes with their counters.

    The platform scope, when present, is the first node. Only scopes the
    principal may read appear; a level with no memory of its own shows zeros.
    At most ``TREE_MAX_SCOPES`` stored scopes are read (in tenant, user,
    project order); :func:`count_scopes_with_memory` says whether that cut any.
    """
    queryset = ScopeStats.objects.filter(access.scope_q(principal, access.READ))
    if tenant is not None:
        queryset = queryset.filter(tenant=tenant)
    # Plain tuples, not model instances, and scopes rebuilt from the stored
    # columns (validated when the row was written) rather than parsed again: a
    # platform reader's tree is thousands of rows on every load of the page.
    rows = list(
        queryset.order_by("tenant", "user", "project").values_list(
            "scope", "tenant", "user", "project", *COUNT_FIELDS
        )[:TREE_MAX_SCOPES]
    )
    scopes: list[Scope] = []
    by_scope: dict[str, dict[str, int]] = {}
    for name, tenant_name, user, project, *counts in rows:
        scope = Scope(tenant_name, user, project)
        if str(scope) != name:  # a row edited behind the services' back: not drawn
            continue
        scopes.append(scope)
        by_scope[name] = dict(zip(COUNT_FIELDS, counts, strict=True))

    def node(scope: Scope) -> dict[str, Any]:
        name = str(scope)
        return {
            "scope": name,
            "level": scope.level,
            "counts": by_scope.get(name) or _counts(None),
            "children": [],
        }

    roots: list[dict[str, Any]] = []
    tenants: dict[str, dict[str, Any]] = {}
    users: dict[tuple[str, str], dict[str, Any]] = {}
    for scope in scopes:
        if scope.is_platform:
            roots.insert(0, node(scope))
            continue
        if scope.tenant not in tenants:
            # Built from a stored scope's segments, the enclosing scopes are valid.
            tenants[scope.tenant] = node(Scope(scope.tenant, WILDCARD, WILDCARD))
            roots.append(tenants[scope.tenant])
        if scope.depth >= 2 and (scope.tenant, scope.user) not in users:
            users[(scope.tenant, scope.user)] = node(Scope(scope.tenant, scope.user, WILDCARD))
            tenants[scope.tenant]["children"].append(users[(scope.tenant, scope.user)])
        if scope.depth == 3:
            users[(scope.tenant, scope.user)]["children"].append(node(scope))
    return roots


def count_scopes_with_memory(principal: Principal, *, tenant: str | None = None) -> int:
    """How many stored scopes :func:`scope_tree` would draw without its cap (from the
    per-scope counters table, one row per scope; never a count over records)."""
    queryset = ScopeStats.objects.filter(access.scope_q(principal, access.READ))
    if tenant is not None:
        queryset = queryset.filter(tenant=tenant)
    return queryset.count()


def counts_by_tenant(principal: Principal) -> list[dict[str, Any]]:
    """Active and quarantined record counts per tenant the principal may read (from counters)."""
    rows = (
        ScopeStats.objects.filter(access.scope_q(principal, access.READ))
        .values("tenant")
        .annotate(active=Sum("active"), quarantined=Sum("quarantined"))
        .order_by("tenant")
    )
    return [
        {
            "tenant": row["tenant"],
            "active": row["active"] or 0,
            "quarantined": row["quarantined"] or 0,
        }
        for row in rows
    ]


def quarantined_awaiting(principal: Principal) -> int:
    """Quarantined records in scopes where the principal may review ("awaiting you")."""
    if not access.has_capability_anywhere(principal, access.REVIEW):
        return 0
    total = ScopeStats.objects.filter(access.scope_q(principal, access.REVIEW)).aggregate(
        n=Sum("quarantined")
    )["n"]
    return int(total or 0)


def scopes_with_memory(principal: Principal, *, after: Any = None, limit: int = 50) -> Page:
    """Scopes that hold memory and the principal may read, by internal id (stable keys)."""
    queryset = ScopeStats.objects.filter(access.scope_q(principal, access.READ))
    return _page(queryset, _cursor(after), _limit(limit), newest_first=False)


__all__ = [
    "Page",
    "RecordDetail",
    "RetrievalCandidate",
    "RetrievalDetail",
    "as_purged",
    "chain_length",
    "chain_status",
    "count_scopes_with_memory",
    "counts_by_tenant",
    "effective_recall_scopes",
    "get_episode",
    "get_receipt",
    "get_retrieval",
    "inspect",
    "lineage_only_scopes",
    "list_receipts",
    "list_records",
    "may_read_record",
    "quarantined_awaiting",
    "quarantined_for_review",
    "readable_episodes_q",
    "readable_records_q",
    "record_detail",
    "records_by_id_prefix",
    "retrieval_log",
    "retrievals_by_id_prefix",
    "review_queue",
    "review_reasons",
    "scope_counts",
    "scope_tree",
    "scopes_with_memory",
    "session_retrievals",
    "waiting_siblings",
    "with_chain_purged",
]


# -- evidence checks the audit layer runs (registered in memory.apps) ----------------


def receipt_purge_failures(
    subject_id: str, record_ids: list[str], episode_ids: list[str]
) -> list[str]:
    """Named records that are not tombstoned and episodes that are not purged.

    The receipt rule's "where the records are at hand" (audit-log-v1): a row
    that does not exist here is not at hand and is not judged. Worded exactly
    as ``tools/verify_audit.py`` words it.
    """
    failures = []
    records = {
        row[0]: row[1:]
        for row in Record.objects.filter(record_id__in=record_ids).values_list(
            "record_id", "scope", "status", "content"
        )
    }
    for record_id in record_ids:
        if record_id not in records:
            continue
        scope, status, content = records[record_id]
        if scope != subject_id:
            failures.append(f"record {record_id} belongs to scope {scope}, not {subject_id}")
        elif status != Status.TOMBSTONED:
            failures.append(f"record {record_id} is {status}, not tombstoned: it was not purged")
        elif content:
            failures.append(f"record {record_id} is tombstoned but still holds content")
    episodes = {
        row[0]: row[1:]
        for row in Episode.objects.filter(episode_id__in=episode_ids).values_list(
            "episode_id", "text", "purged_at"
        )
    }
    for episode_id in episode_ids:
        if episode_id in episodes:
            text, purged_at = episodes[episode_id]
            if text or purged_at is None:
                failures.append(f"episode {episode_id} still holds its text: it was not purged")
    return failures


# A record is bound by the event that created it (content_sha256,
# metadata_sha256, fact_key_sha256: salted since issue 29, plain SHA-256
# before) and its status and trust tier follow from its scope's later events
# (promotions, supersessions, purges). memory.binding replays those events and
# judges each stored row against them; records written before the binding
# existed have no content_sha256 and are reported as unbound, not as broken.
CREATION_EVENTS = binding.CREATION_EVENTS
CONTENT_CHUNK = 5000


@dataclass(frozen=True)
class ContentBinding:
    """Whether a record (and its source episode) still hold what the chain bound."""

    # ok | unbound | mismatch | missing | purged | purged_with_content | revived
    state: str
    event_id: str | None = None
    event_type: str | None = None
    sequence: int | None = None
    reasons: tuple[str, ...] = ()
    # The chain purged this record: whatever the row says, it is not live.
    chain_purged: bool = False

    @property
    def broken(self) -> bool:
        return self.state in ("mismatch", "missing", "purged_with_content", "revived")


def _decoded(metadata: Any) -> dict[str, Any]:
    if isinstance(metadata, str):  # SQLite hands JSON columns back as text
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return {"": metadata}  # unreadable: never equal to what was bound
    return metadata if isinstance(metadata, dict) else {}


_RECORD_COLUMNS = (
    "record_id, scope, status, trust_tier, fact_key, content, metadata, source_type, "
    "episode_id, kind, digest_salt, session_id, turn_id, confidence, created_at, "
    "supersedes_record_id, superseded_by_record_id, evidence"
)
# The model attribute each column is read from on a loaded record (the record page).
_RECORD_ATTRIBUTES = tuple(
    {"supersedes_record_id": "supersedes_id", "superseded_by_record_id": "superseded_by_id"}.get(
        name, name
    )
    for name in (column.strip() for column in _RECORD_COLUMNS.split(","))
)


def _record_row(values: tuple[Any, ...], marker: bool | None) -> binding.RecordRow:
    record_id, scope, status, tier, key, content, metadata, source, episode, kind, salt = values[
        :11
    ]
    session, turn, confidence, created_at, supersedes, superseded_by, evidence = values[11:]
    return binding.RecordRow(
        record_id,
        scope,
        status,
        tier,
        key,
        content,
        _decoded(metadata),
        source,
        episode,
        kind,
        salt,
        session,
        turn,
        confidence,
        marker,
        created_at=created_at,
        supersedes_id=supersedes,
        superseded_by_id=superseded_by,
        evidence=evidence,
    )


def _state(row: binding.RecordRow, view: binding.RecordView | None, reasons: list[str]) -> str:
    if view is None or view.subject_id != row.scope:
        if row.status == Status.TOMBSTONED:
            return "purged_with_content" if reasons else "purged"
        return "missing"
    if view.purged_by is not None and row.status != Status.TOMBSTONED:
        return "revived"
    if row.status == Status.TOMBSTONED:
        return "purged_with_content" if reasons else "purged"
    if reasons:
        return "mismatch"
    return "ok" if "content_sha256" in (view.payload or {}) else "unbound"


def _record_events(record: Record) -> list[tuple[Any, ...]]:
    """The events of the record's chain that decide what it should be, in order.

    Its own events (record_id column) and those that list it (supersessions,
    consolidations, purges, indexed by RecordAuditLink); and, so that a deleted
    index row cannot hide a purge, every purge event of its scope that names it.
    Consolidations are read the same way: their index rows name only the
    records they retired, yet they set the keeper's ``supersedes`` link.
    """
    linked = RecordAuditLink.objects.filter(record_id=record.record_id).values("event_sequence")
    named = AuditEvent.objects.filter(subject_id=record.scope).filter(
        Q(record_id=record.record_id)
        | Q(sequence__in=linked)
        | Q(
            event_type__in=(*binding.PURGE_EVENTS, "memory.consolidated"),
            payload__contains=f'"{record.record_id}"',
        )
    )
    return list(
        named.filter(event_type__in=binding.STATE_EVENTS)
        .order_by("sequence")
        .values_list(
            "sequence",
            "subject_id",
            "event_type",
            "record_id",
            "payload",
            "event_id",
            "session_id",
            "turn_id",
        )
    )


def _episode_event(record: Record, before: int) -> tuple[int, str, str, None, str] | None:
    """The ``episode.ingested`` event of the record's source episode.

    remember appends it, then the record's creation event, under the scope's
    lock: it is the scope's last ingest event before the creation event.
    """
    row = (
        AuditEvent.objects.filter(
            subject_id=record.scope, event_type=binding.INGEST_EVENT, sequence__lt=before
        )
        .order_by("-sequence")
        .values_list("sequence", "subject_id", "event_type", "payload")
        .first()
    )
    return None if row is None else (row[0], row[1], row[2], None, row[3])


def _replayed(events: list[tuple[Any, ...]]) -> binding.ChainReplay:
    replay = binding.ChainReplay(keep_payloads=True)
    for event in events:
        replay.feed(*event[:5])
    return replay


def content_binding(record: Record) -> ContentBinding:
    """Whether one record (and its source episode) agree with its scope's chain.

    For the record page and ``memory inspect``: the same rules as the
    verifier (:func:`content_failures`), read through the record's indexes.
    """
    events = _record_events(record)
    view = _replayed(events).records.get(record.record_id)
    episode = record.episode if record.episode_id else None
    if view is not None and episode is not None:
        ingest = _episode_event(record, view.sequence)
        if ingest is not None:  # replayed in order, so a purge after it is seen
            events = sorted([*events, (*ingest, "", None, None)])
    replay = _replayed(events)
    view = replay.records.get(record.record_id)
    creation = next((e for e in events if view and e[0] == view.sequence), None)
    if view is not None and creation is not None:
        view.payload = binding.bound_fields(creation[4], creation[6], creation[7])
    marker = RecordAuditLink.objects.filter(
        record_id=record.record_id, event_type__in=binding.PURGE_EVENTS
    ).values_list("event_sequence", flat=True)
    has_marker = None
    if view is not None and view.purged_by is not None:
        has_marker = view.purged_by[1] in set(marker)
    row = _record_row(tuple(getattr(record, name) for name in _RECORD_ATTRIBUTES), has_marker)
    reasons = binding.record_reasons(row, view)
    if episode is not None:
        reasons += binding.episode_reasons(
            episode.episode_id,
            episode.scope,
            episode.text,
            episode.purged_at is not None,
            episode.digest_salt,
            replay.episodes.get(episode.episode_id),
        )
    state = _state(row, view, reasons)
    return ContentBinding(
        state,
        creation[5] if creation else None,
        view.event_type if view else None,
        view.sequence if view else None,
        tuple(reasons),
        chain_purged=view is not None and view.purged_by is not None,
    )


def _replay(scope: str | None) -> binding.ChainReplay:
    """Every state event of ``scope``'s chain (``None``: of every chain), in order."""
    replay = binding.ChainReplay()
    events = AuditEvent.objects.filter(event_type__in=binding.STATE_EVENTS)
    if scope is not None:
        events = events.filter(subject_id=scope)
    rows = events.order_by("sequence").values_list(
        "sequence", "subject_id", "event_type", "record_id", "payload"
    )
    for row in rows.iterator(chunk_size=CONTENT_CHUNK):
        replay.feed(*row)
    return replay


def _fill_payloads(views: list[binding.RecordView] | list[binding.EpisodeView]) -> None:
    """Read the bound fields of these views' creation (or ingest) events, by sequence."""
    wanted = {view.sequence: view for view in views if view.payload is None}
    if not wanted:
        return
    rows = AuditEvent.objects.filter(sequence__in=list(wanted)).values_list(
        "sequence", "payload", "session_id", "turn_id"
    )
    for sequence, payload, session_id, turn_id in rows:
        wanted[sequence].payload = binding.bound_fields(payload, session_id, turn_id)


def _purge_markers(record_ids: list[str]) -> set[tuple[str, int]]:
    if not record_ids:
        return set()
    return set(
        RecordAuditLink.objects.filter(
            record_id__in=record_ids, event_type__in=binding.PURGE_EVENTS
        ).values_list("record_id", "event_sequence")
    )


def _record_failures(
    replay: binding.ChainReplay, scope: str | None
) -> Iterator[tuple[str, int | None, str]]:
    where, params = ("", []) if scope is None else ("AND scope = %s", [scope])
    sql = (
        f"SELECT id, {_RECORD_COLUMNS} FROM {Record._meta.db_table} "  # noqa: S608  (constants)
        f"WHERE id > %s {where} ORDER BY id LIMIT %s"
    )
    last = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, [last, *params, CONTENT_CHUNK])
            rows = cursor.fetchall()
        purged = [
            row[1]
            for row in rows
            if (view := replay.records.get(row[1])) is not None and view.purged_by is not None
        ]
        markers = _purge_markers(purged)
        views = [view for row in rows if (view := replay.records.get(row[1])) is not None]
        _fill_payloads(views)
        for values in rows:
            view = replay.records.get(values[1])
            marker = None
            if view is not None and view.purged_by is not None:
                marker = (values[1], view.purged_by[1]) in markers
            row = _record_row(values[1:], marker)
            for reason in binding.record_reasons(row, view):
                yield row.scope, view.sequence if view else None, reason
            if view is not None:
                view.payload = None  # judged: memory stays one small view per record
        if len(rows) < CONTENT_CHUNK:
            return
        last = rows[-1][0]


def _episode_failures(
    replay: binding.ChainReplay, scope: str | None
) -> Iterator[tuple[str, int | None, str]]:
    episodes = Episode.objects.all() if scope is None else Episode.objects.filter(scope=scope)
    last = 0
    while True:
        rows = list(
            episodes.filter(pk__gt=last)
            .order_by("pk")
            .values_list("pk", "episode_id", "scope", "text", "purged_at", "digest_salt")[
                :CONTENT_CHUNK
            ]
        )
        _fill_payloads([view for row in rows if (view := replay.episodes.get(row[1])) is not None])
        for _, episode_id, scope_name, text, purged_at, salt in rows:
            view = replay.episodes.get(episode_id)
            for reason in binding.episode_reasons(
                episode_id, scope_name, text, purged_at is not None, salt, view
            ):
                yield scope_name, view.sequence if view else None, reason
            if view is not None:
                view.payload = None
        if len(rows) < CONTENT_CHUNK:
            return
        last = rows[-1][0]


def content_failures(subjects: list[str] | None) -> Iterator[tuple[str, int | None, str]]:
    """Every record or episode at ``subjects`` (``None``: every scope) that disagrees with
    its chain, for the verifier: bound content, metadata, fact key and message text;
    status and trust tier as the chain's events leave them; purged rows kept purged.

    The chain's state events are replayed once per scope (or once for all);
    rows are read in keyset chunks.
    """
    scopes: list[str | None] = [None] if subjects is None else list(subjects)
    for scope in scopes:
        replay = _replay(scope)
        yield from _record_failures(replay, scope)
        yield from _episode_failures(replay, scope)


SEARCH_COUNT_CAP = 500  # matches counted per scope at most: a count, never a scan of the store
MIN_SEARCH_CHARS = 2


@dataclass(frozen=True)
class MemorySearch:
    """What a dashboard search found: records and source messages the principal may read,
    newest first, and per scope how many records match (counted up to ``SEARCH_COUNT_CAP``)."""

    records: list[Record]
    episodes: list[Episode]
    scope_counts: list[tuple[str, int]]
    counted: int
    capped: bool


def search_memory(
    principal: Principal,
    query: str,
    *,
    status: str | None = None,
    scope: Scope | str | None = None,
    since: datetime | None = None,
    limit: int = 20,
) -> MemorySearch:
    """Records whose content contains ``query`` (case-insensitive), or whose fact key,
    session ID, record ID or source message ID is it (IDs by their start); and source
    messages whose text contains it or whose session ID is it. Only what the principal
    may read (:func:`readable_records_q`, :func:`readable_episodes_q`): a search never
    reveals a row by its count or its hit.

    Bounded: at most ``limit`` rows of each kind, per-scope counts over at most
    ``SEARCH_COUNT_CAP`` matches, newest first by the primary key.
    """
    text = (query or "").strip()
    if len(text) < MIN_SEARCH_CHARS:
        raise QueryError(f"type at least {MIN_SEARCH_CHARS} characters to search")
    limit = _limit(limit)
    status = _choice("status", status, Status.values)
    records = Record.objects.filter(readable_records_q(principal))
    episodes = Episode.objects.filter(readable_episodes_q(principal)).filter(purged_at__isnull=True)
    if scope is not None:
        parsed = access.require(principal, access.READ, scope)
        records = records.filter(**parsed.subtree_filter())
        episodes = episodes.filter(**parsed.subtree_filter())
    if status:
        records = records.filter(status=status)
    if since is not None:
        records = records.filter(created_at__gte=since)
        episodes = episodes.filter(created_at__gte=since)
    lowered = text.lower()
    records = records.filter(
        Q(content__icontains=text)
        | Q(fact_key=lowered)
        | Q(session_id=text)
        | Q(record_id__startswith=lowered)
        | Q(episode__episode_id__startswith=lowered)
    )
    episodes = episodes.filter(
        Q(text__icontains=text) | Q(session_id=text) | Q(episode_id__startswith=lowered)
    )
    capped_ids = records.order_by("-id").values("id")[: SEARCH_COUNT_CAP + 1]
    counts = list(
        Record.objects.filter(id__in=capped_ids)
        .values("scope")
        .annotate(n=Count("id"))
        .order_by("-n", "scope")
    )
    counted = sum(row["n"] for row in counts)
    return MemorySearch(
        records=list(records.order_by("-id")[:limit]),
        episodes=list(episodes.order_by("-id")[:limit]),
        scope_counts=[(row["scope"], row["n"]) for row in counts],
        counted=min(counted, SEARCH_COUNT_CAP),
        capped=counted > SEARCH_COUNT_CAP,
    )


# -- a record's history (issue 33 item 4) -------------------------------------------------

HISTORY_EVENTS = 500  # events across the whole lineage, oldest first
# What each lifecycle event did to the value it names, in a person's words.
HISTORY_VERBS = {
    "memory.record_created": "created",
    "memory.record_quarantined": "proposed",
    "memory.record_promoted": "promoted",
    "memory.record_rejected": "rejected",
    "memory.record_corrected": "corrected",
    "memory.forget": "forgotten",
    "memory.consolidated": "consolidated",
}


@dataclass(frozen=True)
class HistoryEntry:
    """One thing that happened to a value of the record's lineage."""

    event: AuditEvent
    verb: str  # created, proposed, promoted, rejected, corrected, forgotten, consolidated, other
    record: Record  # the value it concerns (shown purged when its chain purged it)
    replaced: Record | None  # the value this one took over from, when it did
    episode: Episode | None  # the source message, for the event that stored the value
    reason: str  # a reviewer's typed reason (for those who may review), or ""
    receipt_event_id: str | None  # a deletion receipt to open, for a forget or a rejection


@dataclass(frozen=True)
class RecordHistory:
    record: Record  # the record the page was opened for
    values: list[Record]  # its lineage, oldest first; the record is one of them
    entries: list[HistoryEntry]  # oldest first
    truncated: bool  # more than HISTORY_EVENTS events: the oldest ones are shown


def _payload(event: AuditEvent) -> dict[str, Any]:
    try:
        payload = json.loads(event.payload)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def record_history(principal: Principal, record_id: str) -> RecordHistory:
    """Every value ``record_id``'s lineage held and what happened to each, oldest first.

    The lineage is what it replaced and what replaced it, as far as the
    principal may read; the events are the audit events naming those values,
    in chains the principal may read. A value its chain purged shows as purged
    (no content, whatever its row says), and a source message only inside a
    granted subtree and never once purged.
    """
    record = _visible_record(principal, record_id)  # out of reach: AccessDenied; unknown: 400
    older = _follow(principal, record.supersedes_id, "supersedes_id")
    newer = _follow(principal, record.superseded_by_id, "superseded_by_id")
    values = [*reversed(older), record, *newer]
    by_id = {value.record_id: value for value in values}
    links = list(
        RecordAuditLink.objects.filter(record_id__in=list(by_id))
        .order_by("event_sequence", "record_id")
        .values_list("event_sequence", "record_id", "event_type")[: HISTORY_EVENTS + 1]
    )
    truncated = len(links) > HISTORY_EVENTS
    links = links[:HISTORY_EVENTS]
    purged = {rid for _, rid, kind in links if kind in binding.PURGE_EVENTS}
    for value in values:
        if value.record_id in purged:
            as_purged(value)
    named: dict[int, list[str]] = {}
    for sequence, rid, _ in links:
        named.setdefault(sequence, []).append(rid)
    events = [
        event
        for event in AuditEvent.objects.filter(sequence__in=list(named)).order_by("sequence")
        if access.may(principal, access.READ, event.subject_id)
    ]
    may_review = {
        scope: access.may(principal, access.REVIEW, scope) for scope in {v.scope for v in values}
    }
    reasons = {
        row.audit_event_id: row.reason
        for row in ReviewReason.objects.filter(record_id__in=list(by_id))
        if row.reason and may_review.get(row.scope, False)
    }
    receipts = set(
        DeletionReceipt.objects.filter(
            audit_event_id__in=[e.event_id for e in events if e.event_type in binding.PURGE_EVENTS]
        ).values_list("audit_event_id", flat=True)
    )
    episode_ids = {v.episode_id for v in values if v.episode_id}
    episodes = {
        episode.episode_id: episode
        for episode in Episode.objects.filter(episode_id__in=episode_ids)
        # Recall never shows a source message, so neither does a lineage read.
        if access.may_act(principal, access.READ, episode.scope)
    }
    entries = []
    for event in events:
        names = named[event.sequence]
        primary = by_id[event.record_id if event.record_id in names else names[0]]
        verb = HISTORY_VERBS.get(event.event_type, "other")
        stores = verb in {"created", "proposed"}
        replaced = (
            by_id.get(primary.supersedes_id or "") if verb in {"created", "promoted"} else None
        )
        if verb == "corrected":
            # The event names the corrected record; the entry shows the value it
            # was corrected to, replacing it (when both are within reach).
            successor = by_id.get(str(_payload(event).get("corrected_by", "")))
            if successor is not None:
                primary, replaced = successor, primary
        entries.append(
            HistoryEntry(
                event=event,
                verb=verb,
                record=primary,
                replaced=replaced,
                episode=episodes.get(primary.episode_id or "") if stores else None,
                reason=reasons.get(event.event_id, ""),
                receipt_event_id=event.event_id if event.event_id in receipts else None,
            )
        )
    return RecordHistory(record=record, values=values, entries=entries, truncated=truncated)
