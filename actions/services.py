"""Every write of the guarded-actions engine (guarded-actions-v1 A4-A16).

The life of a plan: ``stage`` records an exact, hashed world patch;
``approve`` (a person, signing on the server) or ``deny``/``abort`` decides;
``commit`` rechecks everything, records its intent before each effect, never
retries an ambiguous one, verifies, compensates what it can, and ends with a
receipt bound into the scope's audit chain; ``recover`` fences a run that
died. Audit events are appended in the same database transaction as the state
change they describe, and a terminal state commits together with its receipt
(decision 3).

Permissions (decision 5): ``stage`` needs STAGE; approve, deny, commit, abort,
recover and purge need APPROVE on the plan's scope; ``verify`` needs AUDIT or
APPROVE. The default principal is the trusted in-process caller.
"""

from __future__ import annotations

import json
import os
import sqlite3
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from django.db import IntegrityError
from django.db import transaction as db_transaction

from actions import formats
from actions.adapters import (
    ActionAdapter,
    Observation,
    PreparationContext,
    PreparedOperation,
    get_adapter,
)
from actions.approvals import NO_KEY_MESSAGE, ApprovalAuthority, configured_authority
from actions.errors import (
    ActionError,
    ActionInputError,
    ActionPolicyViolation,
    ActionStateError,
    AdapterDriftError,
    AdapterNotRegistered,
    ApprovalInvalid,
    ApprovalUnavailable,
    ConcurrentTransitionError,
    JournalError,
    JournalNotFound,
    NotDispatched,
    PayloadPurged,
    SeparationOfDutiesError,
    TransactionNotFound,
)
from actions.limits import MAX_CONTEXT_LENGTH, MAX_OWNER_LENGTH, MAX_REASON_LENGTH
from actions.models import (
    ActionApproval,
    ActionAttempt,
    ActionDependency,
    ActionEvidence,
    ActionOperation,
    ActionPayload,
    ActionReceipt,
    ActionResolution,
    ActionTransaction,
)
from actions.proposals import DEFAULT_POLICY, GuardPolicy, OperationProposal
from actions.selectors import resolve_authority
from actions.verification import verify_action
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.text import storable_text_arguments
from audit.canonical import CanonicalJSONError, canonical_json, digest, sha256_text
from audit.chain import utc_now_iso
from audit.models import AuditEvent
from audit.receipts import log_proof_for
from audit.services import append_event

# -- small shared steps -----------------------------------------------------------


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
) -> dict[str, Any]:
    """Enter a terminal state, append its events and issue the receipt: one transaction."""
    with db_transaction.atomic(durable=durable):
        _transition(txn.id, expected, terminal_state, **fields)
        for event_type, payload in events:
            _event(txn, event_type, actor, payload)
        receipt = _issue_receipt(txn.id, terminal_state, actor)
    return {"transaction": _refreshed(txn.id), "receipt": receipt}


def _refreshed(transaction_id: str) -> dict[str, Any]:
    return ActionTransaction.objects.get(pk=transaction_id).as_dict()


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


# -- stage (A4) --------------------------------------------------------------------


def _order_by_dependencies(proposals: list[OperationProposal]) -> list[OperationProposal]:
    """P-2: a stable topological sort; caller order wherever dependencies allow."""
    remaining = list(proposals)
    placed: set[str] = set()
    ordered: list[OperationProposal] = []
    while remaining:
        for index, proposal in enumerate(remaining):
            if all(dep in placed for dep in proposal.depends_on):
                ordered.append(proposal)
                placed.add(proposal.key)
                del remaining[index]
                break
        else:
            raise ActionInputError(
                "the dependency graph contains a cycle and cannot be ordered: "
                f"{[proposal.key for proposal in remaining]}"
            )
    return ordered


def _parse_operations(operations: Any) -> list[OperationProposal]:
    if isinstance(operations, (str, bytes, Mapping)) or not isinstance(operations, Iterable):
        raise ActionInputError("operations must be a list of operation objects")
    proposals = [OperationProposal.from_value(item) for item in operations]
    if not proposals:
        raise ActionInputError("a world patch needs at least one operation")
    keys = [proposal.key for proposal in proposals]
    duplicated = sorted({key for key in keys if keys.count(key) > 1})
    if duplicated:
        raise ActionInputError(f"operation keys must be unique; duplicated: {duplicated}")
    unknown = sorted({dep for p in proposals for dep in p.depends_on} - set(keys))
    if unknown:
        raise ActionInputError(f"unknown operation dependencies: {unknown}")
    return _order_by_dependencies(proposals)


def _require_resolved_authority(subject: Any, proposal: OperationProposal) -> None:
    """Enforce mode: every ``authorized_by`` item must resolve to stored memory, or nothing is staged.

    A claimed trust tier and ``attested`` flag alone are only the agent's word;
    the approver must be shown a message or record that really says it.
    Observe and preview keep unresolved claims, shown as unverified.
    """
    for item in proposal.evidence:
        if item.relation != formats.AUTHORIZED_BY:
            continue
        authority = resolve_authority(
            subject,
            kind=item.kind,
            ref_id=item.ref_id,
            digest_value=item.digest,
            trust_tier=item.trust_tier,
        )
        if not authority.resolved:
            raise ActionPolicyViolation(
                f"operation {proposal.key!r}: authorizing evidence {item.kind}:{item.ref_id} "
                f"does not resolve: {authority.summary}"
            )


@storable_text_arguments
def stage(
    *,
    scope: Any,
    operations: Any,
    mode: str = formats.MODE_ENFORCE,
    session_id: str | None = None,
    turn_id: str | int | None = None,
    principal: Principal,
    actor: str | None = None,
    policy: GuardPolicy | None = None,
) -> dict[str, Any]:
    """Record an exact, hashed plan; nothing is written unless every operation prepares and passes policy.

    Enforce mode waits for approval; observe and preview are recorded as
    ``staged`` and can never execute. Observe records the patch and its
    evidence only; preview and enforce also keep each adapter's prepared
    payload (the content and before-image the reviewer's diff is built from).
    Returns the WorldPatch (P-10).
    """
    subject = access.require(principal, access.STAGE, scope)
    subject_id = str(subject)
    actor_id = _actor_label(principal, actor, "agent")
    if mode not in formats.MODES:
        raise ActionInputError(f"unknown mode {mode!r}; use one of {', '.join(formats.MODES)}")
    if mode == formats.MODE_OFF:
        raise ActionInputError("guarded actions are disabled in off mode")
    ordered = _parse_operations(operations)
    session_value = _context_value("session_id", session_id)
    turn_value = _turn_value(turn_id)
    policy = policy or DEFAULT_POLICY

    # P-3: IDs exist before any adapter is called.
    transaction_id = formats.new_transaction_id()
    operation_ids = {proposal.key: formats.new_operation_id() for proposal in ordered}
    prepared_ops: list[tuple[OperationProposal, PreparedOperation, dict[str, Any], dict[str, str]]]
    prepared_ops = []
    for ordinal, proposal in enumerate(ordered):
        adapter = get_adapter(proposal.adapter)
        context = PreparationContext(
            transaction_id=transaction_id,
            operation_id=operation_ids[proposal.key],
            subject_id=subject_id,
            actor_id=actor_id,
        )
        try:
            prepared = adapter.prepare(proposal, context)
        except ActionError:
            raise
        except OSError as exc:
            raise ActionInputError(
                f"operation {proposal.key!r}: the {proposal.adapter} adapter could not read "
                f"its target: {exc.strerror or exc}"
            ) from exc
        if prepared.adapter != proposal.adapter or prepared.operation != proposal.operation:
            raise ActionInputError(
                f"operation {proposal.key!r}: mismatched prepared operation "
                f"{prepared.adapter}.{prepared.operation}"
            )
        if prepared.effect_class not in formats.EFFECT_CLASSES:
            raise ActionInputError(
                f"operation {proposal.key!r}: unknown effect class {prepared.effect_class!r}"
            )
        policy.check(
            mode=mode,
            key=proposal.key,
            effect_class=prepared.effect_class,
            evidence=proposal.evidence,
        )
        if mode == formats.MODE_ENFORCE:
            _require_resolved_authority(subject, proposal)
        try:
            digests = {
                "manifest_digest": digest(adapter.manifest()),
                "arguments_digest": digest(prepared.arguments),
                "preview_digest": digest(prepared.preview),
                "precondition_digest": digest(prepared.preconditions),
            }
        except CanonicalJSONError as exc:
            raise ActionInputError(f"operation {proposal.key!r}: {exc}") from exc
        hashed = formats.plan_operation(
            operation_id=operation_ids[proposal.key],
            key=proposal.key,
            ordinal=ordinal,
            adapter=proposal.adapter,
            operation=proposal.operation,
            effect_class=prepared.effect_class,
            depends_on=[operation_ids[dep] for dep in set(proposal.depends_on)],
            evidence=[item.as_dict() for item in proposal.evidence],
            **digests,
        )
        prepared_ops.append((proposal, prepared, hashed, digests))

    body = formats.plan_body(
        transaction_id=transaction_id,
        subject_id=subject_id,
        actor_id=actor_id,
        mode=mode,
        plan_version=formats.PLAN_VERSION,
        policy_hash=policy.policy_hash,
        operations=[hashed for _, _, hashed, _ in prepared_ops],
    )
    plan_hash = formats.plan_hash(body)
    state = formats.AWAITING_APPROVAL if mode == formats.MODE_ENFORCE else formats.STAGED
    now = utc_now_iso()
    # The person accountable for the proposal: the operator, or the agent token's owner.
    proposed_by_user_id = principal.owner_id if principal.is_token else principal.user_id

    with db_transaction.atomic():
        txn = ActionTransaction.objects.create(
            id=transaction_id,
            subject_id=subject_id,
            scope_tenant=subject.tenant,
            scope_user=subject.user,
            scope_project=subject.project,
            actor_id=actor_id,
            proposer_kind=principal.kind,
            proposed_by_user_id=proposed_by_user_id,
            proposed_by_token_id=principal.token_id,
            mode=mode,
            state=state,
            plan_version=formats.PLAN_VERSION,
            plan_hash=plan_hash,
            policy_hash=policy.policy_hash,
            session_id=session_value,
            turn_id=turn_value,
            created_at=now,
            updated_at=now,
        )
        evidence_rows: list[dict[str, Any]] = []
        for proposal, prepared, hashed, digests in prepared_ops:
            operation_id = hashed["id"]
            key = formats.idempotency_key(
                transaction_id=transaction_id,
                operation_id=operation_id,
                adapter=proposal.adapter,
                operation=proposal.operation,
                arguments_digest=digests["arguments_digest"],
            )
            ActionOperation.objects.create(
                id=operation_id,
                transaction=txn,
                operation_key=proposal.key,
                ordinal=hashed["ordinal"],
                adapter=proposal.adapter,
                operation=proposal.operation,
                effect_class=prepared.effect_class,
                idempotency_key=key,
                compensation_key=key + ":compensate",
                state=formats.OP_STAGED,
                selected=True,
                created_at=now,
                updated_at=now,
                **digests,
            )
        for proposal, prepared, hashed, _ in prepared_ops:
            operation_id = hashed["id"]
            for depends_on in hashed["depends_on"]:
                ActionDependency.objects.create(
                    operation_id=operation_id, depends_on_operation_id=depends_on
                )
            for item in proposal.evidence:
                evidence_id = formats.new_evidence_id()
                ActionEvidence.objects.create(
                    id=evidence_id,
                    transaction_id=txn.id,
                    operation_id=operation_id,
                    evidence_kind=item.kind,
                    ref_id=item.ref_id,
                    digest=item.digest,
                    relation=item.relation,
                    trust_tier=item.trust_tier,
                    attested=item.attested,
                )
                evidence_rows.append(
                    {"id": evidence_id, "operation_id": operation_id, **item.as_dict()}
                )
            if mode != formats.MODE_OBSERVE:
                _store_payload(txn, operation_id, formats.PAYLOAD_PREPARED, prepared.as_payload())
        _event(
            txn,
            "action.proposed",
            actor_id,
            {
                "transaction_id": transaction_id,
                "format": formats.WORLD_PATCH_FORMAT,
                "mode": mode,
                "state": state,
                "plan_hash": plan_hash,
                "policy_hash": policy.policy_hash,
                "operations": [
                    {key: value for key, value in hashed.items() if key != "evidence"}
                    for hashed in body["operations"]
                ],
                "evidence": evidence_rows,
            },
            session_id=session_value,
            turn_id=turn_value,
        )
    return {
        "transaction_id": transaction_id,
        "subject_id": subject_id,
        "mode": mode,
        "state": state,
        "plan_version": formats.PLAN_VERSION,
        "plan_hash": plan_hash,
        "operations": body["operations"],
        "created_at": now,
    }


# -- approve / deny / abort (A5, A9) -------------------------------------------------


def _check_separation_of_duties(txn: ActionTransaction, principal: Principal) -> None:
    if txn.proposed_by(principal):
        raise SeparationOfDutiesError(
            f"{principal.label} proposed this plan (or owns the agent that did); "
            "another approver must approve it"
        )


@storable_text_arguments
def approve(
    *,
    transaction_id: str,
    principal: Principal,
    approval: Mapping[str, Any] | None = None,
    authority: ApprovalAuthority | None = None,
) -> dict[str, Any]:
    """Sign (on the server, with the configured key) and record approval of this exact plan.

    The approver is the authenticated person (``principal.label``), never
    free text; the proposer and the proposing agent's owner are refused. A
    pre-signed ``approval`` may be passed (it must name the same approver and
    verify); either way exactly one approval row can exist (AP-3).
    """
    authority = authority or configured_authority(required=True)
    assert authority is not None  # configured_authority(required=True) raises instead
    txn = _load_for(principal, access.APPROVE, transaction_id)
    if not principal.is_operator or principal.user_id is None:
        raise SeparationOfDutiesError(
            "approval must be given by a signed-in person with the approver role, "
            f"not by a {principal.kind} principal"
        )
    if txn.state != formats.AWAITING_APPROVAL:
        raise ActionStateError(f"transaction {txn.id} is {txn.state}, not awaiting_approval")
    _check_separation_of_duties(txn, principal)
    if approval is None:
        document = authority.issue(
            transaction_id=txn.id, plan_hash=txn.plan_hash, approver=principal.label
        )
    else:
        document = dict(approval)
        if document.get("approver") != principal.label:
            raise ApprovalInvalid(
                "approval signature, scope, plan hash, or expiry is invalid: it names a "
                "different approver than the signed-in user"
            )
    if not authority.verify(document, transaction_id=txn.id, plan_hash=txn.plan_hash):
        raise ApprovalInvalid("approval signature, scope, plan hash, or expiry is invalid")
    approval_digest = formats.approval_digest(document)
    approval_id = formats.approval_id(document["nonce"])
    try:
        with db_transaction.atomic():
            _transition(txn.id, [formats.AWAITING_APPROVAL], formats.APPROVED)
            ActionApproval.objects.create(
                id=approval_id,
                transaction=txn,
                plan_hash=document["plan_hash"],
                approver_principal=document["approver"],
                approver_user_id=principal.user_id,
                decision="approved",
                issued_at=document["issued_at"],
                expires_at=document["expires_at"],
                nonce=document["nonce"],
                signature=document["signature"],
                approval_digest=approval_digest,
                created_at=utc_now_iso(),
            )
            _event(
                txn,
                "action.approved",
                principal.label,
                {
                    "transaction_id": txn.id,
                    "approval_id": approval_id,
                    "plan_hash": txn.plan_hash,
                    "approval_digest": approval_digest,
                    "approver": principal.label,
                    "expires_at": document["expires_at"],
                },
            )
    except IntegrityError as exc:
        raise ApprovalInvalid(
            "this approval's nonce was already used; it cannot be replayed"
        ) from exc
    return _refreshed(txn.id)


@storable_text_arguments
def abort(
    *,
    transaction_id: str,
    principal: Principal,
    reason: str = "",
    actor: str | None = None,
    _category: str = "aborted",
) -> dict[str, Any]:
    """Abort a plan that has not started executing; returns ``{transaction, receipt}``.

    The reason text stays on the transaction row; the audit event records
    only its digest and a category (``aborted`` or ``denied``).
    """
    txn = _load_for(principal, access.APPROVE, transaction_id)
    if not isinstance(reason, str) or len(reason) > MAX_REASON_LENGTH:
        raise ActionInputError(f"a reason must be text of at most {MAX_REASON_LENGTH} characters")
    reason = reason.strip()
    if txn.state not in formats.ABORTABLE_STATES:
        raise ActionStateError(f"cannot abort from {txn.state}")
    label = _actor_label(principal, actor, "user")
    return _finish(
        txn,
        expected=formats.ABORTABLE_STATES,
        terminal_state=formats.ABORTED,
        actor=label,
        events=[
            (
                "action.aborted",
                {
                    "plan_hash": txn.plan_hash,
                    "aborted_by": label,
                    "reason_category": _category,
                    "reason_digest": digest(reason) if reason else None,
                },
            )
        ],
        durable=False,
        abort_reason=reason,
    )


@storable_text_arguments
def deny(*, transaction_id: str, reason: str, principal: Principal) -> dict[str, Any]:
    """A reviewer's refusal: an abort with a required reason, recorded as category ``denied``."""
    if not isinstance(reason, str) or not reason.strip():
        raise ActionInputError("a denial needs a reason")
    return abort(
        transaction_id=transaction_id, principal=principal, reason=reason, _category="denied"
    )


# -- commit (A6-A8) -------------------------------------------------------------------


def _latest_approval(txn: ActionTransaction) -> ActionApproval | None:
    return (
        ActionApproval.objects.filter(transaction_id=txn.id).order_by("-created_at", "-id").first()
    )


def commit(
    *,
    transaction_id: str,
    principal: Principal,
    authority: ApprovalAuthority | None = None,
) -> dict[str, Any]:
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
    operations = list(ActionOperation.objects.filter(transaction_id=txn.id).order_by("ordinal"))
    adapters: dict[str, ActionAdapter] = {}
    for op in operations:
        if op.adapter not in adapters:
            adapters[op.adapter] = get_adapter(op.adapter)
        if digest(adapters[op.adapter].manifest()) != op.manifest_digest:
            raise AdapterDriftError(
                f"adapter manifest changed after approval (operation {op.operation_key!r}, "
                f"adapter {op.adapter!r}); abort this plan and stage it again"
            )
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

    # CM-7: pre-flight revalidation; the first failure aborts with a receipt, nothing runs.
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


def _execute_plan(
    txn: ActionTransaction,
    operations: list[ActionOperation],
    adapters: dict[str, ActionAdapter],
    prepared: dict[str, PreparedOperation],
) -> dict[str, Any]:
    """A7: the per-operation loop, in ordinal order."""
    actor = txn.actor_id
    verified: list[ActionOperation] = []
    running = [formats.COMMITTING, formats.COMPENSATING]
    for op in operations:
        adapter = adapters[op.adapter]
        prep = prepared[op.id]

        # EX-1, with decision 1: an exception here is an unknown, not a crash.
        try:
            observation = adapter.revalidate(prep)
        except Exception as exc:
            error_digest = _error_digest(exc)
            with db_transaction.atomic(durable=True):
                _fence(txn.id, [formats.COMMITTING])
                _set_operation(op.id, state=formats.OP_UNCERTAIN)
                _event(
                    txn,
                    "action.effect_uncertain",
                    actor,
                    {
                        "operation_id": op.id,
                        "attempt": None,
                        "phase": "revalidate",
                        "error_type": type(exc).__name__,
                        "error_digest": error_digest,
                    },
                )
            _compensate(txn, verified, adapters, prepared)
            return _finish(
                txn,
                expected=running,
                terminal_state=formats.UNCERTAIN,
                actor=actor,
                events=[
                    (
                        "action.transaction_uncertain",
                        {"operation_id": op.id, "error_digest": error_digest},
                    )
                ],
                error_code="revalidation_raised",
                error_digest=error_digest,
            )
        if not observation.ok:
            outcome = _compensate(txn, verified, adapters, prepared)
            return _finish(
                txn,
                expected=running,
                terminal_state=outcome,
                actor=actor,
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

        # EX-2, EX-3: the intent is durable before the adapter is called.
        number = _next_attempt(op.id, formats.PHASE_EXECUTE)
        attempt_key = formats.attempt_id(op.id, formats.PHASE_EXECUTE, number)
        with db_transaction.atomic(durable=True):
            _fence(txn.id, [formats.COMMITTING])
            ActionAttempt.objects.create(
                id=attempt_key,
                transaction_id=txn.id,
                operation_id=op.id,
                phase=formats.PHASE_EXECUTE,
                attempt_number=number,
                state=formats.ATTEMPT_EXECUTING,
                idempotency_key=op.idempotency_key,
                started_at=utc_now_iso(),
            )
            _set_operation(op.id, state=formats.OP_EXECUTING)
            _event(
                txn,
                "action.effect_executing",
                actor,
                {"operation_id": op.id, "attempt": number, "idempotency_key": op.idempotency_key},
            )

        # EX-4: no database transaction is open while the world changes.
        try:
            execution_receipt = adapter.execute(prep, op.idempotency_key)
            canonical_json(execution_receipt)
            if not isinstance(execution_receipt, dict):
                raise TypeError("adapter.execute must return a JSON object")
        except NotDispatched as exc:
            # Decision 2: the adapter knows nothing happened.
            error_digest = _close_failed_execution(txn, op, attempt_key, number, exc)
            outcome = _compensate(txn, verified, adapters, prepared)
            return _finish(
                txn,
                expected=running,
                terminal_state=outcome,
                actor=actor,
                error_code="not_dispatched",
                error_digest=error_digest,
            )
        except BaseException as exc:
            # EX-5: any other failure leaves the outcome unknown; never retried.
            error_digest = _close_failed_execution(txn, op, attempt_key, number, exc)
            _compensate(txn, verified, adapters, prepared)
            result = _finish(
                txn,
                expected=running,
                terminal_state=formats.UNCERTAIN,
                actor=actor,
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
            return result

        # EX-6, with decision 1: a verify that raises is an unverified effect.
        verify_error: BaseException | None = None
        try:
            check = adapter.verify(prep, execution_receipt)
        except Exception as exc:
            verify_error = exc
            check = Observation(False, "verification raised", {"error": _error_digest(exc)})
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
                actor,
                {
                    "operation_id": op.id,
                    "attempt": number,
                    "result_digest": result_digest,
                    "observation_digest": check.digest,
                    "verified": check.ok,
                },
            )
        if not check.ok:
            # EX-7
            _compensate(txn, verified, adapters, prepared)
            return _finish(
                txn,
                expected=running,
                terminal_state=formats.UNCERTAIN,
                actor=actor,
                events=[
                    (
                        "action.transaction_uncertain",
                        {"operation_id": op.id, "observation_digest": check.digest},
                    )
                ],
                error_code="verification_raised" if verify_error else "postcondition_unverified",
                error_digest=check.digest,
            )
        verified.append(op)

    # EX-8
    return _finish(
        txn,
        expected=[formats.COMMITTING],
        terminal_state=formats.COMMITTED,
        actor=actor,
        events=[
            (
                "action.committed",
                {"plan_hash": txn.plan_hash, "operation_ids": [op.id for op in operations]},
            )
        ],
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


def _compensate(
    txn: ActionTransaction,
    applied: list[ActionOperation],
    adapters: dict[str, ActionAdapter],
    prepared: dict[str, PreparedOperation],
) -> str:
    """A8: undo verified operations in reverse; ``compensated`` or ``partial``."""
    if not applied:
        return formats.COMPENSATED  # CP-1: nothing to undo, no event
    actor = txn.actor_id
    with db_transaction.atomic(durable=True):
        _transition(txn.id, [formats.COMMITTING], formats.COMPENSATING)
        _event(
            txn,
            "action.compensating",
            actor,
            {"operation_ids": [op.id for op in reversed(applied)]},
        )
    all_restored = True
    for op in reversed(applied):
        adapter = adapters[op.adapter]
        number = _next_attempt(op.id, formats.PHASE_COMPENSATE)
        attempt_key = formats.attempt_id(op.id, formats.PHASE_COMPENSATE, number)
        with db_transaction.atomic(durable=True):
            _fence(txn.id, [formats.COMPENSATING])
            ActionAttempt.objects.create(
                id=attempt_key,
                transaction_id=txn.id,
                operation_id=op.id,
                phase=formats.PHASE_COMPENSATE,
                attempt_number=number,
                state=formats.ATTEMPT_EXECUTING,
                idempotency_key=op.compensation_key,
                started_at=utc_now_iso(),
            )
            _set_operation(op.id, state=formats.OP_COMPENSATING)
        error: Exception | None = None
        compensation_receipt: dict[str, Any] = {}
        try:
            execution_receipt = _load_payload(op.id, formats.PAYLOAD_EXECUTION_RECEIPT) or {}
            compensation_receipt = adapter.compensate(
                prepared[op.id], execution_receipt, op.compensation_key
            )
            canonical_json(compensation_receipt)
            check = adapter.verify_compensation(prepared[op.id], compensation_receipt)
        except Exception as exc:
            error = exc
            check = Observation(False, "compensation raised", {"error": _error_digest(exc)})
        with db_transaction.atomic(durable=True):
            _fence(txn.id, [formats.COMPENSATING])
            if check.ok:
                compensation_digest = digest(compensation_receipt)
                ActionAttempt.objects.filter(pk=attempt_key).update(
                    state=formats.ATTEMPT_VERIFIED, finished_at=utc_now_iso()
                )
                _store_payload(
                    txn, op.id, formats.PAYLOAD_COMPENSATION_RECEIPT, compensation_receipt
                )
                _set_operation(
                    op.id, state=formats.OP_COMPENSATED, compensation_digest=compensation_digest
                )
                _event(
                    txn,
                    "action.compensation_verified",
                    actor,
                    {
                        "operation_id": op.id,
                        "attempt": number,
                        "compensation_digest": compensation_digest,
                        "observation_digest": check.digest,
                    },
                )
            else:
                all_restored = False
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
                    actor,
                    {
                        "operation_id": op.id,
                        "attempt": number,
                        "error_type": error_type,
                        "error_digest": error_digest,
                    },
                )
    return formats.COMPENSATED if all_restored else formats.PARTIAL


# -- recover (A10) ----------------------------------------------------------------------


def recover(
    *, transaction_id: str, principal: Principal, actor: str | None = None
) -> dict[str, Any]:
    """Fence a run that died mid-commit, then sweep what its crashed writes left on disk.

    The result is the fenced transaction and its receipt, plus ``leftovers``:
    each temporary file an adapter's interrupted write left beside its target
    (the filesystem adapter's ``.<name>.<tag>.<random>.aetnaweb-tmp``), and
    whether it was removed. Removal happens only after the fence committed:
    from then on no run of these operations can rename the file into place.
    """
    result = _fence_interrupted_run(transaction_id=transaction_id, principal=principal, actor=actor)
    result["leftovers"] = _sweep_leftovers(str(result["transaction"]["transaction_id"]))
    return result


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
) -> dict[str, Any]:
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
ATTENTION_STATES = (formats.UNCERTAIN, formats.RECOVERY_REQUIRED)


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


@db_transaction.atomic
def record_resolution(
    *,
    transaction_id: str,
    outcome: str,
    note: str,
    owner: str,
    principal: Principal,
    actor: str | None = None,
) -> dict[str, Any]:
    """Close an uncertain or recovery_required transaction in the attention queue, audited.

    The transaction keeps its terminal state (ST-1); a resolution records what
    a person found in the world, the follow-up owner and a note (its digest in
    the audit chain, ``action.resolution_recorded``). One per transaction.
    """
    txn = _load_for(principal, access.APPROVE, transaction_id)
    if outcome not in RESOLUTION_OUTCOMES:
        raise ActionInputError(
            f"outcome must be one of {', '.join(RESOLUTION_OUTCOMES)}, not {str(outcome)[:40]!r}"
        )
    note = _clean_text("a note", note, limit=MAX_REASON_LENGTH)
    owner = _clean_text("an owner", owner, limit=MAX_OWNER_LENGTH)
    if "\n" in owner or "\r" in owner or "\t" in owner:
        raise ActionInputError("an owner is one line: a name or a team")
    label = _actor_label(principal, actor, "operator")
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
    return {
        "transaction_id": txn.id,
        "state": txn.state,
        "outcome": resolution.outcome,
        "owner": resolution.owner,
        "resolved_by": resolution.resolved_by,
        "audit_event_id": event.event_id,
        "created_at": now,
    }


# -- verify, purge (A11, A14) ----------------------------------------------------------


def verify(
    *,
    transaction_id: str,
    principal: Principal,
    authority: ApprovalAuthority | None = None,
) -> dict[str, Any]:
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
    return verify_action(txn.id, authority=authority)


@db_transaction.atomic
def purge_payloads(
    *, transaction_id: str, principal: Principal, actor: str | None = None
) -> dict[str, Any]:
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
    return {"transaction_id": txn.id, "purged_count": purged, "audit_event_id": event.event_id}


# -- import-journal (A16) -------------------------------------------------------------

JOURNAL_TRANSACTION_COLUMNS = frozenset(
    {"txn_id", "state", "created_at", "updated_at", "replayed_from", "dry_run", "client_id"}
)
JOURNAL_EFFECT_COLUMNS = frozenset(
    {
        "txn_id",
        "idx",
        "effect_id",
        "tool",
        "resource",
        "reversible",
        "status",
        "args",
        "snapshot",
        "result",
        "read_keys",
        "write_keys",
        "actor",
        "ts",
    }
)


def _json_digest(raw: Any) -> Any:
    """IJ-4: parse JSON text first; invalid JSON becomes ``{invalid_json_digest}``; null stays null."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return digest(raw)
    try:
        return digest(json.loads(raw))
    except ValueError:
        return {"invalid_json_digest": digest(raw)}


def _optional_digest(value: Any) -> str | None:
    return None if value is None else digest(value)


def _open_journal(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return connection


def _journal_columns(connection: sqlite3.Connection, table: str) -> set[str] | None:
    rows = connection.execute(f"PRAGMA table_info({table})").fetchall()
    return {row["name"] for row in rows} or None


def import_journal(
    *,
    scope: Any,
    path: str | os.PathLike[str],
    principal: Principal,
    actor: str = "journal-importer",
    source_id: str | None = None,
) -> dict[str, Any]:
    """Record an external transaction journal as unverified, digest-only evidence.

    One ``action.source_imported`` event per journal transaction, deduplicated
    by (source, transaction ID); no action rows are created. The whole import
    is one database transaction, so a failure leaves nothing half-imported.
    """
    subject = access.require(principal, access.WRITE, scope)
    subject_id = str(subject)
    label = _actor_label(principal, actor, "journal-importer")
    journal = Path(path)
    if not journal.is_file():
        raise JournalNotFound(f"transaction journal not found (not a file): {str(path)!r}")
    source = source_id or str(journal.resolve())
    source_id_digest = digest(source)
    try:
        connection = _open_journal(journal)
    except sqlite3.Error as exc:
        raise JournalError(f"not a compatible transaction journal; cannot open it: {exc}") from exc
    try:
        try:
            tables = {
                row["name"]
                for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"not a compatible transaction journal; {exc}") from exc
        missing_tables = sorted({"transactions", "effects"} - tables)
        if missing_tables:
            raise JournalError(
                f"not a compatible transaction journal; missing tables: {missing_tables}"
            )
        problems = []
        for table, required in (
            ("transactions", JOURNAL_TRANSACTION_COLUMNS),
            ("effects", JOURNAL_EFFECT_COLUMNS),
        ):
            missing = sorted(required - (_journal_columns(connection, table) or set()))
            if missing:
                problems.append(f"{table} missing columns: {missing}")
        if problems:
            raise JournalError("not a compatible transaction journal; " + "; ".join(problems))
        transactions = connection.execute(
            "SELECT txn_id, state, created_at, updated_at, replayed_from, dry_run, client_id "
            "FROM transactions ORDER BY created_at, txn_id"
        ).fetchall()
        effects_by_txn: dict[str, list[sqlite3.Row]] = {}
        for row in connection.execute(
            "SELECT txn_id, idx, effect_id, tool, resource, reversible, status, args, snapshot, "
            "result, read_keys, write_keys, actor, ts FROM effects ORDER BY txn_id, idx"
        ):
            effects_by_txn.setdefault(str(row["txn_id"]), []).append(row)
    finally:
        connection.close()

    imported: list[dict[str, Any]] = []
    skipped: list[str] = []
    with db_transaction.atomic():
        seen: set[str] = set()
        for payload_text in AuditEvent.objects.filter(
            subject_id=subject_id, event_type="action.source_imported"
        ).values_list("payload", flat=True):
            payload = json.loads(payload_text)
            if payload.get("source_id_digest") == source_id_digest:
                seen.add(str(payload.get("source_transaction_id")))
        for row in transactions:
            source_txn_id = str(row["txn_id"])
            if source_txn_id in seen:
                skipped.append(source_txn_id)
                continue
            effects = [
                {
                    "index": effect["idx"],
                    "effect_id": effect["effect_id"],
                    "tool": effect["tool"],
                    "resource": effect["resource"],
                    "reversible_claim": bool(effect["reversible"]),
                    "status_claim": effect["status"],
                    "args_digest": _json_digest(effect["args"]),
                    "snapshot_digest": _json_digest(effect["snapshot"]),
                    "result_digest": _json_digest(effect["result"]),
                    "read_keys_digest": _json_digest(effect["read_keys"]),
                    "write_keys_digest": _json_digest(effect["write_keys"]),
                    "claimed_actor_digest": _optional_digest(effect["actor"]),
                    "timestamp": effect["ts"],
                }
                for effect in effects_by_txn.get(source_txn_id, [])
            ]
            event = append_event(
                subject=subject_id,
                event_type="action.source_imported",
                actor=label,
                payload={
                    "provider": "external_transaction_journal",
                    "evidence_status": "unverified_operational_journal",
                    "source_id_digest": source_id_digest,
                    "source_transaction_id": source_txn_id,
                    "source_state": row["state"],
                    "created_at": row["created_at"],
                    "updated_at": row["updated_at"],
                    "replayed_from_digest": _optional_digest(row["replayed_from"]),
                    "client_id_digest": _optional_digest(row["client_id"]),
                    "dry_run": bool(row["dry_run"]),
                    "effects": effects,
                    "effects_digest": digest(effects),
                },
            )
            seen.add(source_txn_id)
            imported.append(
                {
                    "source_transaction_id": source_txn_id,
                    "audit_event_id": event.event_id,
                    "audit_event_hash": event.event_hash,
                    "effect_count": len(effects),
                }
            )
    return {
        "source_id_digest": source_id_digest,
        "imported": imported,
        "skipped_transaction_ids": skipped,
    }
