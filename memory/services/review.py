"""Review of quarantined records: promote, reject, or decide every fact of one source together."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest, sha256_text
from audit.services import lock_subject
from memory import search, selectors, vectors
from memory.errors import (
    InvalidInput,
    RecordStateError,
    SourceFactsWaiting,
    WarningNotAcknowledged,
)
from memory.extraction import review_warnings
from memory.limits import MAX_REASON_CHARS
from memory.models import Record, ReviewReason, Status, TrustTier
from memory.services._common import (
    _audit,
    _bump,
    _record_at,
    _retire,
    _slot_holders,
    _status_deltas,
)
from memory.services.forgetting import _keep_receipt, _purge
from memory.services.results import PromoteResult, ReviewDecisions, SourceDecision


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
        raise InvalidInput(
            f"a reason must be text of at most {MAX_REASON_CHARS} characters", field="reason"
        )
    # The reason may quote content, so the chain keeps its digest only.
    return {"reason_sha256": sha256_text(reason)}


@storable_text_arguments
def promote(
    *,
    scope: Scope | str,
    record_id: str,
    reason: str | None = None,
    acknowledged: bool = False,
    principal: Principal,
    actor: str | None = None,
) -> PromoteResult:
    """Make a quarantined record at ``scope`` active and ``user_confirmed``.

    It supersedes active records with its ``fact_key`` at that scope. A fact
    that reads like an instruction or holds a credential needs ``acknowledged``.
    """
    parsed = access.require(principal, access.REVIEW, scope)
    reason_fields = _reason_payload(reason)
    # The record's content is embedded before BEGIN (no lock held while the
    # model runs); the transaction re-reads and re-checks the record itself.
    contents = Record.objects.filter(
        scope=str(parsed), record_id=record_id, status=Status.QUARANTINED
    ).values_list("content", flat=True)[:1]
    with vectors.prepared(list(contents)), transaction.atomic():
        return _promote_in_transaction(
            parsed, record_id, reason, reason_fields, acknowledged, principal, actor
        )


def _promote_in_transaction(
    parsed: Scope,
    record_id: str,
    reason: str | None,
    reason_fields: dict[str, Any],
    acknowledged: bool,
    principal: Principal,
    actor: str | None,
) -> PromoteResult:
    lock_subject(str(parsed))
    record = _record_at(parsed, record_id)
    _require_quarantined(record, "promote")
    _require_acknowledged([record], acknowledged)
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
    """Purge a quarantined record at ``scope`` the way forget does; return the deletion receipt.

    Refused while other facts from the same source message wait for review:
    the purge takes the source with it (decide them together instead).
    """
    parsed = access.require(principal, access.REVIEW, scope)
    reason_fields = _reason_payload(reason)
    lock_subject(str(parsed))
    record = _record_at(parsed, record_id)
    _require_quarantined(record, "reject")
    _require_whole_sources(principal, [record], {record.record_id})
    return _reject_record(parsed, record, reason, reason_fields, principal, actor)


def _reject_record(
    parsed: Scope,
    record: Record,
    reason: str | None,
    reason_fields: dict[str, Any],
    principal: Principal,
    actor: str | None,
) -> dict[str, Any]:
    """Purge one quarantined record whose source rules were checked by the caller."""
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


SOURCE_DECISIONS = ("promote", "reject")


@transaction.atomic
def decide_source(
    *,
    scope: Scope | str,
    episode_id: str,
    decisions: dict[str, str],
    reason: str | None = None,
    acknowledged: bool = False,
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
    reason_fields = _reason_payload(reason)
    _require_decisions(decisions)
    lock_subject(str(parsed))
    waiting = {
        record.record_id: record
        for record in Record.objects.select_for_update().filter(
            scope=str(parsed), episode_id=episode_id, status=Status.QUARANTINED
        )
    }
    if not waiting:
        raise RecordStateError(
            f"no fact from source {episode_id} awaits review at {parsed}: "
            "it was decided already, or the ID is wrong"
        )
    decided = {record_id: d for record_id, d in decisions.items() if record_id in waiting}
    # The rules every review surface shares come first, so a partial decision is
    # refused here as it is by promote and reject.
    _require_acknowledged(
        [waiting[record_id] for record_id, d in decided.items() if d == "promote"], acknowledged
    )
    _require_whole_sources(
        principal,
        [waiting[record_id] for record_id, d in decided.items() if d == "reject"],
        set(decided),
    )
    missing, extra = sorted(waiting.keys() - decisions.keys()), sorted(decisions.keys() - waiting)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"also decide {', '.join(missing)} (from the same source)")
        if extra:
            parts.append(f"{', '.join(extra)} no longer await review from this source")
        raise RecordStateError("; ".join(parts) + ". Nothing was changed.")
    promoted = tuple(
        promote(
            scope=parsed,
            record_id=record_id,
            reason=reason,
            acknowledged=acknowledged,
            principal=principal,
            actor=actor,
        )
        for record_id in sorted(waiting)
        if decisions[record_id] == "promote"
    )
    # Every waiting fact of the source is decided in this call (checked above),
    # so the rejections may purge it.
    receipts = tuple(
        _reject_record(
            parsed, _record_at(parsed, record_id), reason, reason_fields, principal, actor
        )
        for record_id in sorted(waiting)
        if decisions[record_id] == "reject"
    )
    return SourceDecision(str(parsed), episode_id, promoted, receipts)


def _require_decisions(decisions: object) -> None:
    if not isinstance(decisions, dict) or not decisions:
        raise InvalidInput("decide at least one fact of the source", field="decisions")
    unknown = sorted({str(d) for d in decisions.values() if d not in SOURCE_DECISIONS})
    if unknown:
        raise InvalidInput(
            f"a decision is promote or reject, not {', '.join(unknown)}", field="decisions"
        )


@transaction.atomic
def decide_records(
    *,
    items: Sequence[tuple[Scope | str, str]],
    decision: str,
    reason: str | None = None,
    acknowledged: bool = False,
    principal: Principal,
    actor: str | None = None,
) -> ReviewDecisions:
    """Promote (or reject) every record of ``items`` (scope, record ID), all or nothing.

    The rules of one decision hold for the set: a flagged fact is promoted only
    when ``acknowledged``; a rejection must take every fact still waiting from
    the sources it purges. A record decided meanwhile by someone else refuses
    the whole set, naming it.
    """
    if decision not in SOURCE_DECISIONS:
        raise InvalidInput(f"a decision is promote or reject, not {decision}", field="decision")
    if not items:
        raise InvalidInput("decide at least one record", field="items")
    parsed = [
        (access.require(principal, access.REVIEW, scope), record_id) for scope, record_id in items
    ]
    reason_fields = _reason_payload(reason)
    for subject in sorted({str(scope) for scope, _ in parsed}):
        lock_subject(subject)
    chosen = [(scope, _record_at(scope, record_id)) for scope, record_id in parsed]
    for scope, record in chosen:
        try:
            _require_quarantined(record, decision)
        except RecordStateError as exc:
            named = quoted_fact(record.content) if record.content else record.record_id
            raise RecordStateError(f"{named} at {scope}: {exc}") from exc
    records = [record for _, record in chosen]
    if decision == "promote":
        _require_acknowledged(records, acknowledged)
        promoted = tuple(
            promote(
                scope=scope,
                record_id=record.record_id,
                reason=reason,
                acknowledged=acknowledged,
                principal=principal,
                actor=actor,
            )
            for scope, record in chosen
        )
        return ReviewDecisions(decision, promoted, ())
    _require_whole_sources(principal, records, {record.record_id for record in records})
    receipts = tuple(
        _reject_record(scope, record, reason, reason_fields, principal, actor)
        for scope, record in chosen
    )
    return ReviewDecisions(decision, (), receipts)


QUOTE_CHARS = 60


def quoted_fact(content: str) -> str:
    """A fact as a refusal names it: its start in quotes (people recognise content, not IDs)."""
    text = " ".join((content or "").split())
    return f"“{text[:QUOTE_CHARS]}…”" if len(text) > QUOTE_CHARS else f"“{text}”"


def _quoted_list(records: Iterable[Record]) -> str:
    return ", ".join(quoted_fact(record.content) for record in records)


def _require_acknowledged(promoted: Iterable[Record], acknowledged: bool) -> None:
    """Promoting a fact that reads like an instruction to the agent or holds a credential
    needs the warning acknowledged (the reviewer read it and still wants it)."""
    if acknowledged:
        return
    flagged = sorted(
        (record for record in promoted if review_warnings(record.content)),
        key=lambda record: record.record_id,
    )
    if flagged:
        raise WarningNotAcknowledged(
            f"Nothing was promoted: {_quoted_list(flagged)} "
            f"{'reads' if len(flagged) == 1 else 'read'} like an instruction to the agent or "
            "hold a credential (see the warning on the fact). Read it again; to promote it "
            "anyway, tick “I read the warning and still want to promote”.",
            field="acknowledged",
        )


def _require_whole_sources(principal: Principal, rejected: list[Record], decided: set[str]) -> None:
    """A rejection purges the source message, so every fact of that source still waiting
    must be decided in the same call (``decided``: the record IDs it decides)."""
    left = sorted(
        (
            sibling
            for group in selectors.waiting_siblings(principal, rejected).values()
            for sibling in group
            if sibling.record_id not in decided
        ),
        key=lambda record: record.record_id,
    )
    if left:
        raise SourceFactsWaiting(
            f"Nothing was rejected: rejecting purges the source message, and {_quoted_list(left)} "
            f"from the same source still {'awaits' if len(left) == 1 else 'await'} review. "
            "Decide the facts of that source together (its card in the queue groups them)."
        )
