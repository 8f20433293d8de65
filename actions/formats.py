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

from django.db import models

from audit.canonical import digest

WORLD_PATCH_FORMAT = "aetna-world-patch-v1"
APPROVAL_FORMAT = "aetna-action-approval-v1"
RECEIPT_FORMAT = "aetna-action-receipt-v1"
PLAN_VERSION = 1

# The enumerations are TextChoices: each member is its wire string (``Mode.ENFORCE ==
# "enforce"``, and canonical JSON writes it as that string), so the digests are
# unchanged; models take ``.choices``. The labels are the values with spaces, as the
# migrations recorded them. The flat names below (``MODE_ENFORCE``, ``OP_UNCERTAIN``,
# ...) are the members under the names the engine, the verifier and the tests use.


class WireChoices(models.TextChoices):
    """A member reads as its wire string everywhere, repr too: a refusal listing the states
    it expected (``expected ['approved']``) reads the same as when they were plain strings."""

    def __repr__(self) -> str:
        return repr(self.value)


# E-1 modes -----------------------------------------------------------------
class Mode(WireChoices):
    OFF = "off", "off"
    OBSERVE = "observe", "observe"
    PREVIEW = "preview", "preview"
    ENFORCE = "enforce", "enforce"


MODE_OFF = Mode.OFF
MODE_OBSERVE = Mode.OBSERVE
MODE_PREVIEW = Mode.PREVIEW
MODE_ENFORCE = Mode.ENFORCE
MODES = tuple(Mode)


# E-2 transaction states ----------------------------------------------------
class State(WireChoices):
    DRAFT = "draft", "draft"  # defined by the format, never used
    STAGED = "staged", "staged"
    AWAITING_APPROVAL = "awaiting_approval", "awaiting approval"
    APPROVED = "approved", "approved"
    COMMITTING = "committing", "committing"
    COMMITTED = "committed", "committed"
    ABORTED = "aborted", "aborted"
    COMPENSATING = "compensating", "compensating"
    COMPENSATED = "compensated", "compensated"
    PARTIAL = "partial", "partial"
    UNCERTAIN = "uncertain", "uncertain"
    RECOVERY_REQUIRED = "recovery_required", "recovery required"


DRAFT = State.DRAFT
STAGED = State.STAGED
AWAITING_APPROVAL = State.AWAITING_APPROVAL
APPROVED = State.APPROVED
COMMITTING = State.COMMITTING
COMMITTED = State.COMMITTED
ABORTED = State.ABORTED
COMPENSATING = State.COMPENSATING
COMPENSATED = State.COMPENSATED
PARTIAL = State.PARTIAL
UNCERTAIN = State.UNCERTAIN
RECOVERY_REQUIRED = State.RECOVERY_REQUIRED
TRANSACTION_STATES = tuple(State)
# The states an operator must look at (needs attention; a resolution may close them).
ATTENTION_STATES = (UNCERTAIN, RECOVERY_REQUIRED)
TERMINAL_STATES = frozenset(
    {COMMITTED, ABORTED, COMPENSATED, PARTIAL, UNCERTAIN, RECOVERY_REQUIRED}
)
ABORTABLE_STATES = (STAGED, AWAITING_APPROVAL, APPROVED)
INTERRUPTED_STATES = (COMMITTING, COMPENSATING)


# E-3 operation states ------------------------------------------------------
class OperationState(WireChoices):
    STAGED = "staged", "staged"
    EXECUTING = "executing", "executing"
    APPLIED = "applied", "applied"  # defined by the format, never set
    VERIFIED = "verified", "verified"
    COMPENSATING = "compensating", "compensating"
    COMPENSATED = "compensated", "compensated"
    FAILED = "failed", "failed"
    UNCERTAIN = "uncertain", "uncertain"
    SKIPPED = "skipped", "skipped"  # defined by the format, never set


OP_STAGED = OperationState.STAGED
OP_EXECUTING = OperationState.EXECUTING
OP_APPLIED = OperationState.APPLIED
OP_VERIFIED = OperationState.VERIFIED
OP_COMPENSATING = OperationState.COMPENSATING
OP_COMPENSATED = OperationState.COMPENSATED
OP_FAILED = OperationState.FAILED
OP_UNCERTAIN = OperationState.UNCERTAIN
OP_SKIPPED = OperationState.SKIPPED
OPERATION_STATES = tuple(OperationState)


# E-4 effect classes --------------------------------------------------------
class EffectClass(WireChoices):
    READ_ONLY = "read_only", "read only"
    EXACT_TRANSACTIONAL = "exact_transactional", "exact transactional"
    VERIFIED_COMPENSATABLE = "verified_compensatable", "verified compensatable"
    IRREVERSIBLE_STAGED = "irreversible_staged", "irreversible staged"
    OBSERVE_ONLY = "observe_only", "observe only"
    UNKNOWN_BLOCKED = "unknown_blocked", "unknown blocked"


READ_ONLY = EffectClass.READ_ONLY
EXACT_TRANSACTIONAL = EffectClass.EXACT_TRANSACTIONAL
VERIFIED_COMPENSATABLE = EffectClass.VERIFIED_COMPENSATABLE
IRREVERSIBLE_STAGED = EffectClass.IRREVERSIBLE_STAGED
OBSERVE_ONLY = EffectClass.OBSERVE_ONLY
UNKNOWN_BLOCKED = EffectClass.UNKNOWN_BLOCKED
EFFECT_CLASSES = tuple(EffectClass)


# E-5 attempts --------------------------------------------------------------
class AttemptState(WireChoices):
    EXECUTING = "executing", "executing"
    VERIFIED = "verified", "verified"
    UNCERTAIN = "uncertain", "uncertain"
    FAILED = "failed", "failed"


class Phase(WireChoices):
    EXECUTE = "execute", "execute"
    COMPENSATE = "compensate", "compensate"


ATTEMPT_EXECUTING = AttemptState.EXECUTING
ATTEMPT_VERIFIED = AttemptState.VERIFIED
ATTEMPT_UNCERTAIN = AttemptState.UNCERTAIN
ATTEMPT_FAILED = AttemptState.FAILED
ATTEMPT_STATES = tuple(AttemptState)
PHASE_EXECUTE = Phase.EXECUTE
PHASE_COMPENSATE = Phase.COMPENSATE


# Evidence (EV-*) -----------------------------------------------------------
class Relation(WireChoices):
    INFORMED_BY = "informed_by", "informed by"
    AUTHORIZED_BY = "authorized_by", "authorized by"


INFORMED_BY = Relation.INFORMED_BY
AUTHORIZED_BY = Relation.AUTHORIZED_BY
RELATIONS = tuple(Relation)
DEFAULT_TRUST_TIER = "untrusted_content"


# Payload kinds -------------------------------------------------------------
class PayloadKind(WireChoices):
    PREPARED = "prepared", "prepared"
    EXECUTION_RECEIPT = "execution_receipt", "execution receipt"
    COMPENSATION_RECEIPT = "compensation_receipt", "compensation receipt"


PAYLOAD_PREPARED = PayloadKind.PREPARED
PAYLOAD_EXECUTION_RECEIPT = PayloadKind.EXECUTION_RECEIPT
PAYLOAD_COMPENSATION_RECEIPT = PayloadKind.COMPENSATION_RECEIPT


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
