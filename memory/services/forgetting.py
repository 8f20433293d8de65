"""Forget: preview, then purge records with their whole supersession lineage; deletion receipts.

``_purge`` and ``_keep_receipt`` are also how review's reject purges.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest, sha256_text
from audit.models import AuditEvent
from audit.receipts import build_deletion_receipt
from audit.services import lock_subject
from memory import metadata as record_metadata
from memory import search
from memory.errors import ForgetPreviewStale, RecordNotFound, RecordStateError, SelectorError
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


def _one_request(
    selector: str | None, record_ids: Sequence[str] | None, utterance: str | None
) -> None:
    """Refuse a forget that gives none, or more than one, of its three ways to ask."""
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


def _forget_request(
    scope: Scope,
    *,
    selector: str | None,
    record_ids: Sequence[str] | None,
    utterance: str | None,
    lock: bool,
) -> _ForgetRequest:
    _one_request(selector, record_ids, utterance)
    utterance_sha256 = None
    needle: Needle | None = None
    if record_ids is not None:
        named, selector_sha256 = _named_records(scope, record_ids)
    else:
        needle, utterance_sha256 = _needle(selector, utterance)
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
    episode_ids = _episode_ids(records)
    if episode_ids:
        # A message's text is cleared even when another fact drawn from it stays
        # active: the text holds the forgotten words too. That fact keeps its own content.
        Episode.objects.filter(episode_id__in=episode_ids).update(
            text="", digest_salt="", purged_at=now
        )
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
