"""What the guarded-action services return: frozen, typed values instead of loose dicts.

Each ``as_dict()`` is the JSON the HTTP API, the MCP tools and the
``manage.py actions`` command emit, with the same keys in the same order as
the dicts the services returned before (P-10 for the WorldPatch, R-1 for a
receipt). A receipt stays the spec's own document (a dict whose keys and
order ``formats.receipt_sha256`` hashes), carried as is.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from actions.models import ActionTransaction


@dataclass(frozen=True, slots=True)
class TransactionState:
    """A transaction as services report it (no content, no reason text)."""

    transaction_id: str
    subject_id: str
    actor_id: str
    mode: str
    state: str
    plan_version: int
    plan_hash: str
    policy_hash: str
    session_id: str | None
    turn_id: str | None
    error_code: str | None
    error_digest: str | None
    created_at: str
    updated_at: str
    terminal_at: str | None

    @classmethod
    def of(cls, txn: ActionTransaction) -> TransactionState:
        # The model's as_dict() is the one place the key names and order live.
        values: dict[str, Any] = txn.as_dict()
        return cls(**values)

    @classmethod
    def load(cls, transaction_id: str) -> TransactionState:
        return cls.of(ActionTransaction.objects.get(pk=transaction_id))

    def as_dict(self) -> dict[str, Any]:
        # The same keys, in the same order, as ActionTransaction.as_dict() (fields follow it).
        return {field.name: getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True, slots=True)
class WorldPatch:
    """P-10: what ``stage`` recorded; ``operations`` are the hashed plan operations."""

    transaction_id: str
    subject_id: str
    mode: str
    state: str
    plan_version: int
    plan_hash: str
    operations: tuple[dict[str, Any], ...]
    created_at: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "transaction_id": self.transaction_id,
            "subject_id": self.subject_id,
            "mode": self.mode,
            "state": self.state,
            "plan_version": self.plan_version,
            "plan_hash": self.plan_hash,
            "operations": list(self.operations),
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    """A terminal state and its receipt (R-1), committed together (decision 3)."""

    transaction: TransactionState
    receipt: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"transaction": self.transaction.as_dict(), "receipt": self.receipt}


@dataclass(frozen=True, slots=True)
class RecoveryOutcome:
    """A fenced run (``recovery_required``) and the temporary files its writes left behind."""

    transaction: TransactionState
    receipt: dict[str, Any]
    leftovers: tuple[dict[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "transaction": self.transaction.as_dict(),
            "receipt": self.receipt,
            "leftovers": list(self.leftovers),
        }


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a person recorded when closing an uncertain or recovery_required transaction."""

    transaction_id: str
    state: str
    outcome: str
    owner: str
    resolved_by: str
    audit_event_id: str
    created_at: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "transaction_id": self.transaction_id,
            "state": self.state,
            "outcome": self.outcome,
            "owner": self.owner,
            "resolved_by": self.resolved_by,
            "audit_event_id": self.audit_event_id,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """How many payloads a purge blanked, and the audit event that records it."""

    transaction_id: str
    purged_count: int
    audit_event_id: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "transaction_id": self.transaction_id,
            "purged_count": self.purged_count,
            "audit_event_id": self.audit_event_id,
        }


@dataclass(frozen=True, slots=True)
class ImportedTransaction:
    """One journal transaction recorded as an ``action.source_imported`` event."""

    source_transaction_id: str
    audit_event_id: str
    audit_event_hash: str
    effect_count: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_transaction_id": self.source_transaction_id,
            "audit_event_id": self.audit_event_id,
            "audit_event_hash": self.audit_event_hash,
            "effect_count": self.effect_count,
        }


@dataclass(frozen=True, slots=True)
class JournalImport:
    """IJ-5: the journal's digest, what was imported and what an earlier import already had."""

    source_id_digest: str
    imported: tuple[ImportedTransaction, ...]
    skipped_transaction_ids: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_id_digest": self.source_id_digest,
            "imported": [item.as_dict() for item in self.imported],
            "skipped_transaction_ids": list(self.skipped_transaction_ids),
        }


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """V-1 for one transaction: valid, or the failures found."""

    valid: bool
    transaction_id: str
    state: str | None
    plan_hash: str | None
    failures: tuple[str, ...]

    @classmethod
    def of(cls, report: dict[str, Any]) -> VerificationReport:
        return cls(
            valid=report["valid"],
            transaction_id=report["transaction_id"],
            state=report["state"],
            plan_hash=report["plan_hash"],
            failures=tuple(report["failures"]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "transaction_id": self.transaction_id,
            "state": self.state,
            "plan_hash": self.plan_hash,
            "failures": list(self.failures),
        }
