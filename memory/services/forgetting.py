"""Forget: preview, then purge records with their whole supersession lineage; deletion receipts.

A forget names records (by words, an utterance or IDs) or stored messages
(episodes, by ID or by session); words match episode text too, so a message
that yielded no record of its own (ignored, or a duplicate of an ancestor's
record) is forgettable like any other stored word.

``_purge`` and ``_keep_receipt`` are also how review's reject purges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from aetnaweb import access, purges
from aetnaweb.access import Principal
from aetnaweb.errors import InvalidInput
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest, sha256_text
from audit.models import AuditEvent
from audit.receipts import DELETION_RECEIPT_FORMAT, build_deletion_receipt, log_proof_for
from audit.services import lock_subject
from memory import metadata as record_metadata
from memory import search
from memory.errors import (
    EpisodeNotFound,
    ForgetNotConfirmed,
    ForgetPreviewStale,
    ForgetSelectionError,
    RecordNotFound,
    RecordStateError,
    SelectorError,
)
from memory.extraction import (
    SAY_WHAT_TO_FORGET,
    Needle,
    selector_needle,
    utterance_needle,
    word_tokens,
)
from memory.limits import MAX_FORGET_RECORDS
from memory.models import (
    DeletionReceipt,
    Episode,
    ForgetBundle,
    Record,
    RetrievalEvent,
    RetrievalHit,
    ReviewReason,
    Status,
)
from memory.services._common import _audit, _bump, _status_deltas
from memory.services.results import ForgetPreview

# A forget that would purge more records than this (lineage included) must
# carry the previewed IDs (expected_record_ids): a broad needle is never
# applied blind.
MAX_UNPREVIEWED_FORGET = 10


# Forget reads a scope's records in chunks of this many to match whole words.
MATCH_CHUNK = 2000


# Statuses a forget can match or name: everything still holding content.
MATCHABLE = (Status.ACTIVE, Status.QUARANTINED, Status.SUPERSEDED)

# Stored messages one forget may name or match (beyond its records' sources).
MAX_FORGET_EPISODES = MAX_FORGET_RECORDS


@dataclass(frozen=True)
class _ForgetRequest:
    mode: str
    selector_sha256: str
    utterance_sha256: str | None
    records: list[Record]
    # What the caller's request matched or named, before the lineage was added.
    matched_ids: tuple[str, ...]
    needle: Needle | None
    # Episodes the request matched or named itself (their text holds the words, or
    # the caller named them or their session), beyond the purged records' sources.
    episodes: tuple[Episode, ...] = ()

    @property
    def episode_ids(self) -> list[str]:
        """Every episode the forget empties: the records' sources and those matched."""
        return sorted(set(_episode_ids(self.records)) | {e.episode_id for e in self.episodes})

    @property
    def matched_episode_ids(self) -> set[str]:
        return {e.episode_id for e in self.episodes}


@dataclass(frozen=True)
class _Ask:
    """The ways to ask for a forget; exactly one is given."""

    selector: str | None = None
    record_ids: Sequence[str] | None = None
    utterance: str | None = None
    episode_ids: Sequence[str] | None = None
    session_id: str | None = None

    def given(self) -> list[str]:
        return [name for name in _ASK_NAMES if getattr(self, name) is not None]

    @property
    def mode(self) -> str:
        given = self.given()
        return given[0] if given else "selector"


# The mode recorded for an ambiguous request is the first of these given.
_ASK_NAMES = ("record_ids", "episode_ids", "session_id", "utterance", "selector")
# The order refusals name them in.
_ASK_ORDER = ("selector", "record_ids", "utterance", "episode_ids", "session_id")


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


def _one_request(ask: _Ask) -> None:
    """Refuse a forget that gives none, or more than one, of its ways to ask."""
    given = [name for name in _ASK_ORDER if getattr(ask, name) is not None]
    if not given:
        raise SelectorError(
            "a forget needs a selector, record IDs, an utterance, episode IDs or a session "
            f"ID; an empty request is never read as 'everything': {SAY_WHAT_TO_FORGET}",
            reason="empty_selector",
        )
    if len(given) > 1:
        raise SelectorError(
            "give exactly one of selector, record_ids, utterance, episode_ids or session_id "
            f"(got {', '.join(given)})",
            reason="ambiguous_request",
        )


def _needle(selector: str | None, utterance: str | None) -> tuple[Needle, str | None]:
    """The words to match, from an utterance or a selector; and the utterance's digest."""
    if utterance is not None:
        if not isinstance(utterance, str):
            raise SelectorError("an utterance must be text", reason="empty_selector")
        utterance_sha256 = sha256_text(utterance)
        try:
            return utterance_needle(utterance), utterance_sha256
        except SelectorError as exc:
            if "embeds third-party" in str(exc):
                raise SelectorError(str(exc), reason="embedded_content") from exc
            raise
    if not isinstance(selector, str):
        raise SelectorError("a selector must be text", reason="empty_selector")
    if not selector.strip():
        raise SelectorError(
            "the selector is empty; an empty selector is never read as 'everything': "
            f"{SAY_WHAT_TO_FORGET}",
            reason="empty_selector",
        )
    return selector_needle(selector), None


def _too_many_episodes(count: int, scope: Scope) -> SelectorError:
    return SelectorError(
        f"the request names or matches {count} stored messages at {scope}, more than "
        f"{MAX_FORGET_EPISODES}; narrow it or forget fewer at a time",
        reason="too_broad",
    )


def _drawn_from(scope: Scope, episodes: Q) -> list[_Match]:
    """Records at ``scope`` still holding content that were drawn from the episodes ``episodes`` selects."""
    rows = (
        Record.objects.filter(scope=str(scope), status__in=MATCHABLE)
        .filter(episodes)
        .order_by("pk")
        .values_list("pk", "record_id", "supersedes_id", "superseded_by_id")
    )
    return [_Match(*row) for row in rows]


def _named_episodes(
    scope: Scope, episode_ids: Sequence[str]
) -> tuple[list[Episode], list[_Match], str]:
    """The episodes a forget by episode ID names at exactly ``scope``, and the records drawn
    from them (a fact is words of its message: forgetting the message forgets it too)."""
    if isinstance(episode_ids, str) or not all(isinstance(i, str) for i in episode_ids):
        raise SelectorError("episode_ids must be a list of episode IDs", reason="bad_episode_ids")
    wanted = list(dict.fromkeys(i.strip() for i in episode_ids if i.strip()))
    if not wanted:
        raise SelectorError(
            f"no episode IDs given: an empty list is never read as 'everything'; "
            f"{SAY_WHAT_TO_FORGET}",
            reason="empty_selector",
        )
    if len(wanted) > MAX_FORGET_EPISODES:
        raise _too_many_episodes(len(wanted), scope)
    found = {
        e.episode_id: e for e in Episode.objects.filter(scope=str(scope), episode_id__in=wanted)
    }
    missing = [i for i in wanted if i not in found]
    if missing:
        raise EpisodeNotFound(
            f"no episode {', '.join(missing)} at scope {scope}: a forget acts on exactly "
            "the scope named"
        )
    drawn = _drawn_from(scope, Q(episode_id__in=wanted))
    # A purged message whose facts are all gone too has nothing left to forget.
    holding = {r.episode_id for r in Record.objects.filter(pk__in=[m.pk for m in drawn])}
    gone = sorted(i for i, e in found.items() if e.is_purged and i not in holding)
    if gone:
        raise RecordStateError(
            f"{', '.join(gone)} {'is' if len(gone) == 1 else 'are'} already purged: "
            "forgotten, text cleared"
        )
    live = [found[i] for i in sorted(found) if not found[i].is_purged]
    return live, drawn, digest(sorted(wanted))


def _session_contents(scope: Scope, session_id: str) -> tuple[list[Episode], list[_Match], str]:
    """Every stored message and record of one session at exactly ``scope`` still holding words."""
    if not isinstance(session_id, str):
        raise SelectorError("a session ID must be text", reason="empty_selector")
    session = session_id.strip()
    if not session:
        raise SelectorError(
            "the session ID is empty; an empty request is never read as 'everything': "
            f"{SAY_WHAT_TO_FORGET}",
            reason="empty_selector",
        )
    episodes = list(
        Episode.objects.filter(
            scope=str(scope), session_id=session, purged_at__isnull=True
        ).order_by("episode_id")[: MAX_FORGET_EPISODES + 1]
    )
    if len(episodes) > MAX_FORGET_EPISODES:
        raise _too_many_episodes(len(episodes), scope)
    # Explicit key/value facts have no episode but carry the session too.
    drawn = _drawn_from(scope, Q(session_id=session) | Q(episode__session_id=session))
    if not episodes and not drawn:
        raise SelectorError(
            f"nothing matched: no stored message or record of session {session!r} at exactly "
            f"{scope} still holds words, so nothing was forgotten",
            reason="nothing_matched",
        )
    return episodes, drawn, sha256_text(session)


def _matching_episodes(scope: Scope, needle: Needle) -> list[Episode]:
    """Stored messages at exactly ``scope`` whose text holds the needle as whole words.

    Read in key order and matched with the same tokeniser as records, so an
    ignored statement or a duplicate of an ancestor's fact (a message with no
    record of its own) is found by the words a user would say.
    """
    matched: list[int] = []
    last = 0
    while True:
        rows = list(
            Episode.objects.filter(scope=str(scope), purged_at__isnull=True, pk__gt=last)
            .exclude(text="")
            .order_by("pk")
            .values_list("pk", "text")[:MATCH_CHUNK]
        )
        matched += [pk for pk, text in rows if needle.matches(text)]
        if len(matched) > MAX_FORGET_EPISODES:
            raise _too_many_episodes(len(matched), scope)
        if len(rows) < MATCH_CHUNK:
            break
        last = rows[-1][0]
    return list(Episode.objects.filter(pk__in=matched).order_by("episode_id")) if matched else []


def _forget_request(scope: Scope, *, ask: _Ask, lock: bool) -> _ForgetRequest:
    _one_request(ask)
    utterance_sha256 = None
    needle: Needle | None = None
    episodes: list[Episode] = []
    if ask.record_ids is not None:
        named, selector_sha256 = _named_records(scope, ask.record_ids)
    elif ask.episode_ids is not None:
        episodes, named, selector_sha256 = _named_episodes(scope, ask.episode_ids)
    elif ask.session_id is not None:
        episodes, named, selector_sha256 = _session_contents(scope, ask.session_id)
    else:
        needle, utterance_sha256 = _needle(ask.selector, ask.utterance)
        named = _matching_records(scope, needle)
        episodes = _matching_episodes(scope, needle)
        selector_sha256 = sha256_text(needle.text)
        if not named and not episodes:
            raise SelectorError(
                f"nothing matched: no record or stored message at exactly {scope} holds the "
                f"words {needle.text!r}, so nothing was forgotten (records at its ancestors "
                "or below it are not touched by a forget here)",
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
    return _ForgetRequest(
        ask.mode,
        selector_sha256,
        utterance_sha256,
        records,
        tuple(r.record_id for r in named),
        needle,
        tuple(episodes),
    )


def _episode_ids(records: Iterable[Record]) -> list[str]:
    return sorted({r.episode_id for r in records if r.episode_id})


def _forget_recall_queries(
    scope: Scope, records: list[Record], needle: Needle | None, texts: Sequence[str] = ()
) -> None:
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
    # The forgotten messages' own words (an episode forgotten by ID or session).
    words.update(word for text in texts for word in word_tokens(text))
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


def _purge(
    scope: Scope, records: list[Record], now: datetime, episode_ids: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Tombstone records, clear their source episodes' text (and ``episode_ids``'); returns
    the purged record and episode IDs.

    Every store keeping a copy of what was purged (the API's kept answers) is
    told inside this transaction (:mod:`aetnaweb.purges`). After the
    transaction commits, the database is asked to drop the freed bytes (see
    :func:`_drop_freed_bytes`).
    """
    if not records and not episode_ids:
        return [], []
    if records:
        _purge_records(scope, records, now)
    purged_episode_ids = sorted(set(_episode_ids(records)) | set(episode_ids))
    emptied: list[str] = []
    if purged_episode_ids:
        # Only messages emptied now are news to copies: one emptied by an earlier
        # forget is named by that forget's receipt, which holds no content.
        emptied = list(
            Episode.objects.filter(
                episode_id__in=purged_episode_ids, purged_at__isnull=True
            ).values_list("episode_id", flat=True)
        )
        # A message's text is cleared even when another fact drawn from it stays
        # active: the text holds the forgotten words too. That fact keeps its own content.
        # One emptied before keeps the time it was emptied.
        Episode.objects.filter(episode_id__in=emptied).update(
            text="", digest_salt="", purged_at=now
        )
    record_ids = [r.record_id for r in records]
    purges.announce(purges.PurgedContent(str(scope), tuple(record_ids), tuple(sorted(emptied))))
    transaction.on_commit(_drop_freed_bytes)
    return record_ids, purged_episode_ids


def _purge_records(scope: Scope, records: list[Record], now: datetime) -> None:
    pks = [r.pk for r in records]
    # Only active records are in the index (supersession and quarantine keep them out).
    search.unindex_records([r.pk for r in records if r.status == Status.ACTIVE])
    Record.objects.filter(pk__in=pks).update(
        status=Status.TOMBSTONED,
        content="",
        fact_key="",
        content_digest="",
        # Without its salt no digest the chain keeps of this record can be
        # recomputed or tested against guesses (memory/binding.py).
        digest_salt="",
        # Metadata may hold personal data (a customer ID, an address): it is
        # purged with the content, index rows included.
        metadata={},
        deleted_at=now,
        updated_at=now,
    )
    record_metadata.purge(pks)
    _bump(scope, **_status_deltas(records, Status.TOMBSTONED))
    # A review reason may quote the content: it goes with it.
    ReviewReason.objects.filter(record_id__in=[r.record_id for r in records]).update(reason="")


# How record and episode IDs appear in an API answer (memory.services._common._new_id).
_ANSWER_IDS = re.compile(rb"\b(?:mem|ep)_[0-9a-f]{32}\b")


def names_in_answer(answer: bytes) -> list[str]:
    """The record and episode IDs an API answer names, sorted (the kept answers' index).

    Registered with :mod:`aetnaweb.purges`: every line of an answer that
    holds content carries its record's or episode's ID, so a purge finds the
    kept answers holding what it purged through these names.
    """
    return sorted({match.decode("ascii") for match in _ANSWER_IDS.findall(answer)})


def purged_in_answer(answer: bytes, since: datetime) -> list[str]:
    """The records and messages an API answer names whose content was purged after ``since``.

    Registered with :mod:`aetnaweb.purges` for the answers kept for
    ``Idempotency-Key`` replays. The named rows are locked (all of them,
    purged or not), so a forget running now either committed
    before this read or waits for the caller's transaction and then finds the
    kept answer. A deletion receipt names what it purged and holds no content:
    it names nothing here.
    """
    named = names_in_answer(answer)
    if not named or _is_deletion_receipt(answer):
        return []
    # In key order, records before episodes, as a forget takes them: two lockers
    # then never wait on each other in a cycle. NO KEY UPDATE: the weakest row
    # lock the ORM offers that a purge's update must wait for.
    records = (
        Record.objects.select_for_update(no_key=True)
        .filter(record_id__in=[i for i in named if i.startswith("mem_")])
        .order_by("pk")
    )
    episodes = (
        Episode.objects.select_for_update(no_key=True)
        .filter(episode_id__in=[i for i in named if i.startswith("ep_")])
        .order_by("pk")
    )
    return sorted(
        [i for i, when in records.values_list("record_id", "deleted_at") if when and when > since]
        + [
            i
            for i, when in episodes.values_list("episode_id", "purged_at")
            if when and when > since
        ]
    )


def _is_deletion_receipt(answer: bytes) -> bool:
    try:
        data = json.loads(answer)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("format") == DELETION_RECEIPT_FORMAT


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


def _preview_rows(
    scope: Scope, records: list[Record], matched: set[str]
) -> tuple[dict[str, Any], ...]:
    groups = _lineage_groups(records)
    return tuple(
        {
            "record_id": r.record_id,
            "scope": str(scope),
            # False: not matched itself, purged as part of a match's lineage.
            "matched": r.record_id in matched,
            # The lineage the record belongs to (its smallest record ID): rows
            # of one lineage are left out of a forget together or not at all.
            "lineage": groups[r.record_id],
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


def _preview_episode_rows(scope: Scope, request: _ForgetRequest) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "episode_id": e.episode_id,
            "scope": str(scope),
            # False: emptied because a record drawn from it is purged.
            "matched": e.episode_id in request.matched_episode_ids,
            "session_id": e.session_id,
            "turn_id": e.turn_id,
            "source_type": e.source_type,
            "text": e.text,
            "created_at": e.created_at.isoformat(),
        }
        for e in Episode.objects.filter(episode_id__in=request.episode_ids).order_by("episode_id")
    )


def _lineage_groups(records: Sequence[Record]) -> dict[str, str]:
    """record ID -> the smallest record ID of its lineage among ``records`` (supersession links)."""
    parent = {r.record_id: r.record_id for r in records}

    def root(record_id: str) -> str:
        while parent[record_id] != record_id:
            parent[record_id] = parent[parent[record_id]]
            record_id = parent[record_id]
        return record_id

    for r in records:
        for link in (r.supersedes_id, r.superseded_by_id):
            if link in parent:
                a, b = sorted((root(r.record_id), root(link)))
                parent[b] = a
    return {record_id: root(record_id) for record_id in parent}


# -- the scopes below the one a forget is asked at ------------------------------------

# Ways to ask that can match below: words. IDs and sessions name rows of the scope itself.
_BELOW_MODES = ("selector", "utterance")


def _below_scopes(scope: Scope, principal: Principal) -> list[Scope]:
    """Scopes strictly below ``scope`` still holding content that ``principal`` may forget at."""
    if scope.depth == 3:
        return []
    where = scope.subtree_filter()
    names = set(
        Record.objects.filter(**where, status__in=MATCHABLE)
        .exclude(scope=str(scope))
        .order_by()
        .values_list("scope", flat=True)
        .distinct()
    ) | set(
        Episode.objects.filter(**where, purged_at__isnull=True)
        .exclude(scope=str(scope))
        .order_by()
        .values_list("scope", flat=True)
        .distinct()
    )
    return [
        Scope.parse(name) for name in sorted(names) if access.may(principal, access.FORGET, name)
    ]


def _requests(
    scope: Scope, ask: _Ask, principal: Principal, *, below: bool, lock: bool
) -> tuple[_ForgetRequest | None, list[tuple[Scope, _ForgetRequest]]]:
    """The request at ``scope`` (``None`` when only scopes below match) and, when ``below``
    is asked for (or to list them), the request at each scope below that matches."""
    try:
        here: _ForgetRequest | None = _forget_request(scope, ask=ask, lock=lock)
        nothing_here: SelectorError | None = None
    except SelectorError as exc:
        if exc.reason != "nothing_matched" or not below:
            raise
        here, nothing_here = None, exc
    found: list[tuple[Scope, _ForgetRequest]] = []
    if below and ask.mode in _BELOW_MODES:
        for lower in _below_scopes(scope, principal):
            try:
                found.append((lower, _forget_request(lower, ask=ask, lock=lock)))
            except SelectorError as exc:
                if exc.reason != "nothing_matched":
                    raise
    if here is None and not found:
        raise SelectorError(
            str(nothing_here).replace(
                "(records at its ancestors or below it are not touched by a forget here)",
                "nor in any scope below it",
            ),
            reason="nothing_matched",
        )
    return here, found


def _combined(parts: Sequence[tuple[Scope, _ForgetRequest]]) -> _ForgetRequest:
    """One request holding every part's rows (IDs are unique across scopes)."""
    first = parts[0][1]
    return _ForgetRequest(
        first.mode,
        first.selector_sha256,
        first.utterance_sha256,
        [r for _, req in parts for r in req.records],
        tuple(i for _, req in parts for i in req.matched_ids),
        first.needle,
        tuple(e for _, req in parts for e in req.episodes),
    )


def _size(records: Sequence[Record], episode_ids: Iterable[str]) -> int:
    """What a forget purges, as the operator counts its rows: records, and the stored
    messages beyond those records' own sources (a source goes with its record)."""
    return len(records) + len(set(episode_ids) - set(_episode_ids(records)))


@storable_text_arguments
@transaction.atomic
def forget_preview(
    *,
    scope: Scope | str,
    selector: str | None = None,
    record_ids: Sequence[str] | None = None,
    utterance: str | None = None,
    episode_ids: Sequence[str] | None = None,
    session_id: str | None = None,
    include_below: bool = False,
    principal: Principal,
) -> ForgetPreview:
    """Exactly the records and stored messages (episodes) a forget with these arguments would purge.

    The matches and their whole lineage, and every episode emptied; each row
    says whether it matched itself. Matches of the same words in the scopes
    below ``scope`` are listed in ``below`` (one entry per scope); with
    ``include_below`` their rows are part of the forget's lists and count too.
    Writes nothing; an empty or vague request, or one that matches nothing,
    raises :class:`SelectorError`.
    """
    parsed = access.require(principal, access.FORGET, scope)
    ask = _Ask(selector, record_ids, utterance, episode_ids, session_id)
    here, below = _requests(parsed, ask, principal, below=True, lock=False)
    if here is None and not include_below:
        raise SelectorError(
            f"nothing matched at exactly {parsed}; the same words match in "
            f"{len(below)} scope{'s' if len(below) != 1 else ''} below it "
            f"({', '.join(str(s) for s, _ in below)}): include the scopes below to forget them",
            reason="nothing_matched",
        )
    parts = ([(parsed, here)] if here is not None else []) + (below if include_below else [])
    request = _combined(parts)
    records: list[dict[str, Any]] = []
    episodes: list[dict[str, Any]] = []
    for part_scope, part in parts:
        records += _preview_rows(part_scope, part.records, set(part.matched_ids))
        episodes += _preview_episode_rows(part_scope, part)
    return ForgetPreview(
        scope=str(parsed),
        mode=request.mode,
        record_ids=tuple(r.record_id for r in request.records),
        episode_ids=tuple(request.episode_ids),
        records=tuple(records),
        episodes=tuple(episodes),
        include_below=include_below,
        below=tuple(
            {
                "scope": str(lower),
                "record_ids": [r.record_id for r in part.records],
                "episode_ids": part.episode_ids,
                "count": _size(part.records, part.episode_ids),
            }
            for lower, part in below
        ),
        count=_size(request.records, request.episode_ids),
        confirm_above=MAX_UNCONFIRMED_FORGET,
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


# A reference names the request in the operator's own system (a ticket number).
MAX_FORGET_REFERENCE_CHARS = 200

# Above this many records and messages, a forget needs its count typed back (confirm_count).
MAX_UNCONFIRMED_FORGET = 10


def _clean_forget_reference(reference: Any) -> str:
    """The request's reference, stripped; ``""`` when none. One line of printable text."""
    if reference is None:
        return ""
    if not isinstance(reference, str):
        raise InvalidInput("the reference must be text (a ticket number)", field="reference")
    cleaned = reference.strip()
    if len(cleaned) > MAX_FORGET_REFERENCE_CHARS or not cleaned.isprintable():
        raise InvalidInput(
            f"the reference must be one line of at most {MAX_FORGET_REFERENCE_CHARS} printable "
            "characters (a ticket number, e.g. REQ-2041)",
            field="reference",
        )
    return cleaned


def check_confirm_count(count: int, confirm_count: Any) -> None:
    """Refuse a forget above ``MAX_UNCONFIRMED_FORGET`` whose count was not typed back, and
    any forget whose typed count is wrong: the one rule every surface applies."""
    if confirm_count is not None and (
        isinstance(confirm_count, bool) or not isinstance(confirm_count, int)
    ):
        raise ForgetNotConfirmed("confirm_count must be a whole number: the count to confirm")
    noun = (
        f"{count} record{'s' if count != 1 else ''} and stored message{'s' if count != 1 else ''}"
    )
    if confirm_count is None:
        if count > MAX_UNCONFIRMED_FORGET:
            raise ForgetNotConfirmed(
                f"this forget purges {noun}, more than {MAX_UNCONFIRMED_FORGET}: type the "
                f"count ({count}) as confirm_count to confirm; nothing was forgotten"
            )
        return
    if confirm_count != count:
        raise ForgetNotConfirmed(
            f"the count typed ({confirm_count}) is not the number this forget purges "
            f"({noun}); nothing was forgotten: check the rows and type {count}"
        )


@storable_text_arguments
def forget(
    *,
    scope: Scope | str,
    selector: str | None = None,
    record_ids: Sequence[str] | None = None,
    utterance: str | None = None,
    episode_ids: Sequence[str] | None = None,
    session_id: str | None = None,
    expected_record_ids: Sequence[str] | None = None,
    expected_episode_ids: Sequence[str] | None = None,
    include_below: bool = False,
    exclude_record_ids: Sequence[str] | None = None,
    exclude_episode_ids: Sequence[str] | None = None,
    confirm_count: int | None = None,
    reference: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> dict[str, Any]:
    """Purge the matching records and stored messages at ``scope``; return the receipt.

    A selector or utterance matches whole words (case-insensitive) in records
    and in stored messages (episodes); record IDs name records directly
    (superseded ones too); episode IDs or a session ID name stored messages,
    and every record drawn from them goes with them. Every record linked to a
    match by supersession is purged with it: content, fact key and source
    episode text cleared, out of the full-text index, stored recall queries
    that repeat it cleared, kept API answers naming it rewritten, freed bytes
    dropped after commit. Returns an ``aetnamem-deletion-receipt-v1`` bound
    to the ``memory.forget`` event, listing the purged record and episode IDs.

    With ``include_below`` a selector or utterance also purges its matches in
    every scope below ``scope`` (that the principal may forget at), one
    ``memory.forget`` event and receipt per scope, and returns an
    ``aetnaweb-forget-bundle-v1`` bundling them, closed by a
    ``memory.forget_bundled`` event at ``scope`` that commits the receipts'
    digests. ``exclude_record_ids`` / ``exclude_episode_ids`` leave previewed
    rows out (a lineage whole or not at all); the receipts name exactly what
    was purged. Above ``MAX_UNCONFIRMED_FORGET`` records and messages,
    ``confirm_count`` must equal that number (:class:`ForgetNotConfirmed`).
    ``reference`` (a ticket number) is kept with the receipts; the events
    commit its digest.

    With ``expected_record_ids`` / ``expected_episode_ids`` (the previewed
    IDs, before any row is left out) it purges exactly those or refuses with
    :class:`ForgetPreviewStale`; without them, more than
    ``MAX_UNPREVIEWED_FORGET`` records and messages are refused. An empty or
    vague request, one that matches nothing or one that needs a preview is
    refused with :class:`SelectorError` and recorded as
    ``memory.forget_rejected`` (that one event commits even though the call
    raises; nothing else is written). Every other refusal writes nothing.
    """
    parsed = access.require(principal, access.FORGET, scope)
    actor_label = access.audit_actor(principal, actor, default="user")
    cleaned_reference = _clean_forget_reference(reference)
    ask = _Ask(selector, record_ids, utterance, episode_ids, session_id)
    try:
        return _forget_apply(
            parsed,
            ask=ask,
            expected_record_ids=expected_record_ids,
            expected_episode_ids=expected_episode_ids,
            include_below=bool(include_below),
            exclude_record_ids=exclude_record_ids,
            exclude_episode_ids=exclude_episode_ids,
            confirm_count=confirm_count,
            reference=cleaned_reference,
            principal=principal,
            actor=actor_label,
        )
    except SelectorError as exc:
        _record_forget_rejected(
            parsed, actor=actor_label, reason=exc.reason, mode=ask.mode, utterance=utterance
        )
        raise


def _check_preview(
    request: _ForgetRequest,
    expected_record_ids: Sequence[str] | None,
    expected_episode_ids: Sequence[str] | None,
) -> None:
    """Refuse a forget larger than the unpreviewed bound, or one that differs from its preview."""
    # Messages matched themselves, beyond the records' own sources (which follow the records).
    extra = request.matched_episode_ids - set(_episode_ids(request.records))
    size = len(request.records) + len(extra)
    if expected_record_ids is None and expected_episode_ids is None:
        if size > MAX_UNPREVIEWED_FORGET:
            raise SelectorError(
                f"this forget would purge {size} records and stored messages (with their "
                f"lineage), more than {MAX_UNPREVIEWED_FORGET} without a preview: preview "
                "first, then forget passing the previewed record_ids and episode_ids as "
                "expected_record_ids and expected_episode_ids",
                reason="preview_required",
            )
        return
    changes = []
    if expected_record_ids is not None:
        changes += _differences(
            "records", set(expected_record_ids), {r.record_id for r in request.records}
        )
    if expected_episode_ids is not None:
        changes += _differences(
            "stored messages", set(expected_episode_ids), set(request.episode_ids)
        )
    elif extra:
        changes.append(
            f"it also empties stored messages {sorted(extra)} that the confirmation does not "
            "name (pass the preview's episode_ids as expected_episode_ids)"
        )
    if changes:
        raise ForgetPreviewStale(
            "the records or messages this forget matches changed since the preview ("
            + "; ".join(changes)
            + "); preview again and confirm the new lists"
        )


def _differences(noun: str, expected: set[str], actual: set[str]) -> list[str]:
    if expected == actual:
        return []
    added, gone = sorted(actual - expected), sorted(expected - actual)
    return [f"{noun} now also matched: {added or 'none'}; no longer matched: {gone or 'none'}"]


@dataclass(frozen=True)
class _Part:
    """What a forget purges at one scope, once the rows left out are taken away."""

    scope: Scope
    request: _ForgetRequest
    records: list[Record]
    # The matched messages still purged (the kept records' sources follow them anyway).
    episode_ids: list[str]


def _ids(values: Sequence[str] | None, field: str) -> set[str]:
    if values is None:
        return set()
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise ForgetSelectionError(f"{field} must be a list of IDs", field=field)
    return {v.strip() for v in values if v.strip()}


def _select(
    parts: Sequence[tuple[Scope, _ForgetRequest]],
    exclude_record_ids: Sequence[str] | None,
    exclude_episode_ids: Sequence[str] | None,
) -> list[_Part]:
    """Take the rows left out (unticked) away from each scope's request.

    A lineage goes whole or stays whole; a message that is the source of a
    record still purged goes with it; leaving a record out keeps its source
    message unless another purged record was drawn from it.
    """
    out_records = _ids(exclude_record_ids, "exclude_record_ids")
    out_episodes = _ids(exclude_episode_ids, "exclude_episode_ids")
    listed_records = {r.record_id for _, req in parts for r in req.records}
    listed_episodes = {e for _, req in parts for e in req.episode_ids}
    for field, unknown in (
        ("exclude_record_ids", sorted(out_records - listed_records)),
        ("exclude_episode_ids", sorted(out_episodes - listed_episodes)),
    ):
        if unknown:
            raise ForgetSelectionError(
                f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not listed by this "
                "forget's preview: leave out only rows it lists",
                field=field,
            )
    selected: list[_Part] = []
    for scope, req in parts:
        groups = _lineage_groups(req.records)
        members: dict[str, set[str]] = {}
        for record_id, group in groups.items():
            members.setdefault(group, set()).add(record_id)
        for group_ids in members.values():
            left_out = group_ids & out_records
            if left_out and left_out != group_ids:
                raise ForgetSelectionError(
                    f"records {', '.join(sorted(group_ids))} at {scope} are one lineage (older "
                    "and newer values of one fact): leave them all out or none (left out: "
                    f"{', '.join(sorted(left_out))})",
                    field="exclude_record_ids",
                )
        kept = [r for r in req.records if r.record_id not in out_records]
        sources = set(_episode_ids(kept))
        clash = sorted(sources & out_episodes)
        if clash:
            raise ForgetSelectionError(
                f"stored message {', '.join(clash)} at {scope} is the source of a record this "
                "forget still purges: leave that record out too, or keep the message",
                field="exclude_episode_ids",
            )
        left_sources = set(_episode_ids(r for r in req.records if r.record_id in out_records))
        matched = sorted(req.matched_episode_ids - out_episodes - (left_sources - sources))
        if kept or matched:
            selected.append(_Part(scope, req, kept, matched))
    if not selected:
        raise ForgetSelectionError(
            "every row is left out: nothing is left to forget", field="exclude_record_ids"
        )
    return selected


@transaction.atomic
def _forget_apply(
    scope: Scope,
    *,
    ask: _Ask,
    expected_record_ids: Sequence[str] | None,
    expected_episode_ids: Sequence[str] | None,
    include_below: bool,
    exclude_record_ids: Sequence[str] | None,
    exclude_episode_ids: Sequence[str] | None,
    confirm_count: int | None,
    reference: str,
    principal: Principal,
    actor: str,
) -> dict[str, Any]:
    lock_subject(str(scope))
    here, below = _requests(scope, ask, principal, below=include_below, lock=True)
    for lower, _ in below:
        lock_subject(str(lower))
    parts = ([(scope, here)] if here is not None else []) + below
    request = _combined(parts)
    _check_preview(request, expected_record_ids, expected_episode_ids)
    selected = _select(parts, exclude_record_ids, exclude_episode_ids)
    check_confirm_count(sum(_size(p.records, p.episode_ids) for p in selected), confirm_count)
    now = timezone.now()
    receipts = [_forget_part(part, now=now, reference=reference, actor=actor) for part in selected]
    if not include_below:
        return receipts[0]
    return _bundle(scope, request.selector_sha256, receipts, reference=reference, actor=actor)


def _forget_part(part: _Part, *, now: datetime, reference: str, actor: str) -> dict[str, Any]:
    request = part.request
    kept = set(part.episode_ids)
    return purge_with_receipt(
        part.scope,
        part.records,
        part.episode_ids,
        episode_texts=[e.text for e in request.episodes if e.episode_id in kept],
        needle=request.needle,
        now=now,
        actor=actor,
        mode=request.mode,
        selector_sha256=request.selector_sha256,
        details={"utterance_sha256": request.utterance_sha256}
        if request.utterance_sha256
        else None,
        reference=reference,
    )


def purge_with_receipt(
    scope: Scope,
    records: list[Record],
    episode_ids: Sequence[str],
    *,
    episode_texts: Sequence[str],
    needle: Needle | None = None,
    now: datetime,
    actor: str,
    mode: str,
    selector_sha256: str,
    details: dict[str, Any] | None = None,
    reference: str = "",
) -> dict[str, Any]:
    """Purge ``records`` and stored messages at one scope as one ``memory.forget`` event with
    its deletion receipt: every purge of content (a forget, a subject erasure, a retention
    run) ends here, inside the caller's transaction and under its subject lock.

    ``details`` are the payload fields of the purge's kind (an erasure's job, a retention
    run's reasons). A ``reference`` is kept on the receipt row; the chain commits its digest
    only, since the text may name the person.
    """
    _forget_recall_queries(scope, records, needle, episode_texts)
    purged_ids, purged_episode_ids = _purge(scope, records, now, episode_ids)
    payload: dict[str, Any] = {
        "mode": mode,
        "selector_sha256": selector_sha256,
        **(details or {}),
        "purged_record_ids": purged_ids,
        "purged_episode_ids": purged_episode_ids,
        "count": len(purged_ids),
    }
    if reference:
        payload["reference_sha256"] = sha256_text(reference)
    event = _audit(
        scope=scope, event_type="memory.forget", actor=actor, payload=payload, mentions=purged_ids
    )
    return _keep_receipt(
        scope, event, selector_sha256, purged_ids, purged_episode_ids, reference=reference
    )


def _keep_receipt(
    scope: Scope,
    event: AuditEvent,
    selector_sha256: str,
    purged_ids: list[str],
    episode_ids: list[str],
    *,
    reference: str = "",
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
        reference=reference,
    )
    return receipt


FORGET_BUNDLE_FORMAT = "aetnaweb-forget-bundle-v1"


def _bundle(
    scope: Scope,
    selector_sha256: str,
    receipts: list[dict[str, Any]],
    *,
    reference: str,
    actor: str,
) -> dict[str, Any]:
    """Bind the per-scope receipts of one forget: a closing event at ``scope`` commits their
    digests (so none can be dropped from the bundle unseen), and the bundle carries its proof."""
    payload: dict[str, Any] = {
        "selector_sha256": selector_sha256,
        "receipt_sha256s": sorted(r["receipt_sha256"] for r in receipts),
        "scopes": sorted({r["subject_id"] for r in receipts}),
        "purged_record_count": sum(len(r["purged_record_ids"]) for r in receipts),
        "purged_episode_count": sum(len(r["purged_episode_ids"]) for r in receipts),
        "reference_sha256": sha256_text(reference),
    }
    event = _audit(scope=scope, event_type="memory.forget_bundled", actor=actor, payload=payload)
    bundle: dict[str, Any] = {
        "format": FORGET_BUNDLE_FORMAT,
        "scope": str(scope),
        "selector_sha256": selector_sha256,
        "reference": reference,
        "created_at": event.created_at,
        "receipts": receipts,
        "closing_proof": log_proof_for(event),
    }
    bundle["bundle_sha256"] = digest(bundle)
    ForgetBundle.objects.create(
        scope=str(scope),
        **scope.columns(),
        closing_event_id=event.event_id,
        document=bundle,
        reference=reference,
        receipt_count=len(receipts),
        record_count=payload["purged_record_count"],
        created_at=timezone.now(),
    )
    DeletionReceipt.objects.filter(
        audit_event_id__in=[r["audit_event_id"] for r in receipts]
    ).update(bundle_event_id=event.event_id)
    return bundle
