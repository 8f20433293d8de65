"""Remember: a message becomes an episode and the facts it states; an explicit key/value fact.

``_store_candidate`` is the one place a record is created (remember,
remember_fact, propose_facts and corrections all store through it): the
duplicate check, quarantine of third-party content, supersession of the
slot at this scope, the full-text index and the audit event.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.sql import create_row, pipelined
from aetnaweb.text import storable_text_arguments
from audit.services import lock_subject
from memory import binding, dates, search, vectors
from memory import metadata as record_metadata
from memory.errors import ExtractionError, InvalidInput
from memory.extraction import (
    UNTRUSTED_CONFIDENCE_CAP,
    Candidate,
    SourceReading,
    content_digest,
    explicit_fact,
    extract,
    forced_note,
    read_source,
    same_attribute,
    word_tokens,
)
from memory.inputs import parse_time
from memory.limits import MAX_KIND_CHARS, MAX_TEXT_CHARS
from memory.models import Episode, Record, SourceType, Status, TrustTier
from memory.services._common import (
    _audit,
    _bump,
    _context,
    _Held,
    _new_id,
    _retire,
    _slot_holders,
    _tally,
)
from memory.services.results import RememberResult, StoredRecord


def _visible_duplicates(scope: Scope, digest_value: str, *, trusted: bool) -> list[str]:
    """Records with the same normalised content visible at ``scope`` (indexed by digest)."""
    statuses = [Status.ACTIVE.value]
    if not trusted:
        statuses.append(Status.QUARANTINED.value)
    visible = scope.visible_strings()
    with connection.cursor() as cursor:
        # No ORDER BY here: given one, SQLite without table statistics (none
        # are gathered) walked the (status, id) index backwards over every
        # active record of the database to save sorting, 0.6 ms a remember at
        # 1,500 records and linear beyond. Without it the (scope, digest,
        # status) index answers, and the few rows (a content is not stored
        # twice where it is visible) are sorted here.
        cursor.execute(
            f"SELECT id, record_id FROM {Record._meta.db_table} "  # noqa: S608  (placeholders only)
            f"WHERE scope IN ({', '.join(['%s'] * len(visible))}) AND content_digest = %s "
            f"AND status IN ({', '.join(['%s'] * len(statuses))})",
            [*visible, digest_value, *statuses],
        )
        newest = sorted(cursor.fetchall(), reverse=True)[:5]
    return [record_id for _pk, record_id in newest]


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


def _repeats(scope: Scope, candidate: Candidate, digest_value: str, *, trusted: bool) -> list[str]:
    """The visible records this candidate would repeat (empty: store it)."""
    duplicates = _visible_duplicates(scope, digest_value, trusted=trusted)
    if duplicates and trusted and _corrects_local_slot(scope, candidate.fact_key, digest_value):
        # The same words stored at an ancestor do not make this a repeat: the
        # write scope holds another value of the slot, and dropping the
        # correction would leave that stale value ranked first here.
        return []
    return duplicates


class _Write(NamedTuple):
    """Where and how one candidate is stored: the same for every candidate of one call."""

    scope: Scope
    trusted: bool
    source_type: str
    episode: Episode | None
    session_id: str
    turn_id: str
    actor: str
    now: datetime
    kind: str
    evidence: Sequence[str]
    extra_payload: dict[str, Any]
    metadata: record_metadata.Metadata
    # When the source message was said (None: not stated).
    occurred_at: datetime | None = None
    # A trusted record's tier when it is not the user's own words (user_confirmed).
    tier: str = ""
    # When the records lapse (remember's expires_at; None: kept until forgotten).
    expires_at: datetime | None = None

    @property
    def trust_tier(self) -> str:
        if self.tier:
            return self.tier
        return TrustTier.TRUSTED_USER if self.trusted else TrustTier.UNTRUSTED_CONTENT

    @property
    def episode_id(self) -> str | None:
        return self.episode.episode_id if self.episode else None


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
    metadata: record_metadata.Metadata | None = None,
    occurred_at: datetime | None = None,
    trust_tier: str = "",
    expires_at: datetime | None = None,
) -> tuple[StoredRecord | None, list[str]]:
    """Insert one candidate (or note its duplicate). Returns (stored, duplicate_of).

    Counter changes are added to ``tally``; the caller bumps them once.
    """
    write = _Write(
        scope,
        trusted,
        source_type,
        episode,
        session_id,
        turn_id,
        actor,
        now,
        kind,
        evidence,
        extra_payload or {},
        metadata or {},
        occurred_at,
        trust_tier,
        expires_at,
    )
    digest_value = content_digest(candidate.content)
    duplicates = _repeats(scope, candidate, digest_value, trusted=trusted)
    if duplicates:
        _note_duplicate(write, candidate, duplicates)
        return None, duplicates
    return _create(write, candidate, digest_value, tally), []


def _note_duplicate(write: _Write, candidate: Candidate, duplicates: list[str]) -> None:
    _audit(
        scope=write.scope,
        event_type="memory.duplicate_ignored",
        actor=write.actor,
        payload={
            "episode_id": write.episode_id,
            "duplicate_of": duplicates,
            "source_type": write.source_type,
            "trust_tier": write.trust_tier,
            **write.extra_payload,
        },
        session_id=write.session_id,
        turn_id=write.turn_id,
        mentions=duplicates,
    )


def _create(
    write: _Write, candidate: Candidate, digest_value: str, tally: dict[str, int]
) -> StoredRecord:
    """Store a new record: active (superseding its slot here) if trusted, else quarantined."""
    scope, now = write.scope, write.now
    status = Status.ACTIVE if write.trusted else Status.QUARANTINED
    # Quarantined content never supersedes; an active keyed record replaces the
    # slot's holders at this scope only, and the two point at each other.
    corrected: list[_Held] = []
    if status == Status.ACTIVE and candidate.correction is not None:
        candidate, corrected = _resolve_correction(scope, candidate, write.occurred_at or now)
        digest_value = content_digest(candidate.content)
    older = _slot_holders(scope, candidate.fact_key) if status == Status.ACTIVE else []
    if older and candidate.rule != "explicit":
        older = _same_attribute_holders(candidate, older)
    older += [held for held in corrected if held not in older]
    record = _new_record(
        write, candidate, status, digest_value, older[-1].record_id if older else None
    )
    _tally(tally, {status: 1})
    record_metadata.index_record(record.pk, record.record_id, write.metadata)
    if status == Status.ACTIVE:
        search.index_records([(record.pk, record.record_id, record.scope, record.content)])
    superseded_ids = _retire(scope, older, by=record.record_id, now=now, tally=tally)
    _audit(
        scope=scope,
        event_type="memory.record_created" if write.trusted else "memory.record_quarantined",
        actor=write.actor,
        payload={
            "record_id": record.record_id,
            "episode_id": write.episode_id,
            "source_type": write.source_type,
            "trust_tier": write.trust_tier,
            "status": status,
            "superseded_ids": superseded_ids,
            "rule": candidate.rule,
            # As stored (capped for third-party content): the record page shows it.
            "confidence": record.confidence,
            **write.extra_payload,
            # Its time and the IDs it cites, as stored (memory.binding).
            **binding.lineage_fields(record.created_at, list(write.evidence)),
            # Bind the exact content, fact key and metadata stored, so an edit
            # behind the engine's back shows in verification (memory.binding),
            # salted with the record's own salt so that once a forget destroys
            # it no guess can be tested against these digests. The fact key is
            # a digest too: a slot name ("bank pin") says what was forgotten.
            **binding.bound_digests(
                record.digest_salt,
                content=candidate.content,
                fact_key=candidate.fact_key,
                metadata=write.metadata,
            ),
        },
        session_id=write.session_id,
        turn_id=write.turn_id,
        record_id=record.record_id,
        mentions=superseded_ids,
    )
    return StoredRecord(
        record.record_id,
        status,
        candidate.fact_key,
        candidate.content,
        tuple(superseded_ids),
        dict(write.metadata),
    )


def _literal(text: str, _match: re.Match[str]) -> str:
    return text


def _resolve_correction(
    scope: Scope, candidate: Candidate, said_at: datetime
) -> tuple[Candidate, list[_Held]]:
    """The one record a correction or negation replaces at ``scope``, and what to store instead.

    A negation replaces the records stating exactly what it negates. "X, not
    Y" replaces the newest record holding the word(s) Y (and every word of
    the topic, if one was named), stored again with Y replaced by X, in its
    slot. Nothing found: the candidate is stored as it is and replaces nothing.
    """
    correction = candidate.correction
    assert correction is not None
    active = Record.objects.filter(scope=str(scope), status=Status.ACTIVE)
    if correction.positive:
        rows = active.filter(content_digest=content_digest(correction.positive))
        return candidate, [_Held(r.pk, r.record_id, r.status) for r in rows.order_by("id")]
    needle = correction.wrong or (correction.about[0] if correction.about else "")
    if not needle:
        return candidate, []
    wrong = re.compile(rf"(?<!\w){re.escape(correction.wrong)}(?!\w)", re.IGNORECASE)
    for record in active.filter(content__icontains=needle).order_by("-id")[:50]:
        words = set(word_tokens(record.content))
        if not set(correction.about) <= words:
            continue
        if correction.wrong and not wrong.search(record.content):
            continue
        held = [_Held(record.pk, record.record_id, record.status)]
        if not correction.wrong:
            return candidate, held
        # A function, not a template: the user's words may hold backslashes.
        content = wrong.sub(partial(_literal, correction.right), record.content)
        # The old record's dates were resolved for the old words: resolve the new ones.
        content = dates.resolve(dates.ANNOTATION.sub("", content), said_at)
        return Candidate(content, record.fact_key, candidate.confidence, candidate.rule), held
    return candidate, []


def _same_attribute_holders(candidate: Candidate, older: list[_Held]) -> list[_Held]:
    """The slot's holders that state the same attribute as ``candidate`` (memory-engine.md).

    A stated value replaces only a value of the same attribute ("My son is 7."
    is not replaced by "My son is at school."); an explicit key/value write
    names its slot exactly and replaces every holder (the caller above).
    """
    held = dict(Record.objects.filter(pk__in=[h.pk for h in older]).values_list("pk", "content"))
    return [h for h in older if same_attribute(candidate.content, held.get(h.pk, ""))]


def _new_record(
    write: _Write, candidate: Candidate, status: str, digest_value: str, supersedes_id: str | None
) -> Record:
    confidence = (
        candidate.confidence
        if write.trusted
        else min(candidate.confidence, UNTRUSTED_CONFIDENCE_CAP)
    )
    with connection.cursor() as cursor:  # every remember: no ORM query building
        return create_row(
            cursor,
            Record,
            record_id=_new_id("mem"),
            supersedes_id=supersedes_id,
            **write.scope.columns(),
            scope=str(write.scope),
            episode=write.episode,
            session_id=write.session_id,
            turn_id=write.turn_id,
            source_type=write.source_type,
            trust_tier=write.trust_tier,
            confidence=confidence,
            status=status,
            fact_key=candidate.fact_key,
            kind=write.kind,
            content=candidate.content,
            content_digest=digest_value,
            digest_salt=binding.new_salt(),
            evidence=list(write.evidence),
            metadata=write.metadata,
            occurred_at=write.occurred_at,
            expires_at=write.expires_at,
            created_at=write.now,
            updated_at=write.now,
        )


def check_expires_at(value: Any) -> datetime | None:
    """Remember's ``expires_at``: an aware time in the future (ISO 8601 with a zone), or None."""
    lapses_at = parse_time(value, "expires_at")
    if lapses_at is not None and lapses_at <= timezone.now():
        raise InvalidInput(
            "expires_at is not in the future: the record would lapse before it is stored",
            field="expires_at",
        )
    return lapses_at


def dated(candidates: Sequence[Candidate], said_at: datetime) -> list[Candidate]:
    """Each candidate with its relative dates resolved against when it was said (memory.dates)."""
    return [replace(c, content=dates.resolve(c.content, said_at)) for c in candidates]


def _check_text(text: Any, what: str = "text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise ExtractionError(f"the {what} is empty: there is nothing to remember")
    if len(text) > MAX_TEXT_CHARS:
        raise ExtractionError(f"the {what} is longer than {MAX_TEXT_CHARS} characters")
    return text


def _candidates(text: str, reading: SourceReading, *, force: bool) -> list[Candidate]:
    """The facts a message states; with ``force``, the whole message as one note if none."""
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
    return candidates


def _ingest(
    scope: Scope,
    text: str,
    reading: SourceReading,
    *,
    session: str,
    turn: str,
    actor: str,
    trust_tier: str,
    now: datetime,
    occurred_at: datetime | None = None,
    speaker: str = "",
    role: str = "",
) -> Episode:
    """Keep the message as an episode and chain its digest (``episode.ingested``)."""
    salt = binding.new_salt()
    with connection.cursor() as cursor:  # every remember: no ORM query building
        episode = create_row(
            cursor,
            Episode,
            episode_id=_new_id("ep"),
            scope=str(scope),
            **scope.columns(),
            session_id=session,
            turn_id=turn,
            source_type=reading.source_type,
            text=text,
            digest_salt=salt,
            speaker=speaker,
            role=role,
            occurred_at=occurred_at,
            created_at=now,
        )
    _audit(
        scope=scope,
        event_type="episode.ingested",
        actor=actor,
        payload={
            "episode_id": episode.episode_id,
            # Salted with the episode's own salt, cleared when its text is purged.
            **binding.message_digests(salt, text),
            "source_type": reading.source_type,
            "trust_tier": trust_tier,
            "chars": len(text),
            # The role only: a speaker's name is personal data, kept off the chain.
            **({"role": role} if role else {}),
        },
        session_id=session,
        turn_id=turn,
    )
    return episode


@storable_text_arguments
def remember(
    *,
    scope: Scope | str,
    text: str,
    session_id: str | None = None,
    turn_id: str | None = None,
    source_type: str | None = None,
    force: bool = False,
    metadata: dict[str, Any] | None = None,
    occurred_at: datetime | str | None = None,
    expires_at: datetime | str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> RememberResult:
    """Store a message as an episode and the facts it states at exactly ``scope``.

    Trusted user text lands active (superseding the same slot at this scope);
    webpage and tool content lands quarantined; duplicates are not stored twice.
    Every record stored gets ``metadata`` (a duplicate keeps its own).
    ``occurred_at`` (aware, or ISO 8601 with a zone) is when the message was
    said, for backfilling old conversations; it is kept on the episode and records.
    ``expires_at`` (aware, in the future) is when the records lapse: recall
    skips them from then on and the retention run purges them with their lineage.
    """
    parsed = access.require(principal, access.WRITE, scope)
    text = _check_text(text)
    said_at = parse_time(occurred_at, "occurred_at")
    lapses_at = check_expires_at(expires_at)
    checked_metadata = record_metadata.check_metadata(metadata)
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    reading = read_source(text, source_type)
    candidates = dated(_candidates(text, reading, force=force), said_at or timezone.now())
    actor_label = access.audit_actor(principal, actor, default="user")
    # Everything above only reads. The facts that may become active are
    # embedded ahead: the model's milliseconds must not be spent holding the
    # write lock (before BEGIN on SQLite; on PostgreSQL while the episode and
    # its audit event are written, see vectors.prepared). Their vectors are
    # still written inside, with their records (quarantined facts get no
    # vector, so none is computed). On PostgreSQL the writes whose answers
    # are not read go pipelined (aetnaweb.sql.pipelined).
    with (
        vectors.prepared(
            [c.content for c in candidates] if reading.trusted else [], alongside=True
        ),
        transaction.atomic(),
        pipelined(),
    ):
        return _remember_in_transaction(
            parsed,
            text,
            reading,
            candidates,
            session=session,
            turn=turn,
            actor_label=actor_label,
            metadata=checked_metadata,
            occurred_at=said_at,
            expires_at=lapses_at,
        )


def _remember_in_transaction(
    parsed: Scope,
    text: str,
    reading: SourceReading,
    candidates: list[Candidate],
    *,
    session: str,
    turn: str,
    actor_label: str,
    metadata: record_metadata.Metadata,
    occurred_at: datetime | None = None,
    expires_at: datetime | None = None,
) -> RememberResult:
    trust_tier = TrustTier.TRUSTED_USER if reading.trusted else TrustTier.UNTRUSTED_CONTENT
    lock_subject(str(parsed))
    now = timezone.now()
    episode = _ingest(
        parsed,
        text,
        reading,
        session=session,
        turn=turn,
        actor=actor_label,
        trust_tier=trust_tier,
        now=now,
        occurred_at=occurred_at,
    )
    tally: dict[str, int] = {"episodes": 1}
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
            metadata=metadata,
            occurred_at=occurred_at,
            expires_at=expires_at,
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
def remember_fact(
    *,
    scope: Scope | str,
    key: str,
    value: str,
    kind: str | None = None,
    session_id: str | None = None,
    turn_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    expires_at: datetime | str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> RememberResult:
    """Store an explicit key/value fact as a trusted active record with ``fact_key`` = key.

    It supersedes the same slot at this scope, like "my <key> is <value>" does.
    """
    parsed = access.require(principal, access.WRITE, scope)
    candidate = explicit_fact(key, value)
    checked_metadata = record_metadata.check_metadata(metadata)
    lapses_at = check_expires_at(expires_at)
    kind_label = kind or ""
    if not isinstance(kind_label, str) or len(kind_label) > MAX_KIND_CHARS:
        raise InvalidInput(
            f"a fact kind must be text of at most {MAX_KIND_CHARS} characters", field="kind"
        )
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    # Embedded ahead, as in remember.
    with vectors.prepared([candidate.content], alongside=True), transaction.atomic(), pipelined():
        return _remember_fact_in_transaction(
            parsed,
            candidate,
            kind_label,
            session=session,
            turn=turn,
            principal=principal,
            actor=actor,
            metadata=checked_metadata,
            expires_at=lapses_at,
        )


def _remember_fact_in_transaction(
    parsed: Scope,
    candidate: Candidate,
    kind_label: str,
    *,
    session: str,
    turn: str,
    principal: Principal,
    actor: str | None,
    metadata: record_metadata.Metadata,
    expires_at: datetime | None = None,
) -> RememberResult:
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
        metadata=metadata,
        expires_at=expires_at,
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
