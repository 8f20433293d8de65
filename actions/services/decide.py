"""Decide (A5, A9): approve with a server-side signature, deny, abort."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError
from django.db import transaction as db_transaction

from actions import formats
from actions.approvals import ApprovalAuthority, configured_authority
from actions.errors import (
    ActionInputError,
    ActionStateError,
    ApprovalInvalid,
    SeparationOfDutiesError,
)
from actions.limits import MAX_REASON_LENGTH
from actions.models import (
    ActionApproval,
    ActionTransaction,
)
from actions.services._ledger import (
    _actor_label,
    _event,
    _finish,
    _load_for,
    _refreshed,
    _transition,
)
from actions.services.results import Outcome, TransactionState
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest
from audit.chain import utc_now_iso


def _check_separation_of_duties(txn: ActionTransaction, principal: Principal) -> None:
    if txn.proposed_by(principal):
        raise SeparationOfDutiesError(
            f"{principal.label} proposed this plan (or owns the agent that did); "
            "another approver must approve it"
        )


def _approval_document(
    txn: ActionTransaction,
    principal: Principal,
    approval: Mapping[str, Any] | None,
    authority: ApprovalAuthority,
) -> dict[str, Any]:
    """The approval to record: signed now for ``principal``, or the pre-signed one if it
    names them; either way it must verify for this transaction's plan hash."""
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
    return document


def _record_approval(
    txn: ActionTransaction, principal: Principal, document: dict[str, Any]
) -> None:
    """AWAITING_APPROVAL to APPROVED, the approval row and its audit event, together."""
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


@storable_text_arguments
def approve(
    *,
    transaction_id: str,
    principal: Principal,
    approval: Mapping[str, Any] | None = None,
    authority: ApprovalAuthority | None = None,
) -> TransactionState:
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
    document = _approval_document(txn, principal, approval, authority)
    _record_approval(txn, principal, document)
    return _refreshed(txn.id)


@storable_text_arguments
def abort(
    *,
    transaction_id: str,
    principal: Principal,
    reason: str = "",
    actor: str | None = None,
    _category: str = "aborted",
) -> Outcome:
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
def deny(*, transaction_id: str, reason: str, principal: Principal) -> Outcome:
    """A reviewer's refusal: an abort with a required reason, recorded as category ``denied``."""
    if not isinstance(reason, str) or not reason.strip():
        raise ActionInputError("a denial needs a reason")
    return abort(
        transaction_id=transaction_id, principal=principal, reason=reason, _category="denied"
    )
