"""Commit (A6, A7): recheck everything, record each intent, execute, verify, finish."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction as db_transaction

from actions import formats
from actions.adapters import (
    ActionAdapter,
    Observation,
    PreparedOperation,
    get_adapter,
)
from actions.approvals import NO_KEY_MESSAGE, ApprovalAuthority, configured_authority
from actions.errors import (
    ActionStateError,
    AdapterDriftError,
    ApprovalInvalid,
    ApprovalUnavailable,
    NotDispatched,
    PayloadPurged,
)
from actions.models import (
    ActionApproval,
    ActionAttempt,
    ActionOperation,
    ActionTransaction,
)
from actions.services._ledger import (
    _begin_attempt,
    _error_digest,
    _event,
    _fence,
    _finish,
    _load_for,
    _load_payload,
    _set_operation,
    _store_payload,
    _transition,
)
from actions.services.aftercare import _compensate
from actions.services.results import Outcome
from actions.verification import verify_action
from aetnaweb import access
from aetnaweb.access import Principal
from audit.canonical import canonical_json, digest
from audit.chain import utc_now_iso

# What ends a run: the terminal transaction and its receipt, as ``_finish`` returns it.
_Ended = Outcome

# A run in either phase may end in a terminal state (compensation moves it on).
_RUNNING = (formats.COMMITTING, formats.COMPENSATING)


@dataclass(frozen=True, slots=True)
class _Run:
    """One commit's working set; ``verified`` grows as operations verify (compensation undoes them)."""

    txn: ActionTransaction
    adapters: dict[str, ActionAdapter]
    prepared: dict[str, PreparedOperation]
    verified: list[ActionOperation] = field(default_factory=list)

    def compensate(self) -> str:
        return _compensate(self.txn, self.verified, self.adapters, self.prepared)

    def end(
        self, terminal_state: str, *, events: list[tuple[str, dict[str, Any]]], **fields: Any
    ) -> _Ended:
        return _finish(
            self.txn,
            expected=_RUNNING,
            terminal_state=terminal_state,
            actor=self.txn.actor_id,
            events=events,
            **fields,
        )


def _latest_approval(txn: ActionTransaction) -> ActionApproval | None:
    return (
        ActionApproval.objects.filter(transaction_id=txn.id).order_by("-created_at", "-id").first()
    )


def commit(
    *,
    transaction_id: str,
    principal: Principal,
    authority: ApprovalAuthority | None = None,
) -> Outcome:
    """Execute an approved plan; returns ``{transaction, receipt}`` for every terminal outcome.

    Every check runs before the first effect; each effect's intent is durable
    before the adapter is called; an ambiguous outcome is never retried.
    Must be called outside any database transaction (each step commits on its
    own, so the intent record survives a crash).
    """
    txn = _load_for(principal, access.APPROVE, transaction_id)
    if txn.mode != formats.MODE_ENFORCE:
        raise ActionStateError("observe and preview plans cannot execute")
    if txn.state != formats.APPROVED:
        raise ActionStateError(f"transaction {txn.id} is {txn.state}, not approved")
    _check_integrity_and_approval(txn, authority)
    operations = list(ActionOperation.objects.filter(transaction_id=txn.id).order_by("ordinal"))
    adapters = _unchanged_adapters(operations)
    prepared = _approved_payloads(operations)
    refused = _preflight(txn, operations, adapters, prepared)
    if refused is not None:
        return refused

    # CM-8
    with db_transaction.atomic(durable=True):
        _transition(txn.id, [formats.APPROVED], formats.COMMITTING)
        _event(
            txn,
            "action.committing",
            txn.actor_id,
            {"plan_hash": txn.plan_hash, "committed_by": principal.label},
        )
    return _execute_plan(txn, operations, adapters, prepared)


def _check_integrity_and_approval(
    txn: ActionTransaction, authority: ApprovalAuthority | None
) -> None:
    """CM-2..CM-4: a key, a transaction that verifies, and a recorded approval still valid."""
    authority = authority or configured_authority(required=False)
    if authority is None:
        raise ApprovalUnavailable(
            "an approval key is required to commit actions; " + NO_KEY_MESSAGE
        )
    report = verify_action(txn.id, authority=authority)
    if not report["valid"]:
        raise ActionStateError(
            "action integrity verification failed: " + "; ".join(report["failures"])
        )
    recorded = _latest_approval(txn)
    if recorded is None:
        raise ActionStateError("transaction has no recorded approval")
    if not authority.verify(recorded.as_approval(), transaction_id=txn.id, plan_hash=txn.plan_hash):
        raise ApprovalInvalid(
            "recorded approval is invalid or expired; abort this plan and stage it again"
        )


def _unchanged_adapters(operations: list[ActionOperation]) -> dict[str, ActionAdapter]:
    """CM-5: each operation's adapter, refused if its manifest changed since approval."""
    adapters: dict[str, ActionAdapter] = {}
    for op in operations:
        if op.adapter not in adapters:
            adapters[op.adapter] = get_adapter(op.adapter)
        if digest(adapters[op.adapter].manifest()) != op.manifest_digest:
            raise AdapterDriftError(
                f"adapter manifest changed after approval (operation {op.operation_key!r}, "
                f"adapter {op.adapter!r}); abort this plan and stage it again"
            )
    return adapters


def _approved_payloads(operations: list[ActionOperation]) -> dict[str, PreparedOperation]:
    """CM-6: the prepared payloads, each exactly what was hashed and approved."""
    prepared: dict[str, PreparedOperation] = {}
    for op in operations:
        payload = _load_payload(op.id, formats.PAYLOAD_PREPARED)
        if payload is None:
            raise PayloadPurged(f"prepared payload was purged for {op.id}")
        candidate = PreparedOperation.from_payload(payload)
        # The payload is what executes; it must be exactly what was hashed and approved.
        if (
            digest(candidate.arguments) != op.arguments_digest
            or digest(candidate.preview) != op.preview_digest
            or digest(candidate.preconditions) != op.precondition_digest
            or candidate.adapter != op.adapter
            or candidate.operation != op.operation
        ):
            raise ActionStateError(
                "action integrity verification failed: the prepared payload of "
                f"{op.id} does not match its approved digests"
            )
        prepared[op.id] = candidate
    return prepared


def _preflight(
    txn: ActionTransaction,
    operations: list[ActionOperation],
    adapters: dict[str, ActionAdapter],
    prepared: dict[str, PreparedOperation],
) -> _Ended | None:
    """CM-7: revalidate every operation; the first failure aborts with a receipt, nothing runs."""
    for op in operations:
        try:
            observation = adapters[op.adapter].revalidate(prepared[op.id])
        except Exception as exc:
            observation = Observation(
                False, "precondition check raised", {"error": _error_digest(exc)}
            )
        if not observation.ok:
            return _finish(
                txn,
                expected=[formats.APPROVED],
                terminal_state=formats.ABORTED,
                actor=txn.actor_id,
                events=[
                    (
                        "action.precondition_failed",
                        {
                            "operation_id": op.id,
                            "reason_digest": digest(observation.reason or "changed"),
                            "terminal_state": formats.ABORTED,
                        },
                    )
                ],
                error_code="precondition_changed",
                error_digest=digest(observation.reason or "changed"),
            )
    return None


def _execute_plan(
    txn: ActionTransaction,
    operations: list[ActionOperation],
    adapters: dict[str, ActionAdapter],
    prepared: dict[str, PreparedOperation],
) -> _Ended:
    """A7: the per-operation loop, in ordinal order."""
    run = _Run(txn=txn, adapters=adapters, prepared=prepared)
    for op in operations:
        ended = _run_operation(run, op)
        if ended is not None:
            return ended
        run.verified.append(op)

    # EX-8
    return _finish(
        txn,
        expected=[formats.COMMITTING],
        terminal_state=formats.COMMITTED,
        actor=txn.actor_id,
        events=[
            (
                "action.committed",
                {"plan_hash": txn.plan_hash, "operation_ids": [op.id for op in operations]},
            )
        ],
    )


def _run_operation(run: _Run, op: ActionOperation) -> _Ended | None:
    """Revalidate, record the intent, execute, verify one operation; a result ends the run."""
    ended = _revalidate(run, op)
    if ended is not None:
        return ended
    number, attempt_key = _record_intent(run.txn, op)
    execution_receipt, ended = _execute_effect(run, op, attempt_key, number)
    if execution_receipt is None:
        return ended
    return _verify_effect(run, op, attempt_key, number, execution_receipt)


def _revalidate(run: _Run, op: ActionOperation) -> _Ended | None:
    """EX-1, with decision 1: an exception here is an unknown, not a crash."""
    try:
        observation = run.adapters[op.adapter].revalidate(run.prepared[op.id])
    except Exception as exc:
        error_digest = _error_digest(exc)
        with db_transaction.atomic(durable=True):
            _fence(run.txn.id, [formats.COMMITTING])
            _set_operation(op.id, state=formats.OP_UNCERTAIN)
            _event(
                run.txn,
                "action.effect_uncertain",
                run.txn.actor_id,
                {
                    "operation_id": op.id,
                    "attempt": None,
                    "phase": "revalidate",
                    "error_type": type(exc).__name__,
                    "error_digest": error_digest,
                },
            )
        run.compensate()
        return run.end(
            formats.UNCERTAIN,
            events=[
                (
                    "action.transaction_uncertain",
                    {"operation_id": op.id, "error_digest": error_digest},
                )
            ],
            error_code="revalidation_raised",
            error_digest=error_digest,
        )
    if observation.ok:
        return None
    outcome = run.compensate()
    return run.end(
        outcome,
        events=[
            (
                "action.precondition_failed",
                {
                    "operation_id": op.id,
                    "reason_digest": digest(observation.reason or "changed"),
                    "observation_digest": observation.digest,
                    "terminal_state": outcome,
                },
            )
        ],
        error_code="precondition_changed",
        error_digest=observation.digest,
    )


def _record_intent(txn: ActionTransaction, op: ActionOperation) -> tuple[int, str]:
    """EX-2, EX-3: the intent is durable before the adapter is called."""
    with db_transaction.atomic(durable=True):
        number, attempt_key = _begin_attempt(
            txn,
            op,
            phase=formats.PHASE_EXECUTE,
            fenced_state=formats.COMMITTING,
            op_state=formats.OP_EXECUTING,
            idempotency_key=op.idempotency_key,
        )
        _event(
            txn,
            "action.effect_executing",
            txn.actor_id,
            {"operation_id": op.id, "attempt": number, "idempotency_key": op.idempotency_key},
        )
    return number, attempt_key


def _execute_effect(
    run: _Run, op: ActionOperation, attempt_key: str, number: int
) -> tuple[dict[str, Any], None] | tuple[None, _Ended]:
    """EX-4: call the adapter with no database transaction open while the world changes.

    Returns the adapter's execution receipt, or (when the call raised) the
    run's end.
    """
    try:
        execution_receipt = run.adapters[op.adapter].execute(
            run.prepared[op.id], op.idempotency_key
        )
        canonical_json(execution_receipt)
        if not isinstance(execution_receipt, dict):
            raise TypeError("adapter.execute must return a JSON object")
    except NotDispatched as exc:
        # Decision 2: the adapter knows nothing happened.
        error_digest = _close_failed_execution(run.txn, op, attempt_key, number, exc)
        outcome = run.compensate()
        return None, run.end(
            outcome, events=[], error_code="not_dispatched", error_digest=error_digest
        )
    except BaseException as exc:
        # EX-5: any other failure leaves the outcome unknown; never retried.
        error_digest = _close_failed_execution(run.txn, op, attempt_key, number, exc)
        run.compensate()
        result = run.end(
            formats.UNCERTAIN,
            events=[
                (
                    "action.transaction_uncertain",
                    {"operation_id": op.id, "error_digest": error_digest},
                )
            ],
            error_code="execution_raised",
            error_digest=error_digest,
        )
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt and friends: recorded, then honoured.
        return None, result
    return execution_receipt, None


def _verify_effect(
    run: _Run,
    op: ActionOperation,
    attempt_key: str,
    number: int,
    execution_receipt: dict[str, Any],
) -> _Ended | None:
    """EX-6, with decision 1: a verify that raises is an unverified effect (EX-7 ends the run)."""
    verify_error: BaseException | None = None
    try:
        check = run.adapters[op.adapter].verify(run.prepared[op.id], execution_receipt)
    except Exception as exc:
        verify_error = exc
        check = Observation(False, "verification raised", {"error": _error_digest(exc)})
    _record_verification(run.txn, op, attempt_key, number, execution_receipt, check, verify_error)
    if check.ok:
        return None
    # EX-7
    run.compensate()
    return run.end(
        formats.UNCERTAIN,
        events=[
            (
                "action.transaction_uncertain",
                {"operation_id": op.id, "observation_digest": check.digest},
            )
        ],
        error_code="verification_raised" if verify_error else "postcondition_unverified",
        error_digest=check.digest,
    )


def _record_verification(
    txn: ActionTransaction,
    op: ActionOperation,
    attempt_key: str,
    number: int,
    execution_receipt: dict[str, Any],
    check: Observation,
    verify_error: BaseException | None,
) -> None:
    """Close the attempt, keep the adapter's receipt and record the effect verified or uncertain."""
    result_digest = digest(execution_receipt)
    provider_request_id = execution_receipt.get("provider_request_id")
    with db_transaction.atomic(durable=True):
        _fence(txn.id, [formats.COMMITTING])
        ActionAttempt.objects.filter(pk=attempt_key).update(
            state=formats.ATTEMPT_VERIFIED if check.ok else formats.ATTEMPT_UNCERTAIN,
            provider_request_id=str(provider_request_id)[:200] if provider_request_id else None,
            error_code=(
                type(verify_error).__name__
                if verify_error
                else (None if check.ok else "postcondition_unverified")
            ),
            error_digest=None if check.ok else check.digest,
            finished_at=utc_now_iso(),
        )
        _store_payload(txn, op.id, formats.PAYLOAD_EXECUTION_RECEIPT, execution_receipt)
        _set_operation(
            op.id,
            state=formats.OP_VERIFIED if check.ok else formats.OP_UNCERTAIN,
            result_digest=result_digest,
        )
        _event(
            txn,
            "action.effect_verified" if check.ok else "action.effect_uncertain",
            txn.actor_id,
            {
                "operation_id": op.id,
                "attempt": number,
                "result_digest": result_digest,
                "observation_digest": check.digest,
                "verified": check.ok,
            },
        )


def _close_failed_execution(
    txn: ActionTransaction,
    op: ActionOperation,
    attempt_key: str,
    number: int,
    exc: BaseException,
) -> str:
    """Record, durably, an execute call that raised; returns the error digest.

    :class:`NotDispatched` means the adapter knows nothing happened, so the
    attempt and operation are ``failed`` (decision 2); any other exception
    leaves the effect unknown, so they are ``uncertain`` (EX-5).
    """
    dispatched = not isinstance(exc, NotDispatched)
    error_digest = _error_digest(exc)
    payload: dict[str, Any] = {
        "operation_id": op.id,
        "attempt": number,
        "error_type": type(exc).__name__,
        "error_digest": error_digest,
    }
    if not dispatched:
        payload["dispatched"] = False
    with db_transaction.atomic(durable=True):
        _fence(txn.id, [formats.COMMITTING])
        ActionAttempt.objects.filter(pk=attempt_key).update(
            state=formats.ATTEMPT_UNCERTAIN if dispatched else formats.ATTEMPT_FAILED,
            error_code=type(exc).__name__,
            error_digest=error_digest,
            finished_at=utc_now_iso(),
        )
        _set_operation(op.id, state=formats.OP_UNCERTAIN if dispatched else formats.OP_FAILED)
        _event(
            txn,
            "action.effect_uncertain" if dispatched else "action.effect_failed",
            txn.actor_id,
            payload,
        )
    return error_digest
