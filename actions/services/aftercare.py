"""After a run (A8, A10, A11, A14): compensation, recovery, resolution, verify, purge."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError
from django.db import transaction as db_transaction

from actions import formats
from actions.adapters import (
    ActionAdapter,
    Observation,
    PreparedOperation,
    get_adapter,
)
from actions.approvals import ApprovalAuthority, configured_authority
from actions.errors import (
    ActionInputError,
    ActionStateError,
    AdapterNotRegistered,
)
from actions.limits import MAX_OWNER_LENGTH, MAX_REASON_LENGTH
from actions.models import (
    ActionAttempt,
    ActionOperation,
    ActionPayload,
    ActionResolution,
    ActionTransaction,
)
from actions.services._ledger import (
    _actor_label,
    _begin_attempt,
    _error_digest,
    _event,
    _fence,
    _finish,
    _load,
    _load_for,
    _load_payload,
    _set_operation,
    _store_payload,
    _transition,
)
from actions.services.results import (
    Outcome,
    PurgeResult,
    RecoveryOutcome,
    Resolution,
    VerificationReport,
)
from actions.verification import verify_action
from aetnaweb import access
from aetnaweb.access import Principal
from audit.canonical import canonical_json, digest, sha256_text
from audit.chain import utc_now_iso


def _compensate(
    txn: ActionTransaction,
    applied: list[ActionOperation],
    adapters: dict[str, ActionAdapter],
    prepared: dict[str, PreparedOperation],
) -> str:
    """A8: undo verified operations in reverse; ``compensated`` or ``partial``."""
    if not applied:
        return formats.COMPENSATED  # CP-1: nothing to undo, no event
    with db_transaction.atomic(durable=True):
        _transition(txn.id, [formats.COMMITTING], formats.COMPENSATING)
        _event(
            txn,
            "action.compensating",
            txn.actor_id,
            {"operation_ids": [op.id for op in reversed(applied)]},
        )
    all_restored = True
    for op in reversed(applied):
        number, attempt_key = _record_compensation_intent(txn, op)
        receipt, check, error = _undo(adapters[op.adapter], prepared[op.id], op)
        restored = _record_compensation_outcome(txn, op, attempt_key, number, receipt, check, error)
        all_restored = all_restored and restored
    return formats.COMPENSATED if all_restored else formats.PARTIAL


def _record_compensation_intent(txn: ActionTransaction, op: ActionOperation) -> tuple[int, str]:
    """CP-3: the compensation attempt is durable before the adapter is called."""
    with db_transaction.atomic(durable=True):
        number, attempt_key = _begin_attempt(
            txn,
            op,
            phase=formats.PHASE_COMPENSATE,
            fenced_state=formats.COMPENSATING,
            op_state=formats.OP_COMPENSATING,
            idempotency_key=op.compensation_key,
        )
    return number, attempt_key


def _undo(
    adapter: ActionAdapter, prepared: PreparedOperation, op: ActionOperation
) -> tuple[dict[str, Any], Observation, Exception | None]:
    """Call the adapter's compensation and check it; an exception is an unverified undo."""
    compensation_receipt: dict[str, Any] = {}
    try:
        execution_receipt = _load_payload(op.id, formats.PAYLOAD_EXECUTION_RECEIPT) or {}
        compensation_receipt = adapter.compensate(prepared, execution_receipt, op.compensation_key)
        canonical_json(compensation_receipt)
        check = adapter.verify_compensation(prepared, compensation_receipt)
    except Exception as exc:
        return (
            compensation_receipt,
            Observation(False, "compensation raised", {"error": _error_digest(exc)}),
            exc,
        )
    return compensation_receipt, check, None


def _record_compensation_outcome(
    txn: ActionTransaction,
    op: ActionOperation,
    attempt_key: str,
    number: int,
    compensation_receipt: dict[str, Any],
    check: Observation,
    error: Exception | None,
) -> bool:
    """Record one undo as verified or failed; returns whether the operation was restored."""
    with db_transaction.atomic(durable=True):
        _fence(txn.id, [formats.COMPENSATING])
        if check.ok:
            compensation_digest = digest(compensation_receipt)
            ActionAttempt.objects.filter(pk=attempt_key).update(
                state=formats.ATTEMPT_VERIFIED, finished_at=utc_now_iso()
            )
            _store_payload(txn, op.id, formats.PAYLOAD_COMPENSATION_RECEIPT, compensation_receipt)
            _set_operation(
                op.id, state=formats.OP_COMPENSATED, compensation_digest=compensation_digest
            )
            _event(
                txn,
                "action.compensation_verified",
                txn.actor_id,
                {
                    "operation_id": op.id,
                    "attempt": number,
                    "compensation_digest": compensation_digest,
                    "observation_digest": check.digest,
                },
            )
            return True
        error_type = type(error).__name__ if error else "CompensationUnverified"
        error_digest = _error_digest(error) if error else check.digest
        ActionAttempt.objects.filter(pk=attempt_key).update(
            state=formats.ATTEMPT_FAILED,
            error_code=error_type,
            error_digest=error_digest,
            finished_at=utc_now_iso(),
        )
        _set_operation(op.id, state=formats.OP_FAILED)
        _event(
            txn,
            "action.compensation_failed",
            txn.actor_id,
            {
                "operation_id": op.id,
                "attempt": number,
                "error_type": error_type,
                "error_digest": error_digest,
            },
        )
        return False


# -- recover (A10) ----------------------------------------------------------------------


def recover(
    *, transaction_id: str, principal: Principal, actor: str | None = None
) -> RecoveryOutcome:
    """Fence a run that died mid-commit, then sweep what its crashed writes left on disk.

    The result is the fenced transaction and its receipt, plus ``leftovers``:
    each temporary file an adapter's interrupted write left beside its target
    (the filesystem adapter's ``.<name>.<tag>.<random>.aetnaweb-tmp``), and
    whether it was removed. Removal happens only after the fence committed:
    from then on no run of these operations can rename the file into place.
    """
    fenced = _fence_interrupted_run(transaction_id=transaction_id, principal=principal, actor=actor)
    return RecoveryOutcome(
        transaction=fenced.transaction,
        receipt=fenced.receipt,
        leftovers=tuple(_sweep_leftovers(fenced.transaction.transaction_id)),
    )


def _sweep_leftovers(transaction_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for op in ActionOperation.objects.filter(transaction_id=transaction_id).order_by("ordinal"):
        payload = _load_payload(op.id, "prepared")
        if payload is None:
            continue
        try:
            adapter = get_adapter(op.adapter)
        except AdapterNotRegistered:
            continue
        sweep = getattr(adapter, "leftovers", None)  # optional: adapters without temp files
        if sweep is None:
            continue
        try:
            items = sweep(
                PreparedOperation.from_payload(payload),
                [op.idempotency_key, op.compensation_key],
                remove=True,
            )
        except OSError as exc:
            items = [{"path": None, "removed": False, "kept_because": exc.strerror or str(exc)}]
        found.extend({"operation_id": op.id, **item} for item in items)
    return found


@db_transaction.atomic
def _fence_interrupted_run(
    *, transaction_id: str, principal: Principal, actor: str | None = None
) -> Outcome:
    """Fence a run that died mid-commit: ``recovery_required`` with a receipt; never retries.

    Operations caught executing or compensating become ``uncertain``: a
    person must check the world. No adapter is called and no attempt changes.
    """
    txn = _load_for(principal, access.APPROVE, transaction_id)
    if txn.state not in formats.INTERRUPTED_STATES:
        raise ActionStateError(
            f"transaction {txn.id} is {txn.state} and does not require interrupted-run recovery"
        )
    label = _actor_label(principal, actor, "operator")
    # Take the transaction row first: a run that is still alive records each
    # step under the same row (its fence), so from here on it can only lose.
    _fence(txn.id, formats.INTERRUPTED_STATES)
    interrupted = list(
        ActionOperation.objects.filter(
            transaction_id=txn.id, state__in=[formats.OP_EXECUTING, formats.OP_COMPENSATING]
        )
        .order_by("ordinal")
        .values_list("id", flat=True)
    )
    ActionOperation.objects.filter(pk__in=interrupted).update(
        state=formats.OP_UNCERTAIN, updated_at=utc_now_iso()
    )
    return _finish(
        txn,
        expected=formats.INTERRUPTED_STATES,
        terminal_state=formats.RECOVERY_REQUIRED,
        actor=label,
        events=[
            (
                "action.recovery_required",
                {
                    "uncertain_operation_ids": interrupted,
                    "reason": "interrupted_external_boundary",
                },
            )
        ],
        durable=False,
        error_code="interrupted_external_boundary",
        error_digest=digest(interrupted),
    )


# -- resolution (closing "needs attention") --------------------------------------------

RESOLUTION_OUTCOMES = tuple(value for value, _ in ActionResolution.OUTCOMES)
ATTENTION_STATES = formats.ATTENTION_STATES


def _clean_text(name: str, value: Any, *, limit: int) -> str:
    """Required free text a person typed: no NUL, no lone surrogates, no other controls."""
    if not isinstance(value, str) or not value.strip():
        raise ActionInputError(f"{name} is required")
    value = value.strip()
    if len(value) > limit:
        raise ActionInputError(f"{name} must be at most {limit} characters")
    if any(
        0xD800 <= ord(ch) <= 0xDFFF or (ord(ch) < 32 and ch not in "\n\r\t") or ord(ch) == 127
        for ch in value
    ):
        raise ActionInputError(f"{name} holds a control character or an invalid one")
    return value


def _resolution_text(outcome: str, note: str, owner: str) -> tuple[str, str]:
    """The note and owner as stored, or a refusal naming what is wrong with the input."""
    if outcome not in RESOLUTION_OUTCOMES:
        raise ActionInputError(
            f"outcome must be one of {', '.join(RESOLUTION_OUTCOMES)}, not {str(outcome)[:40]!r}"
        )
    note = _clean_text("a note", note, limit=MAX_REASON_LENGTH)
    owner = _clean_text("an owner", owner, limit=MAX_OWNER_LENGTH)
    if "\n" in owner or "\r" in owner or "\t" in owner:
        raise ActionInputError("an owner is one line: a name or a team")
    return note, owner


def _lock_unresolved(txn: ActionTransaction) -> None:
    """Lock an attention-state transaction that has no resolution yet, or refuse."""
    # Lock the row without touching it: a terminal transaction is never updated.
    locked = (
        ActionTransaction.objects.select_for_update()
        .filter(pk=txn.id, state__in=ATTENTION_STATES)
        .exists()
    )
    if not locked:
        raise ActionStateError(
            f"transaction {txn.id} is {txn.state}: only uncertain or recovery_required "
            "transactions take a resolution"
        )
    if ActionResolution.objects.filter(transaction_id=txn.id).exists():
        raise ActionStateError(f"transaction {txn.id} already has a recorded resolution")


@db_transaction.atomic
def record_resolution(
    *,
    transaction_id: str,
    outcome: str,
    note: str,
    owner: str,
    principal: Principal,
    actor: str | None = None,
) -> Resolution:
    """Close an uncertain or recovery_required transaction in the attention queue, audited.

    The transaction keeps its terminal state (ST-1); a resolution records what
    a person found in the world, the follow-up owner and a note (its digest in
    the audit chain, ``action.resolution_recorded``). One per transaction.
    """
    txn = _load_for(principal, access.APPROVE, transaction_id)
    note, owner = _resolution_text(outcome, note, owner)
    label = _actor_label(principal, actor, "operator")
    _lock_unresolved(txn)
    now = utc_now_iso()
    event = _event(
        txn,
        "action.resolution_recorded",
        label,
        {
            "transaction_id": txn.id,
            "state": txn.state,
            "outcome": outcome,
            "owner": owner,
            "note_sha256": sha256_text(note),
        },
    )
    try:
        with db_transaction.atomic():
            resolution = ActionResolution.objects.create(
                transaction=txn,
                outcome=outcome,
                note=note,
                owner=owner,
                resolved_by=label,
                audit_event_id=event.event_id,
                created_at=now,
            )
    except IntegrityError as exc:  # a concurrent resolution won the race
        raise ActionStateError(f"transaction {txn.id} already has a recorded resolution") from exc
    return Resolution(
        transaction_id=txn.id,
        state=txn.state,
        outcome=resolution.outcome,
        owner=resolution.owner,
        resolved_by=resolution.resolved_by,
        audit_event_id=event.event_id,
        created_at=now,
    )


# -- verify, purge (A11, A14) ----------------------------------------------------------


def verify(
    *,
    transaction_id: str,
    principal: Principal,
    authority: ApprovalAuthority | None = None,
) -> VerificationReport:
    """V-1 for one transaction, checking signatures too when a key is configured.

    Read-only. Needs AUDIT or APPROVE on the plan's scope.
    """
    txn = _load(transaction_id)
    if not (
        access.may(principal, access.AUDIT, txn.subject_id)
        or access.may(principal, access.APPROVE, txn.subject_id)
    ):
        raise access.AccessDenied(f"{principal.label} may not verify actions at {txn.subject_id}")
    if authority is None:
        authority = configured_authority(required=False)
    return VerificationReport.of(verify_action(txn.id, authority=authority))


@db_transaction.atomic
def purge_payloads(
    *, transaction_id: str, principal: Principal, actor: str | None = None
) -> PurgeResult:
    """Blank every payload (content, before-images, adapter receipts) of a finished transaction.

    Refused while the transaction is open (decision 4). Digests stay, so the
    receipt and the audit chain still verify. Logical only: SQLite free
    pages, the WAL, backups and replicas may still hold the old bytes (PG-5).
    """
    txn = _load_for(principal, access.APPROVE, transaction_id)
    if txn.state not in formats.TERMINAL_STATES:
        raise ActionStateError(
            f"transaction {txn.id} is {txn.state}: payloads can only be purged from a finished "
            "transaction (commit or abort it first)"
        )
    label = _actor_label(principal, actor, "user")
    now = utc_now_iso()
    _fence(txn.id, [txn.state])
    purged = ActionPayload.objects.filter(transaction_id=txn.id, purged_at__isnull=True).update(
        payload="{}", purged_at=now, updated_at=now
    )
    event = _event(
        txn,
        "action.payloads_purged",
        label,
        {"purged_count": purged, "plan_hash": txn.plan_hash},
    )
    return PurgeResult(transaction_id=txn.id, purged_count=purged, audit_event_id=event.event_id)
