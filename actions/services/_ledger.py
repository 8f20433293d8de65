"""Shared steps of every guarded-action workflow: load, transition, fence, audit, receipt.

Private to :mod:`actions.services`; the workflow modules build on these.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction as db_transaction

from actions import formats
from actions.errors import (
    ActionInputError,
    ActionStateError,
    ConcurrentTransitionError,
    TransactionNotFound,
)
from actions.limits import MAX_CONTEXT_LENGTH
from actions.models import (
    ActionAttempt,
    ActionOperation,
    ActionPayload,
    ActionReceipt,
    ActionTransaction,
)
from actions.services.results import Outcome, TransactionState
from aetnaweb import access
from aetnaweb.access import Principal
from audit.canonical import canonical_json, digest, sha256_text
from audit.chain import utc_now_iso
from audit.models import AuditEvent
from audit.receipts import log_proof_for
from audit.services import append_event


def _load(transaction_id: Any) -> ActionTransaction:
    if not isinstance(transaction_id, str) or not transaction_id:
        raise TransactionNotFound(f"no guarded-action transaction {transaction_id!r}")
    txn = ActionTransaction.objects.filter(pk=transaction_id).first()
    if txn is None:
        raise TransactionNotFound(f"no guarded-action transaction {transaction_id!r}")
    return txn


def _load_for(principal: Principal, capability: str, transaction_id: Any) -> ActionTransaction:
    txn = _load(transaction_id)
    access.require(principal, capability, txn.subject_id)
    return txn


def _event(
    txn: ActionTransaction, event_type: str, actor: str, payload: dict[str, Any], **context: Any
) -> AuditEvent:
    # record_id carries the transaction ID so a transaction's events are one
    # indexed lookup; payloads hold IDs, digests, states and labels only (C-5).
    return append_event(
        subject=txn.subject_id,
        event_type=event_type,
        actor=actor,
        payload=payload,
        record_id=txn.id,
        **context,
    )


def _lost_race(transaction_id: str, expected: Sequence[str]) -> ConcurrentTransitionError:
    """The refusal for a compare-and-swap that matched no row, naming the state found instead."""
    current = (
        ActionTransaction.objects.filter(pk=transaction_id).values_list("state", flat=True).first()
    )
    return ConcurrentTransitionError(
        f"transaction {transaction_id} is {current}, expected {list(expected)}"
    )


def _transition(
    transaction_id: str, expected: Sequence[str], new_state: str, **fields: Any
) -> None:
    """Compare-and-swap: ``UPDATE ... WHERE state IN expected``; lose and nothing changes."""
    now = utc_now_iso()
    updates: dict[str, Any] = {"state": new_state, "updated_at": now, **fields}
    if new_state in formats.TERMINAL_STATES:
        updates["terminal_at"] = now
    changed = ActionTransaction.objects.filter(pk=transaction_id, state__in=list(expected)).update(
        **updates
    )
    if changed != 1:
        raise _lost_race(transaction_id, expected)


def _fence(transaction_id: str, expected: Sequence[str]) -> None:
    """Prove, inside the current transaction, that no one else (recover) took the run over."""
    changed = ActionTransaction.objects.filter(pk=transaction_id, state__in=list(expected)).update(
        updated_at=utc_now_iso()
    )
    if changed != 1:
        raise _lost_race(transaction_id, expected)


def _set_operation(operation_id: str, **fields: Any) -> None:
    ActionOperation.objects.filter(pk=operation_id).update(updated_at=utc_now_iso(), **fields)


def _store_payload(
    txn: ActionTransaction, operation_id: str, kind: str, payload: dict[str, Any]
) -> None:
    """Write (or rewrite) one payload; rewriting clears ``purged_at`` (PG-4)."""
    now = utc_now_iso()
    text = canonical_json(payload)
    payload_digest = sha256_text(text)  # = digest(payload), without encoding it twice
    updated = ActionPayload.objects.filter(operation_id=operation_id, kind=kind).update(
        payload=text, payload_digest=payload_digest, updated_at=now, purged_at=None
    )
    if not updated:
        ActionPayload.objects.create(
            transaction_id=txn.id,
            operation_id=operation_id,
            kind=kind,
            payload=text,
            payload_digest=payload_digest,
            created_at=now,
            updated_at=now,
        )


def _load_payload(operation_id: str, kind: str) -> dict[str, Any] | None:
    row = ActionPayload.objects.filter(operation_id=operation_id, kind=kind).first()
    if row is None or row.purged_at:
        return None
    value = json.loads(row.payload)
    return value if isinstance(value, dict) else None


def _error_digest(exc: BaseException) -> str:
    """EX-5: digest of type, message and exception-only traceback lines (never stored in clear)."""
    return digest(
        {
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exception_only(type(exc), exc),
        }
    )


def _next_attempt(operation_id: str, phase: str) -> int:
    numbers = ActionAttempt.objects.filter(operation_id=operation_id, phase=phase).values_list(
        "attempt_number", flat=True
    )
    return max(numbers, default=0) + 1


def _begin_attempt(
    txn: ActionTransaction,
    op: ActionOperation,
    *,
    phase: str,
    fenced_state: str,
    op_state: str,
    idempotency_key: str,
) -> tuple[int, str]:
    """Inside the caller's durable transaction: fence, record the attempt as executing, move the op.

    Execution (EX-2, EX-3) and compensation (CP-3) both make the attempt
    durable this way before the adapter is called.
    """
    number = _next_attempt(op.id, phase)
    attempt_key = formats.attempt_id(op.id, phase, number)
    _fence(txn.id, [fenced_state])
    ActionAttempt.objects.create(
        id=attempt_key,
        transaction_id=txn.id,
        operation_id=op.id,
        phase=phase,
        attempt_number=number,
        state=formats.ATTEMPT_EXECUTING,
        idempotency_key=idempotency_key,
        started_at=utc_now_iso(),
    )
    _set_operation(op.id, state=op_state)
    return number, attempt_key


def _issue_receipt(txn_id: str, terminal_state: str, actor: str) -> dict[str, Any]:
    """R-1..R-3: idempotent; bound to an ``action.receipt_issued`` event in the same transaction."""
    existing = (
        ActionReceipt.objects.filter(transaction_id=txn_id).order_by("-created_at", "-id").first()
    )
    if existing is not None:
        return json.loads(existing.receipt_json)
    txn = ActionTransaction.objects.get(pk=txn_id)
    if txn.state != terminal_state:
        raise ActionStateError(
            f"cannot issue {terminal_state} receipt for transaction in state {txn.state}"
        )
    operation_receipts = [
        {
            "operation_id": op.id,
            "adapter": op.adapter,
            "operation": op.operation,
            "state": op.state,
            "result_digest": op.result_digest,
            "compensation_digest": op.compensation_digest,
        }
        for op in ActionOperation.objects.filter(transaction_id=txn_id).order_by("ordinal")
    ]
    event = _event(
        txn,
        "action.receipt_issued",
        actor,
        {
            "transaction_id": txn.id,
            "plan_hash": txn.plan_hash,
            "terminal_state": terminal_state,
            "operations_digest": digest(operation_receipts),
        },
    )
    receipt: dict[str, Any] = {
        "format": formats.RECEIPT_FORMAT,
        "transaction_id": txn.id,
        "subject_id": txn.subject_id,
        "plan_hash": txn.plan_hash,
        "terminal_state": terminal_state,
        "operation_receipts": operation_receipts,
        "audit_event_id": event.event_id,
        "audit_event_hash": event.event_hash,
        "created_at": event.created_at,
        # Additive (issue 14): offline evidence that the event is in the signed log.
        "log_proof": log_proof_for(event),
    }
    receipt["receipt_sha256"] = formats.receipt_sha256(receipt)
    ActionReceipt.objects.create(
        id=formats.receipt_id(receipt["receipt_sha256"]),
        transaction_id=txn.id,
        terminal_state=terminal_state,
        receipt_json=canonical_json(receipt),
        receipt_sha256=receipt["receipt_sha256"],
        created_at=event.created_at,
    )
    return receipt


def _finish(
    txn: ActionTransaction,
    *,
    expected: Sequence[str],
    terminal_state: str,
    actor: str,
    events: Iterable[tuple[str, dict[str, Any]]] = (),
    durable: bool = True,
    **fields: Any,
) -> Outcome:
    """Enter a terminal state, append its events and issue the receipt: one transaction."""
    with db_transaction.atomic(durable=durable):
        _transition(txn.id, expected, terminal_state, **fields)
        for event_type, payload in events:
            _event(txn, event_type, actor, payload)
        receipt = _issue_receipt(txn.id, terminal_state, actor)
    return Outcome(transaction=_refreshed(txn.id), receipt=receipt)


def _refreshed(transaction_id: str) -> TransactionState:
    return TransactionState.load(transaction_id)


def _context_value(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_CONTEXT_LENGTH:
        raise ActionInputError(
            f"{name} must be a non-empty string of at most {MAX_CONTEXT_LENGTH} characters"
        )
    return value


def _turn_value(turn_id: Any) -> str | None:
    """P-9: an int turn is stored as ``t<int>``; a string as given."""
    if isinstance(turn_id, bool):
        raise ActionInputError("turn_id must be a string or an integer")
    if isinstance(turn_id, int):
        return f"t{turn_id}"
    return _context_value("turn_id", turn_id)


def _actor_label(principal: Principal, actor: str | None, default: str) -> str:
    """The audit actor by the shared rule (:func:`aetnaweb.access.audit_actor`), length-checked."""
    label = access.audit_actor(principal, actor, default=default)
    if not isinstance(label, str) or not label or len(label) > 150:
        raise ActionInputError("actor must be a non-empty string of at most 150 characters")
    return label
