"""Recall: score what ``scope`` may see, log the retrieval, return the best (or a prompt block).

Gathering candidates reads the full-text and vector indexes and the
records table here; the arithmetic is :mod:`memory.services.scoring`.

Reads before the write lock: a recall gathers and scores its candidates
(the query embedding, the index queries) outside any transaction, and opens
one only to append its audit event and retrieval log. On SQLite a write
transaction holds the database's single write lock from BEGIN IMMEDIATE to
COMMIT, so scoring inside it made every concurrent recall and remember queue
behind the ~15-40 ms of reading; now the lock is held for the few INSERTs.
Inside the transaction the candidates are checked once more: if one stopped
being active meanwhile (forgotten, superseded, rejected), the recall scores
again under the lock, so what it answers and logs never includes a record a
committed forget already removed (see :func:`_still_current`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.sql import create_row, insert_rows, pipelined
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.models import AuditEvent
from memory import metadata as record_metadata
from memory import ranking, search, vectors
from memory.binding import PURGE_EVENTS
from memory.errors import InvalidInput
from memory.limits import MAX_BLOCK_CHARS, MAX_QUERY_CHARS, MAX_RECALL_LIMIT
from memory.models import Episode, Record, RecordAuditLink, RetrievalEvent, RetrievalHit, Status
from memory.services import scoring
from memory.services._common import _audit, _check_limit, _context, _new_id
from memory.services.results import RecallBlock, RecallCandidate, RecallResult

# recall_block's score floor. Trust and recency now multiply relevance, so
# alone they score 0 and cannot inject; what decides injection is the match
# confidence (ranking.DEFAULT_MIN_CONFIDENCE), the same threshold as recall's.
RECALL_BLOCK_MIN_SCORE = 0.0


def _check_query(query: Any) -> str:
    if not isinstance(query, str):
        raise InvalidInput("a recall query must be text", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(
            f"a recall query may be at most {MAX_QUERY_CHARS} characters", field="query"
        )
    return query


def _check_min_score(value: Any, field: str = "min_score") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidInput(f"{field} must be a number from 0 to 1", field=field)
    return float(value)


class _CandidateRow(NamedTuple):
    pk: int
    record_id: str
    scope: str
    content: str
    fact_key: str
    trust_tier: str
    status: str
    session_id: str
    turn: int | None  # the source message's key: its place in the conversation
    created_at: Any
    occurred_at: Any
    metadata: dict[str, Any]


# The candidates' columns, in _CandidateRow's order ("id" is the pk), and
# whether the record carries a purge marker: the RecordAuditLink row a forget
# or reject writes in the same transaction as its event. A record the chain
# purged is never recalled, even if someone set its row back to active with
# its content (issue 29 item 7); the verifiers check every marker against the
# chain. One index probe per candidate (mem_link_record), no extra statement.
# ``turn`` is the source episode's key, by its unique episode_id (one more
# index probe): consecutive turns of an imported conversation have
# consecutive keys, which the ranking's conversation context reads.
_CANDIDATE_COLUMNS = ", ".join(
    f"(SELECT e.id FROM {Episode._meta.db_table} e WHERE e.episode_id = r.episode_id)"  # noqa: S608  (constants)
    if name == "turn"
    else "r." + name
    for name in _CandidateRow._fields[1:]
)
_CANDIDATE_SQL = (
    f"SELECT r.id, {_CANDIDATE_COLUMNS}, "  # noqa: S608  (constants)
    f"EXISTS (SELECT 1 FROM {RecordAuditLink._meta.db_table} l WHERE l.record_id = r.record_id "
    f"AND l.event_type IN ({', '.join(repr(t) for t in PURGE_EVENTS)})) "
    f"FROM {Record._meta.db_table} r WHERE r.id IN ({{marks}}) "
    # A record whose own expires_at passed is never recalled, even before the
    # retention run purges it (memory.services.retention).
    "AND (r.expires_at IS NULL OR r.expires_at > %s)"
)


def _candidate_rows(pks: list[int]) -> dict[int, _CandidateRow]:
    """The candidates' rows by pk, less any a purge marker names: plain tuples from a raw
    query (recall is the hot path).

    The metadata column is decoded by its own field, as the ORM would.
    """
    field: Any = Record._meta.get_field("metadata")
    with connection.cursor() as cursor:
        cursor.execute(
            _CANDIDATE_SQL.format(marks=", ".join(["%s"] * len(pks))),
            [*pks, connection.ops.adapt_datetimefield_value(timezone.now())],
        )
        return {
            row[0]: _CandidateRow._make(
                (
                    *row[:-4],
                    _aware(row[-4]),
                    _aware(row[-3]),
                    field.from_db_value(row[-2], None, connection),
                )
            )
            for row in cursor.fetchall()
            if not row[-1]
        }


def _aware(value: Any) -> datetime | None:
    """A raw datetime column as an aware datetime (SQLite gives naive UTC, or text)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _score_candidates(
    scope: Scope,
    query: str,
    limit: int,
    min_score: float,
    wanted: Mapping[str, Any] | None = None,
    min_confidence: float = ranking.DEFAULT_MIN_CONFIDENCE,
) -> list[RecallCandidate]:
    terms = search.query_terms(query)
    rows, evidence = _gather(scope, query, terms, wanted or {})
    ranked = scoring.rank(evidence)
    return [
        RecallCandidate(
            record_id=rows[item.scored.pk].record_id,
            scope=rows[item.scored.pk].scope,
            content=rows[item.scored.pk].content,
            fact_key=rows[item.scored.pk].fact_key,
            trust_tier=rows[item.scored.pk].trust_tier,
            score=item.scored.score,
            confidence=item.scored.confidence,
            parts=item.scored.parts,
            rank=item.rank,
            above_threshold=item.above_threshold,
            returned=item.returned,
            metadata=rows[item.scored.pk].metadata or {},
            created_at=rows[item.scored.pk].created_at,
            occurred_at=rows[item.scored.pk].occurred_at,
        )
        for item in scoring.place(
            ranked, limit=limit, min_score=min_score, min_confidence=min_confidence
        )
    ]


def _gather(
    scope: Scope, query: str, terms: Sequence[str], wanted: Mapping[str, Any]
) -> tuple[dict[int, _CandidateRow], list[scoring.Evidence]]:
    """Ask both indexes for candidates; keep the active ones this scope can see, with their evidence.

    A metadata filter (``wanted``) runs inside both index queries.
    """
    visible = scope.visible_strings()
    lexical = search.lexical_matches(
        visible_scopes=visible, terms=terms, limit=scoring.CANDIDATE_LIMIT, metadata=wanted
    )
    hits = {hit.pk: hit for hit in lexical.hits}
    weights = ranking.bm25_weights(lexical.postings, lexical.visible)
    average_length = (
        sum(hit.length for hit in lexical.hits) / len(lexical.hits) if lexical.hits else 1.0
    )
    # Semantic candidates beside the full-text ones (empty when the model or
    # the vector index is unavailable: recall is then exactly lexical), and
    # the cosine of every full-text candidate. A query of stop words only
    # means nothing, by words or by meaning.
    neighbours, similarities = (
        vectors.neighbours(
            visible_scopes=visible,
            query=query,
            limit=scoring.SEMANTIC_CANDIDATES,
            metadata=wanted,
            also=list(hits),
        )
        if terms
        else ([], {})
    )
    near = {
        hit.pk: hit
        for hit in neighbours
        if ranking.semantic_part(hit.similarity) > 0 or hit.pk in hits
    }
    if not hits and not near:
        return {}, []
    rows = _candidate_rows([*hits, *near])
    # Segment-wise re-check of what the database returned (scopes.md): a row
    # outside the lineage is dropped. The exact IN makes this unreachable.
    scope_weights: dict[str, float] = {}
    for name in {row.scope for row in rows.values()}:
        scope_weights[name] = scope.weight(Scope.parse(name))
    evidence = []
    for pk in dict.fromkeys([*hits, *near]):
        record = rows.get(pk)
        expected_id = hits[pk].record_id if pk in hits else near[pk].record_id
        if record is None or record.record_id != expected_id or record.status != Status.ACTIVE:
            continue
        if not scope_weights[record.scope]:
            continue
        hit, neighbour = hits.get(pk), near.get(pk)
        evidence.append(
            scoring.Evidence(
                pk=pk,
                trust_tier=record.trust_tier,
                weight=scope_weights[record.scope],
                bm25=(
                    ranking.bm25(hit.terms, hit.length, average_length, weights)
                    if hit is not None
                    else None
                ),
                share=ranking.coverage(hit.terms, weights) if hit is not None else 0.0,
                similarity=(
                    neighbour.similarity if neighbour is not None else similarities.get(pk)
                ),
                neighbour=neighbour is not None,
                session=record.session_id,
                turn=record.turn,
            )
        )
    return rows, evidence


def _still_current(
    scope: Scope,
    query: str,
    limit: int,
    min_score: float,
    candidates: list[RecallCandidate],
    wanted: Mapping[str, Any] | None = None,
    min_confidence: float = ranking.DEFAULT_MIN_CONFIDENCE,
) -> list[RecallCandidate]:
    """``candidates``, or a fresh scoring if one of them is no longer active.

    Called inside the write transaction (on SQLite, under the write lock), so
    the check sees every write committed before it: one indexed read in the
    common case, the full scoring again only after a race with a forget,
    supersede or reject. The fresh scoring keeps the metadata filter
    (``wanted``): a record's metadata never changes while it is active (a
    correction is a new record), so checking status is enough for the first.
    """
    record_ids = [c.record_id for c in candidates]
    if not record_ids:
        return candidates
    # Raw SQL: the ORM's query building cost more than these lookups. The
    # status is checked here, not in SQL: given "status = %s" beside the ID
    # list, SQLite without table statistics (none are gathered) reckons the
    # status index the narrower and walks every active record of the
    # database (295 ms a recall at a million records).
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT status FROM {Record._meta.db_table} "  # noqa: S608  (placeholders only)
            f"WHERE record_id IN ({', '.join(['%s'] * len(record_ids))})",
            record_ids,
        )
        active = sum(status == Status.ACTIVE for (status,) in cursor.fetchall())
    if active == len(record_ids):
        return candidates
    return _score_candidates(scope, query, limit, min_score, wanted, min_confidence)


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
    wanted: Mapping[str, Any] | None = None,
) -> tuple[RetrievalEvent, AuditEvent]:
    """Write the retrieval log row, its hits and the ``memory.recall`` event; (the row, the event)."""
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
            # Filter values may be personal data: the chain keeps their digest.
            **(
                {"metadata_filter_sha256": record_metadata.metadata_digest(wanted)}
                if wanted
                else {}
            ),
        },
        session_id=session,
        mentions=returned_ids,
    )
    with connection.cursor() as cursor:
        # Every recall writes this row: inserted without the ORM's query building.
        event = create_row(
            cursor,
            RetrievalEvent,
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
                    "confidence": c.confidence,
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
        # Up to 50 rows per recall, in one INSERT: no ORM work per object, and
        # one round trip on PostgreSQL (executemany cost 2 ms a recall there).
        insert_rows(
            cursor,
            RetrievalHit._meta.db_table,
            ("retrieval_event_id", "record_id", "rank", "score", "returned"),
            [(event.pk, c.record_id, c.rank, c.score, c.returned) for c in candidates],
        )
    return event, audit_event


@storable_text_arguments
def recall(
    *,
    scope: Scope | str,
    query: str,
    limit: int = 5,
    min_score: float = 0.0,
    min_confidence: float = ranking.DEFAULT_MIN_CONFIDENCE,
    session_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    created_at: Mapping[str, Any] | None = None,
    principal: Principal,
    actor: str | None = None,
) -> RecallResult:
    """Top ``limit`` active records visible from ``scope`` (itself and its ancestors), scored.

    Every recall is logged as a retrieval event and a ``memory.recall`` audit event,
    in the chain of ``scope`` itself; so an operator recalls only inside their own
    subtree (an ancestor they may read is reached by recalling from below it).
    ``metadata`` keeps only records holding every one of those typed values or
    meeting those operators, ``created_at`` those stored in that range
    (:func:`memory.metadata.check_filter`); both run inside the candidate queries.
    Only candidates whose match ``confidence`` reaches ``min_confidence``
    return; when none does, the result says so (``abstained``).
    """
    parsed = access.require_act(principal, access.READ, scope)
    query = _check_query(query)
    limit = _check_limit("limit", limit, MAX_RECALL_LIMIT)
    threshold = _check_min_score(min_score)
    confident = _check_min_score(min_confidence, "min_confidence")
    session = _context("session_id", session_id)
    wanted = record_metadata.check_filter(metadata, created_at=created_at)
    actor_label = access.audit_actor(principal, actor, default="agent")
    candidates = _score_candidates(
        parsed, query, limit, threshold, wanted, confident
    )  # no lock held
    with transaction.atomic(), pipelined():
        candidates = _still_current(parsed, query, limit, threshold, candidates, wanted, confident)
        event, audit_event = _log_retrieval(
            scope=parsed,
            query=query,
            limit=limit,
            min_score=threshold,
            session=session,
            actor=actor_label,
            purpose="recall",
            candidates=candidates,
            wanted=wanted,
        )
    return RecallResult(
        str(parsed),
        event.retrieval_id,
        audit_event.event_id,
        tuple(candidates),
        min_confidence=confident,
    )


def _block_line(candidate: RecallCandidate) -> str:
    # Stored content may come from a promoted webpage: angle brackets are
    # escaped so it cannot close the block or open a new one.
    content = " ".join(candidate.content.split()).replace("<", "&lt;").replace(">", "&gt;")
    # When it was said (else stored), so the reader can tell old news from new.
    if candidate.occurred_at:
        content += f" [said {candidate.occurred_at.date().isoformat()}]"
    elif candidate.created_at:
        content += f" [stored {candidate.created_at.date().isoformat()}]"
    return f"- [{candidate.record_id}] {content}"


def _fill_block(
    candidates: list[RecallCandidate], max_chars: int
) -> tuple[str, list[str], list[RecallCandidate]]:
    """The block text, the injected record IDs, and the candidates marked with what was injected."""
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
    marked = [
        RecallCandidate(**{**asdict(c), "returned": c.record_id in injected_set})
        for c in candidates
    ]
    text = header + "".join(lines) + footer if lines else ""
    return text, injected, marked


@storable_text_arguments
def recall_block(
    *,
    scope: Scope | str,
    query: str,
    max_items: int = 5,
    max_chars: int = 2000,
    min_score: float = RECALL_BLOCK_MIN_SCORE,
    min_confidence: float = ranking.DEFAULT_MIN_CONFIDENCE,
    session_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    created_at: Mapping[str, Any] | None = None,
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
    confident = _check_min_score(min_confidence, "min_confidence")
    session = _context("session_id", session_id)
    wanted = record_metadata.check_filter(metadata, created_at=created_at)
    actor_label = access.audit_actor(principal, actor, default="agent")
    candidates = _score_candidates(
        parsed, query, max_items, threshold, wanted, confident
    )  # no lock held
    with transaction.atomic(), pipelined():
        candidates = _still_current(
            parsed, query, max_items, threshold, candidates, wanted, confident
        )
        text, injected, candidates = _fill_block(candidates, max_chars)
        event, _ = _log_retrieval(
            scope=parsed,
            query=query,
            limit=max_items,
            min_score=threshold,
            session=session,
            actor=actor_label,
            purpose="recall_block",
            candidates=candidates,
            wanted=wanted,
        )
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
