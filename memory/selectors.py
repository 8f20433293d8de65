"""Every read of memory the outside uses, with visibility built in.

A selector never returns a row the principal may not see: scoped reads first
check the scope with :func:`aetnaweb.access.require` (``AccessDenied`` when out
of reach; views answer 404), and cross-scope lists filter with
:func:`aetnaweb.access.scope_q`. Lists are paginated by key (the integer
``id``, newest first unless noted), bounded, and served by an index; counts
come from the per-scope counters, never from ``COUNT(*)`` over records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Sum

from aetnaweb import access
from aetnaweb.access import SYSTEM, Principal
from aetnaweb.scopes import WILDCARD, Scope
from audit.models import AuditEvent, AuditSubject
from audit.verification import verify_subject
from memory import metadata as record_metadata
from memory.errors import QueryError, RecordNotFound
from memory.limits import MAX_PAGE
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
    after: Any = None,
    limit: int = 50,
) -> Page:
    """Records stored at ``scope`` (or its subtree), newest first, filtered.

    ``text`` is a case-insensitive substring of the content; ``metadata`` keeps
    records holding every one of those keys with exactly that typed value.
    """
    parsed = access.require(principal, access.READ, scope)
    wanted = record_metadata.check_filter(metadata)
    queryset = Record.objects.all()
    if include_descendants:
        queryset = queryset.filter(**parsed.subtree_filter()).filter(
            access.scope_q(principal, access.READ)
        )
    else:
        queryset = queryset.filter(scope=str(parsed))
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
    return _page(queryset, _cursor(after), _limit(limit), newest_first=True)


def review_queue(
    principal: Principal,
    *,
    scope: Scope | str | None = None,
    after: Any = None,
    limit: int = 50,
) -> Page:
    """Quarantined records across every scope the principal may review, oldest first.

    Each item has its source episode loaded (``record.episode``; its text
    unless purged). ``scope`` narrows to that subtree.
    """
    queryset = Record.objects.filter(status=Status.QUARANTINED).filter(
        access.scope_q(principal, access.REVIEW)
    )
    if scope is not None:
        parsed = access.require(principal, access.REVIEW, scope)
        queryset = queryset.filter(**parsed.subtree_filter())
    elif not access.has_capability_anywhere(principal, access.REVIEW):
        raise access.AccessDenied(f"{principal.label} may not review anywhere")
    return _page(
        queryset.select_related("episode"), _cursor(after), _limit(limit), newest_first=False
    )


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


def _visible_record(principal: Principal, record_id: str) -> Record:
    record = (
        Record.objects.filter(access.scope_q(principal, access.READ))
        .filter(record_id=record_id)
        .select_related("episode")
        .first()
    )
    if record is not None:
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
            Record.objects.filter(access.scope_q(principal, access.READ))
            .filter(record_id=current)
            .first()
        )
        if record is None:
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
        episode=record.episode if access.may(principal, access.READ, record.scope) else None,
        audit_events=events,
        recalls=hits,
    )


def get_episode(principal: Principal, episode_id: str) -> Episode:
    episode = (
        Episode.objects.filter(access.scope_q(principal, access.READ))
        .filter(episode_id=episode_id)
        .first()
    )
    if episode is not None:
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
        for record in Record.objects.filter(access.scope_q(principal, access.READ)).filter(
            record_id__in=ids
        )
        if access.may(principal, access.READ, record.scope)
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
    rows = Record.objects.filter(access.scope_q(principal, access.READ))
    rows = (
        rows.filter(record_id=prefix)
        if len(prefix) == 36
        else rows.filter(record_id__startswith=prefix)
    )
    found = rows.order_by("record_id")[:limit]
    return [row for row in found if access.may(principal, access.READ, row.scope)]


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
    row = (
        DeletionReceipt.objects.filter(access.scope_q(principal, access.READ))
        .filter(audit_event_id=audit_event_id)
        .first()
    )
    if row is None:
        if DeletionReceipt.objects.filter(audit_event_id=audit_event_id).exists():
            raise access.AccessDenied(f"{principal.label} may not read that receipt")
        raise RecordNotFound(f"no deletion receipt for event {audit_event_id}")
    return dict(row.receipt)


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
    "chain_length",
    "chain_status",
    "count_scopes_with_memory",
    "counts_by_tenant",
    "effective_recall_scopes",
    "get_episode",
    "get_receipt",
    "get_retrieval",
    "inspect",
    "list_receipts",
    "list_records",
    "quarantined_awaiting",
    "quarantined_for_review",
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


# A record's content is bound by the event that created it: its payload's
# content_sha256 is the SHA-256 of the exact content stored (audit-log-v1
# allows the field; the chain protects it). Records written before the binding
# existed have no content_sha256 and are reported as unbound, not as broken.
CREATION_EVENTS = ("memory.record_created", "memory.record_quarantined")
CONTENT_CHUNK = 5000


@dataclass(frozen=True)
class ContentBinding:
    """Whether a record still holds what its creation event bound."""

    state: str  # ok | unbound | mismatch | missing | purged | purged_with_content
    event_id: str | None = None
    event_type: str | None = None
    sequence: int | None = None

    @property
    def broken(self) -> bool:
        return self.state in ("mismatch", "missing", "purged_with_content")


def _judge_content(status: str, content: str, payload_text: str | None) -> str:
    if status == Status.TOMBSTONED:
        return "purged_with_content" if content else "purged"
    if payload_text is None:
        return "missing"
    try:
        bound = json.loads(payload_text).get("content_sha256")
    except (ValueError, AttributeError):
        bound = None
    if not isinstance(bound, str):
        return "unbound"
    try:
        actual = hashlib.sha256(content.encode("utf-8")).hexdigest()
    except UnicodeEncodeError:  # a lone surrogate cannot have been what was bound
        return "mismatch"
    return "ok" if actual == bound else "mismatch"


def content_failure(record_id: str, state: str, event_type: str | None) -> str | None:
    """The verifier's words for a broken binding (shared with tools/verify_audit.py)."""
    if state == "mismatch":
        return (
            f"record {record_id} content does not match the content_sha256 its "
            f"{event_type} event binds"
        )
    if state == "missing":
        return (
            f"record {record_id} has no {' or '.join(CREATION_EVENTS)} event in its scope's chain"
        )
    if state == "purged_with_content":
        return f"record {record_id} is tombstoned but still holds content"
    return None


def content_binding(record: Record) -> ContentBinding:
    """The binding of one record (its creation event found through the record index)."""
    event = (
        AuditEvent.objects.filter(
            record_id=record.record_id, subject_id=record.scope, event_type__in=CREATION_EVENTS
        )
        .order_by("sequence")
        .values_list("event_id", "event_type", "sequence", "payload")
        .first()
    )
    if event is None:
        return ContentBinding(_judge_content(record.status, record.content, None))
    event_id, event_type, sequence, payload = event
    return ContentBinding(
        _judge_content(record.status, record.content, payload), event_id, event_type, sequence
    )


_CONTENT_SQL = (
    "SELECT r.id, r.record_id, r.scope, r.status, r.content, a.sequence, a.event_type, a.payload"  # noqa: S608  (model metadata only)
    f" FROM {Record._meta.db_table} r LEFT JOIN audit_log a ON a.sequence = ("
    # the first creation event only: one row per record, whatever was appended later
    "SELECT MIN(c.sequence) FROM audit_log c WHERE c.record_id = r.record_id"
    " AND c.subject_id = r.scope AND c.event_type IN (%s, %s))"
    " WHERE r.id > %s {where} ORDER BY r.id LIMIT %s"
)


def content_failures(subjects: list[str] | None) -> Iterator[tuple[str, int | None, str]]:
    """Every broken content binding at ``subjects`` (``None``: every scope), for the verifier.

    Read in keyset chunks of records, so memory stays flat however many there are.
    """
    scopes: list[str | None] = [None] if subjects is None else list(subjects)
    for scope in scopes:
        where, params = ("", []) if scope is None else ("AND r.scope = %s", [scope])
        sql = _CONTENT_SQL.format(where=where)
        last = 0
        while True:
            with connection.cursor() as cursor:
                cursor.execute(sql, [*CREATION_EVENTS, last, *params, CONTENT_CHUNK])
                rows = cursor.fetchall()
            for _, record_id, scope_name, status, content, sequence, event_type, payload in rows:
                state = _judge_content(status, content, payload)
                reason = content_failure(record_id, state, event_type)
                if reason:
                    yield scope_name, sequence, reason
            if len(rows) < CONTENT_CHUNK:
                break
            last = rows[-1][0]
