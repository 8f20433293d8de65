"""Guarded-action tables, with the spec's table and column names (guarded-actions-v1).

An independent verifier reads these columns directly, so their names are a
contract. Timestamps are ISO-8601 text (C-2), as in the audit table, because
approval times are signed as text and must round-trip byte for byte.
Everything here is data and invariants; every write goes through
:mod:`actions.services`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

from actions import formats

if TYPE_CHECKING:
    from aetnaweb.access import Principal


class ActionTransaction(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    subject_id = models.CharField(max_length=200, help_text="Canonical scope string")
    # The scope split into columns, so visibility is an exact, indexed equality
    # (aetnaweb.access.scope_q), never a prefix match on subject_id.
    scope_tenant = models.CharField(max_length=64)
    scope_user = models.CharField(max_length=64)
    scope_project = models.CharField(max_length=64)
    actor_id = models.CharField(max_length=150, help_text="Who proposed: the audit actor")
    proposer_kind = models.CharField(max_length=16, default="system")
    # Separation of duties (decision 5): the proposing person, or the owner of
    # the proposing agent token, may not approve this plan.
    proposed_by_user_id = models.BigIntegerField(null=True, blank=True)
    proposed_by_token_id = models.BigIntegerField(null=True, blank=True)
    mode = models.CharField(max_length=16, choices=formats.Mode.choices)
    state = models.CharField(max_length=32, choices=formats.State.choices)
    plan_version = models.IntegerField(default=formats.PLAN_VERSION)
    plan_hash = models.CharField(max_length=64)
    policy_hash = models.CharField(max_length=64)
    session_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    turn_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    error_code = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    error_digest = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    # Why a person aborted or denied the plan. Kept here, never in the audit
    # table (which records only its digest and a category).
    abort_reason = models.TextField(blank=True, default="")
    created_at = models.CharField(max_length=40)
    updated_at = models.CharField(max_length=40)
    terminal_at = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001  (spec: nullable)

    class Meta:
        db_table = "action_transactions"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "created_at"], name="action_txn_state"),
            models.Index(
                fields=["scope_tenant", "scope_user", "scope_project", "created_at"],
                name="action_txn_scope",
            ),
            models.Index(fields=["subject_id", "created_at"], name="action_txn_subject"),
            models.Index(fields=["created_at", "id"], name="action_txn_created"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state}) at {self.subject_id}"

    @property
    def is_terminal(self) -> bool:
        return self.state in formats.TERMINAL_STATES

    def proposed_by(self, principal: Principal) -> bool:
        """Whether ``principal`` proposed this plan or owns the agent that did (decision 5)."""
        return principal.label == self.actor_id or (
            principal.user_id is not None and principal.user_id == self.proposed_by_user_id
        )

    def as_dict(self) -> dict[str, object]:
        """The transaction as services and the API return it (no content, no reason text)."""
        return {
            "transaction_id": self.id,
            "subject_id": self.subject_id,
            "actor_id": self.actor_id,
            "mode": self.mode,
            "state": self.state,
            "plan_version": self.plan_version,
            "plan_hash": self.plan_hash,
            "policy_hash": self.policy_hash,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "error_code": self.error_code,
            "error_digest": self.error_digest,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "terminal_at": self.terminal_at,
        }


class ActionOperation(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    transaction = models.ForeignKey(
        ActionTransaction, on_delete=models.PROTECT, related_name="operations"
    )
    operation_key = models.CharField(max_length=200)
    ordinal = models.IntegerField()
    adapter = models.CharField(max_length=100)
    operation = models.CharField(max_length=100)
    effect_class = models.CharField(max_length=32, choices=formats.EffectClass.choices)
    arguments_digest = models.CharField(max_length=64)
    preview_digest = models.CharField(max_length=64)
    precondition_digest = models.CharField(max_length=64)
    manifest_digest = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=64)
    compensation_key = models.CharField(max_length=80)
    state = models.CharField(max_length=32, choices=formats.OperationState.choices)
    selected = models.BooleanField(default=True)
    result_digest = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    compensation_digest = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    created_at = models.CharField(max_length=40)
    updated_at = models.CharField(max_length=40)

    class Meta:
        db_table = "action_operations"
        ordering = ["transaction_id", "ordinal"]
        constraints = [
            models.UniqueConstraint(
                fields=["transaction", "operation_key"], name="action_op_unique_key"
            ),
            models.UniqueConstraint(fields=["transaction", "ordinal"], name="action_op_unique_ord"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.adapter}.{self.operation} ({self.state})"


class ActionDependency(models.Model):
    operation = models.ForeignKey(
        ActionOperation, on_delete=models.PROTECT, related_name="dependencies"
    )
    depends_on_operation = models.ForeignKey(
        ActionOperation, on_delete=models.PROTECT, related_name="dependents"
    )

    class Meta:
        db_table = "action_dependencies"
        constraints = [
            models.UniqueConstraint(
                fields=["operation", "depends_on_operation"], name="action_dep_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.operation_id} after {self.depends_on_operation_id}"


class ActionEvidence(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    # The published schema (aetnamem actions/store.py) has this column and its
    # verifier selects evidence by it; it always equals operation.transaction_id.
    transaction = models.ForeignKey(
        ActionTransaction, on_delete=models.PROTECT, related_name="evidence"
    )
    operation = models.ForeignKey(
        ActionOperation, on_delete=models.PROTECT, related_name="evidence"
    )
    evidence_kind = models.CharField(max_length=100)
    ref_id = models.CharField(max_length=300)
    digest = models.CharField(max_length=64)
    relation = models.CharField(max_length=16)
    trust_tier = models.CharField(max_length=64)
    attested = models.BooleanField(default=False)

    class Meta:
        db_table = "action_evidence"
        ordering = ["operation_id", "relation", "evidence_kind", "ref_id", "digest"]

    def __str__(self) -> str:
        return f"{self.relation} {self.evidence_kind}:{self.ref_id}"


class ActionApproval(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    transaction = models.ForeignKey(
        ActionTransaction, on_delete=models.PROTECT, related_name="approvals"
    )
    plan_hash = models.CharField(max_length=64)
    approver_principal = models.CharField(max_length=150)
    approver_user_id = models.BigIntegerField(null=True, blank=True)
    decision = models.CharField(max_length=16, default="approved")
    issued_at = models.CharField(max_length=40)
    expires_at = models.CharField(max_length=40)
    nonce = models.CharField(max_length=64, unique=True)
    signature = models.CharField(max_length=64)
    approval_digest = models.CharField(max_length=64)
    created_at = models.CharField(max_length=40)

    class Meta:
        db_table = "action_approvals"
        ordering = ["transaction_id", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.id} by {self.approver_principal}"

    def as_approval(self) -> dict[str, str]:
        """The signed ``aetna-action-approval-v1`` document this row records."""
        return {
            "transaction_id": self.transaction_id,
            "plan_hash": self.plan_hash,
            "approver": self.approver_principal,
            "issued_at": self.issued_at,
            "expires_at": self.expires_at,
            "nonce": self.nonce,
            "signature": self.signature,
            "format": formats.APPROVAL_FORMAT,
        }


class ActionAttempt(models.Model):
    id = models.CharField(primary_key=True, max_length=120)
    transaction = models.ForeignKey(
        ActionTransaction, on_delete=models.PROTECT, related_name="attempts"
    )
    operation = models.ForeignKey(
        ActionOperation, on_delete=models.PROTECT, related_name="attempts"
    )
    phase = models.CharField(max_length=16)
    attempt_number = models.IntegerField()
    state = models.CharField(max_length=16, choices=formats.AttemptState.choices)
    idempotency_key = models.CharField(max_length=80)
    provider_request_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    error_code = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    error_digest = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (spec: nullable)
    started_at = models.CharField(max_length=40)
    finished_at = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001  (spec: nullable)

    class Meta:
        db_table = "action_attempts"
        ordering = ["transaction_id", "started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["operation", "phase", "attempt_number"], name="action_attempt_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"


class ActionPayload(models.Model):
    """Content needed to execute or undo an operation; purged (logically) after the end."""

    transaction = models.ForeignKey(
        ActionTransaction, on_delete=models.PROTECT, related_name="payloads"
    )
    operation = models.ForeignKey(
        ActionOperation, on_delete=models.PROTECT, related_name="payloads"
    )
    kind = models.CharField(max_length=32)
    payload = models.TextField()
    payload_digest = models.CharField(max_length=64)
    created_at = models.CharField(max_length=40)
    updated_at = models.CharField(max_length=40)
    purged_at = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001  (spec: nullable)

    class Meta:
        db_table = "action_payloads"
        constraints = [
            models.UniqueConstraint(fields=["operation", "kind"], name="action_payload_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.operation_id} {self.kind}{' (purged)' if self.purged_at else ''}"


class ActionReceipt(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    transaction = models.ForeignKey(
        ActionTransaction, on_delete=models.PROTECT, related_name="receipts"
    )
    terminal_state = models.CharField(max_length=32)
    receipt_json = models.TextField()
    receipt_sha256 = models.CharField(max_length=64)
    created_at = models.CharField(max_length=40)

    class Meta:
        db_table = "action_receipts"
        ordering = ["transaction_id", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.id} ({self.terminal_state})"


class ActionResolution(models.Model):
    """A person's closing note on an uncertain or recovery_required transaction.

    The transaction itself stays in its terminal state (ST-1: nothing leaves
    one); this row records what was found in the world, who owns any
    follow-up, and who recorded it. Not part of the spec's tables: the
    independent verifier never reads it.
    """

    class Outcome(formats.WireChoices):
        APPLIED = "applied", "The change is in place (checked in the world)"
        NOT_APPLIED = "not_applied", "The change did not happen (checked in the world)"
        FIXED_BY_HAND = "fixed_by_hand", "Fixed by hand"
        NO_ACTION_NEEDED = "no_action_needed", "No action needed"

    OUTCOMES = Outcome.choices

    transaction = models.OneToOneField(
        ActionTransaction, on_delete=models.PROTECT, related_name="resolution"
    )
    outcome = models.CharField(max_length=32, choices=Outcome.choices)
    # Kept here for those who may read the transaction; the audit chain holds its digest.
    note = models.TextField()
    owner = models.CharField(max_length=150)
    resolved_by = models.CharField(max_length=150)
    audit_event_id = models.CharField(max_length=40)
    created_at = models.CharField(max_length=40)

    def __str__(self) -> str:
        return f"{self.transaction_id}: {self.outcome}"
