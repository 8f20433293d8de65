"""The guarded-action formats and enumerations (guarded-actions-v1 A1, A13).

These structures are a compatibility contract: the plan hash, the approval
digest and the receipt digest must be byte-for-byte what an independent
verifier recomputes, so they are built in exactly one place (here) and used by
the engine, the in-package verifier and the tests alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from audit.canonical import digest

WORLD_PATCH_FORMAT = "aetna-world-patch-v1"
APPROVAL_FORMAT = "aetna-action-approval-v1"
RECEIPT_FORMAT = "aetna-action-receipt-v1"
PLAN_VERSION = 1

# E-1 modes -----------------------------------------------------------------
MODE_OFF = "off"
MODE_OBSERVE = "observe"
MODE_PREVIEW = "preview"
MODE_ENFORCE = "enforce"
MODES = (MODE_OFF, MODE_OBSERVE, MODE_PREVIEW, MODE_ENFORCE)

# E-2 transaction states ----------------------------------------------------
DRAFT = "draft"  # defined by the format, never used
STAGED = "staged"
AWAITING_APPROVAL = "awaiting_approval"
APPROVED = "approved"
COMMITTING = "committing"
COMMITTED = "committed"
ABORTED = "aborted"
COMPENSATING = "compensating"
COMPENSATED = "compensated"
PARTIAL = "partial"
UNCERTAIN = "uncertain"
RECOVERY_REQUIRED = "recovery_required"
TRANSACTION_STATES = (
    DRAFT,
    STAGED,
    AWAITING_APPROVAL,
    APPROVED,
    COMMITTING,
    COMMITTED,
    ABORTED,
    COMPENSATING,
    COMPENSATED,
    PARTIAL,
    UNCERTAIN,
    RECOVERY_REQUIRED,
)
# The states an operator must look at (needs attention; a resolution may close them).
ATTENTION_STATES = (UNCERTAIN, RECOVERY_REQUIRED)
TERMINAL_STATES = frozenset(
    {COMMITTED, ABORTED, COMPENSATED, PARTIAL, UNCERTAIN, RECOVERY_REQUIRED}
)
OPEN_STATES = tuple(state for state in TRANSACTION_STATES if state not in TERMINAL_STATES)
ABORTABLE_STATES = (STAGED, AWAITING_APPROVAL, APPROVED)
INTERRUPTED_STATES = (COMMITTING, COMPENSATING)

# E-3 operation states ------------------------------------------------------
OP_STAGED = "staged"
OP_EXECUTING = "executing"
OP_APPLIED = "applied"  # defined by the format, never set
OP_VERIFIED = "verified"
OP_COMPENSATING = "compensating"
OP_COMPENSATED = "compensated"
OP_FAILED = "failed"
OP_UNCERTAIN = "uncertain"
OP_SKIPPED = "skipped"  # defined by the format, never set
OPERATION_STATES = (
    OP_STAGED,
    OP_EXECUTING,
    OP_APPLIED,
    OP_VERIFIED,
    OP_COMPENSATING,
    OP_COMPENSATED,
    OP_FAILED,
    OP_UNCERTAIN,
    OP_SKIPPED,
)

# E-4 effect classes --------------------------------------------------------
READ_ONLY = "read_only"
EXACT_TRANSACTIONAL = "exact_transactional"
VERIFIED_COMPENSATABLE = "verified_compensatable"
IRREVERSIBLE_STAGED = "irreversible_staged"
OBSERVE_ONLY = "observe_only"
UNKNOWN_BLOCKED = "unknown_blocked"
EFFECT_CLASSES = (
    READ_ONLY,
    EXACT_TRANSACTIONAL,
    VERIFIED_COMPENSATABLE,
    IRREVERSIBLE_STAGED,
    OBSERVE_ONLY,
    UNKNOWN_BLOCKED,
)

# E-5 attempts --------------------------------------------------------------
ATTEMPT_EXECUTING = "executing"
ATTEMPT_VERIFIED = "verified"
ATTEMPT_UNCERTAIN = "uncertain"
ATTEMPT_FAILED = "failed"
ATTEMPT_STATES = (ATTEMPT_EXECUTING, ATTEMPT_VERIFIED, ATTEMPT_UNCERTAIN, ATTEMPT_FAILED)
PHASE_EXECUTE = "execute"
PHASE_COMPENSATE = "compensate"

# Evidence (EV-*) -----------------------------------------------------------
INFORMED_BY = "informed_by"
AUTHORIZED_BY = "authorized_by"
RELATIONS = (INFORMED_BY, AUTHORIZED_BY)
DEFAULT_TRUST_TIER = "untrusted_content"

# Payload kinds -------------------------------------------------------------
PAYLOAD_PREPARED = "prepared"
PAYLOAD_EXECUTION_RECEIPT = "execution_receipt"
PAYLOAD_COMPENSATION_RECEIPT = "compensation_receipt"


# C-3 identifiers -----------------------------------------------------------


def new_transaction_id() -> str:
    return "act_" + uuid.uuid4().hex


def new_operation_id() -> str:
    return "op_" + uuid.uuid4().hex


def new_evidence_id() -> str:
    return "evi_" + uuid.uuid4().hex


def attempt_id(operation_id: str, phase: str, number: int) -> str:
    return f"att_{operation_id}_{phase}_{number}"


def receipt_id(receipt_sha256: str) -> str:
    return "rcp_" + receipt_sha256[:24]


def approval_id(nonce: str) -> str:
    return "apr_" + nonce


# F-1 world patch ------------------------------------------------------------


def evidence_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """One hashed evidence entry; IDs are not part of the plan."""
    return {
        "kind": row["kind"],
        "ref_id": row["ref_id"],
        "digest": row["digest"],
        "relation": row["relation"],
        "trust_tier": row["trust_tier"],
        "attested": bool(row["attested"]),
    }


def sorted_evidence(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    hashed = [evidence_entry(entry) for entry in entries]
    return sorted(hashed, key=lambda e: (e["relation"], e["kind"], e["ref_id"], e["digest"]))


def plan_operation(
    *,
    operation_id: str,
    key: str,
    ordinal: int,
    adapter: str,
    operation: str,
    effect_class: str,
    arguments_digest: str,
    preview_digest: str,
    precondition_digest: str,
    manifest_digest: str,
    depends_on: Iterable[str],
    evidence: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """One hashed per-operation dict (F-1): dependencies by operation ID, sorted."""
    return {
        "id": operation_id,
        "key": key,
        "ordinal": ordinal,
        "adapter": adapter,
        "operation": operation,
        "effect_class": effect_class,
        "arguments_digest": arguments_digest,
        "preview_digest": preview_digest,
        "precondition_digest": precondition_digest,
        "manifest_digest": manifest_digest,
        "depends_on": sorted(depends_on),
        "evidence": sorted_evidence(evidence),
    }


def plan_body(
    *,
    transaction_id: str,
    subject_id: str,
    actor_id: str,
    mode: str,
    plan_version: int,
    policy_hash: str,
    operations: list[dict[str, Any]],
) -> dict[str, Any]:
    """The hashed world-patch body; session, turn and timestamps are not hashed (F-1)."""
    return {
        "format": WORLD_PATCH_FORMAT,
        "transaction_id": transaction_id,
        "subject_id": subject_id,
        "actor_id": actor_id,
        "mode": mode,
        "plan_version": plan_version,
        "policy_hash": policy_hash,
        "operations": sorted(operations, key=lambda op: op["ordinal"]),
    }


def plan_hash(body: Mapping[str, Any]) -> str:
    return digest(dict(body))


def idempotency_key(
    *, transaction_id: str, operation_id: str, adapter: str, operation: str, arguments_digest: str
) -> str:
    """P-5: the key an adapter may use to make a retried dispatch a no-op."""
    return digest(
        {
            "transaction_id": transaction_id,
            "operation_id": operation_id,
            "adapter": adapter,
            "operation": operation,
            "arguments_digest": arguments_digest,
        }
    )


# F-2 approval ---------------------------------------------------------------

APPROVAL_SIGNED_FIELDS = (
    "transaction_id",
    "plan_hash",
    "approver",
    "issued_at",
    "expires_at",
    "nonce",
    "format",
)


def approval_signing_body(approval: Mapping[str, Any]) -> dict[str, Any]:
    """Every approval field except the signature (format included): what the HMAC covers."""
    return {name: approval.get(name) for name in APPROVAL_SIGNED_FIELDS}


def approval_digest(approval: Mapping[str, Any]) -> str:
    """Digest of all eight approval fields, signature and format included."""
    body = approval_signing_body(approval)
    body["signature"] = approval.get("signature")
    return digest(body)


# F-3 receipt ----------------------------------------------------------------

RECEIPT_FIELDS = (
    "transaction_id",
    "subject_id",
    "plan_hash",
    "terminal_state",
    "operation_receipts",
    "audit_event_id",
    "audit_event_hash",
    "created_at",
    "format",
)
# Every field an action receipt may hold: each is a field of its
# ``action.receipt_issued`` event or recomputed from it (issue 29), so a field
# outside this set is a claim nothing binds and verification refuses it.
ALLOWED_RECEIPT_FIELDS = frozenset(RECEIPT_FIELDS) | {"log_proof", "receipt_sha256"}


def receipt_sha256(receipt: Mapping[str, Any]) -> str:
    """Digest of every receipt field except ``receipt_sha256`` itself."""
    return digest({key: value for key, value in receipt.items() if key != "receipt_sha256"})
