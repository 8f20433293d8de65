"""The in-package verifier (V-1): recorded structure and cryptographic bindings.

It recomputes the plan hash from the operations, dependencies and evidence
tables, checks every approval's digest (and, given an authority, its
signature at its own ``issued_at``), checks every receipt against its digest
and its ``action.receipt_issued`` event, checks the subject's audit chain, and
requires a receipt for a terminal transaction. Like the standalone
``tools/verify_actions.py`` it also requires the ``action.proposed`` event
that recorded the plan hash, so the two verifiers agree.

It cannot prove that a remote effect happened (V-3).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from actions import formats
from actions.approvals import ApprovalAuthority, approval_window
from actions.models import (
    ActionApproval,
    ActionDependency,
    ActionEvidence,
    ActionOperation,
    ActionPayload,
    ActionReceipt,
    ActionTransaction,
)
from aetnaweb.access import system_principal
from audit.canonical import digest, sha256_text
from audit.models import AuditEvent
from audit.receipts import server_log_proof_failures
from audit.verification import verify_subject


def subject_chain_valid(subject_id: str) -> bool:
    """The chain rule for one subject, by the audit layer's own verifier (one definition)."""
    return verify_subject(subject_id, principal=system_principal()).ok


def recompute_plan(txn: ActionTransaction) -> dict[str, Any]:
    """The world-patch body rebuilt from the tables (not from any stored copy)."""
    operations = list(ActionOperation.objects.filter(transaction_id=txn.id).order_by("ordinal"))
    op_ids = [op.id for op in operations]
    depends: dict[str, list[str]] = defaultdict(list)
    for operation_id, depends_on in ActionDependency.objects.filter(
        operation_id__in=op_ids
    ).values_list("operation_id", "depends_on_operation_id"):
        depends[operation_id].append(depends_on)
    evidence: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ActionEvidence.objects.filter(operation_id__in=op_ids):
        evidence[row.operation_id].append(
            {
                "kind": row.evidence_kind,
                "ref_id": row.ref_id,
                "digest": row.digest,
                "relation": row.relation,
                "trust_tier": row.trust_tier,
                "attested": row.attested,
            }
        )
    hashed = [
        formats.plan_operation(
            operation_id=op.id,
            key=op.operation_key,
            ordinal=op.ordinal,
            adapter=op.adapter,
            operation=op.operation,
            effect_class=op.effect_class,
            arguments_digest=op.arguments_digest,
            preview_digest=op.preview_digest,
            precondition_digest=op.precondition_digest,
            manifest_digest=op.manifest_digest,
            depends_on=depends[op.id],
            evidence=evidence[op.id],
        )
        for op in operations
    ]
    return formats.plan_body(
        transaction_id=txn.id,
        subject_id=txn.subject_id,
        actor_id=txn.actor_id,
        mode=txn.mode,
        plan_version=txn.plan_version,
        policy_hash=txn.policy_hash,
        operations=hashed,
    )


PAYLOAD_DIGEST_FAILURE = "action payload {op} {kind} does not match its stored digest"
PAYLOAD_PLAN_FAILURE = "action payload {op} prepared does not match the digests its plan hash binds"


def prepared_matches_operation(payload: Any, op: dict[str, Any]) -> bool:
    """A prepared payload agrees with the operation row's hashed digests, adapter and name.

    The plan hash binds those digests, so a payload that matches them is the
    payload that was approved; commit refuses anything else (CM-6) and the
    verifiers must say so too.
    """
    if not isinstance(payload, dict):
        return False
    try:
        return (
            digest(payload.get("arguments")) == op["arguments_digest"]
            and digest(payload.get("preview")) == op["preview_digest"]
            and digest(payload.get("preconditions")) == op["precondition_digest"]
            and payload.get("adapter") == op["adapter"]
            and payload.get("operation") == op["operation"]
        )
    except ValueError:  # not canonical-JSON serializable: cannot be what was hashed
        return False


def payload_failures(txn: ActionTransaction) -> list[str]:
    """Each unpurged payload recomputes to its digest; each prepared one to the plan's digests."""
    failures = []
    rows = ActionPayload.objects.filter(transaction_id=txn.id, purged_at__isnull=True).order_by(
        "operation_id", "kind"
    )
    # One query: the operation's hashed digests come along through the join.
    fields = ("adapter", "operation", "arguments_digest", "preview_digest", "precondition_digest")
    for row in rows.values(
        "operation_id", "kind", "payload", "payload_digest", *(f"operation__{f}" for f in fields)
    ):
        if sha256_text(row["payload"]) != row["payload_digest"]:
            failures.append(PAYLOAD_DIGEST_FAILURE.format(op=row["operation_id"], kind=row["kind"]))
        if row["kind"] != formats.PAYLOAD_PREPARED:
            continue
        try:
            payload = json.loads(row["payload"])
        except ValueError:
            payload = None
        op = {name: row[f"operation__{name}"] for name in fields}
        if not prepared_matches_operation(payload, op):
            failures.append(PAYLOAD_PLAN_FAILURE.format(op=row["operation_id"]))
    return failures


def _proposed_event_matches(txn: ActionTransaction) -> bool:
    for payload_text in AuditEvent.objects.filter(
        subject_id=txn.subject_id, event_type="action.proposed", record_id=txn.id
    ).values_list("payload", flat=True):
        try:
            payload = json.loads(payload_text)
        except ValueError:
            continue
        if payload.get("transaction_id") == txn.id and payload.get("plan_hash") == txn.plan_hash:
            return True
    return False


def verify_action(
    transaction_id: str, *, authority: ApprovalAuthority | None = None
) -> dict[str, Any]:
    """V-1: ``{valid, transaction_id, state, plan_hash, failures}``; never raises for bad data."""
    txn = ActionTransaction.objects.filter(pk=transaction_id).first()
    if txn is None:
        return {
            "valid": False,
            "transaction_id": transaction_id,
            "state": None,
            "plan_hash": None,
            "failures": ["transaction not found"],
        }
    failures: list[str] = []
    if not subject_chain_valid(txn.subject_id):
        failures.append("subject audit chain is invalid")
    if formats.plan_hash(recompute_plan(txn)) != txn.plan_hash:
        failures.append("persisted action plan does not match its plan hash")
    if not _proposed_event_matches(txn):
        failures.append("no matching action.proposed audit event")
    failures.extend(payload_failures(txn))

    for approval in ActionApproval.objects.filter(transaction_id=txn.id):
        document = approval.as_approval()
        if approval.plan_hash != txn.plan_hash:
            failures.append("approval plan hash does not match transaction")
        if formats.approval_digest(document) != approval.approval_digest:
            failures.append("approval digest is invalid")
        if authority is not None:
            window = approval_window(document)
            issued_at: datetime | None = window[0] if window else None
            if issued_at is None or not authority.verify(
                document, transaction_id=txn.id, plan_hash=approval.plan_hash, at=issued_at
            ):
                failures.append("approval signature is invalid")

    receipts = list(ActionReceipt.objects.filter(transaction_id=txn.id))
    for row in receipts:
        failures.extend(_receipt_failures(txn, row))
    if txn.state in formats.TERMINAL_STATES and not receipts:
        failures.append("terminal transaction has no receipt")
    return {
        "valid": not failures,
        "transaction_id": txn.id,
        "state": txn.state,
        "plan_hash": txn.plan_hash,
        "failures": failures,
    }


def _receipt_failures(txn: ActionTransaction, row: ActionReceipt) -> list[str]:
    try:
        receipt = json.loads(row.receipt_json)
    except ValueError:
        return ["action receipt digest is invalid"]
    if not isinstance(receipt, dict) or formats.receipt_sha256(receipt) != receipt.get(
        "receipt_sha256"
    ):
        return ["action receipt digest is invalid"]
    failures: list[str] = []
    # receipt_sha256 is unkeyed: a field added with the digest recomputed is
    # caught only by refusing fields the format does not define.
    extra = sorted(str(name) for name in receipt if name not in formats.ALLOWED_RECEIPT_FIELDS)
    if extra:
        failures.append(
            f"action receipt holds fields its format does not define: {', '.join(extra)}"
        )
    event = AuditEvent.objects.filter(
        event_id=receipt.get("audit_event_id"), subject_id=txn.subject_id
    ).first()
    if event is None or event.event_hash != receipt.get("audit_event_hash"):
        failures.append("action receipt is not bound to its audit event")
    else:
        try:
            payload = json.loads(event.payload)
        except ValueError:
            payload = {}
        expected = {
            "transaction_id": receipt.get("transaction_id"),
            "plan_hash": receipt.get("plan_hash"),
            "terminal_state": receipt.get("terminal_state"),
            "operations_digest": digest(receipt.get("operation_receipts")),
        }
        if event.event_type != "action.receipt_issued" or any(
            payload.get(key) != value for key, value in expected.items()
        ):
            failures.append("action receipt content does not match its audit event")
        if receipt.get("created_at") != event.created_at:
            failures.append("action receipt created_at is not the time of its audit event")
    if "log_proof" in receipt:
        failures.extend(
            server_log_proof_failures(receipt["log_proof"], str(receipt.get("audit_event_hash")))
        )
    if receipt.get("transaction_id") != txn.id:
        failures.append("action receipt content does not match its audit event")
    if receipt.get("plan_hash") != txn.plan_hash:
        failures.append("action receipt plan hash does not match transaction")
    if receipt.get("terminal_state") != txn.state:
        failures.append("action receipt terminal state does not match transaction")
    return failures
