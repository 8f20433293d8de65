"""What :func:`actions.selectors.transaction_detail` returns: typed values, not a template dict.

Views and templates read attributes (``detail.permissions.commit``); the HTTP
API and ``manage.py actions show`` send ``as_dict()``, whose keys and order
are the JSON the API has always answered with (tests/api/test_actions_api.py
pins them). The plan body, receipt and evidence items stay the spec's own
documents (dicts whose keys the digests cover), carried as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from actions.approvals import approval_window
from actions.models import ActionApproval, ActionAttempt, ActionResolution


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data: nested details by their ``as_dict``, tuples as lists."""
    if isinstance(value, _Detail):
        return value.as_dict()
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


class _Detail:
    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        # Field order is the JSON key order.
        return {
            item.name: _plain(getattr(self, item.name))
            for item in fields(self)  # type: ignore[arg-type]
            if not item.metadata.get("dashboard_only")
        }


@dataclass(frozen=True, slots=True)
class OperationDetail(_Detail):
    """One operation as a reviewer sees it: the hashed digests, its preview and diff, and
    whether the stored payload still re-digests to them (``payload_bound``)."""

    operation_id: str
    key: str
    ordinal: int
    adapter: str
    operation: str
    effect_class: str
    state: str
    arguments_digest: str
    preview_digest: str
    precondition_digest: str
    manifest_digest: str
    idempotency_key: str
    result_digest: str | None
    compensation_digest: str | None
    depends_on: tuple[str, ...]
    preview: dict[str, Any] | None
    target: str
    diff: str
    payload: str
    payload_bound: bool | None
    authorized_by: tuple[dict[str, Any], ...]
    informed_by: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class ApprovalDetail(_Detail):
    """One approval row and whether its window has passed (judged when the page is read)."""

    approval_id: str
    approver: str
    decision: str
    plan_hash: str
    issued_at: Any
    expires_at: Any
    expired: bool
    approval_digest: str
    created_at: Any

    @classmethod
    def of(cls, row: ActionApproval, now: datetime) -> ApprovalDetail:
        window = approval_window(row.as_approval())
        return cls(
            approval_id=row.id,
            approver=row.approver_principal,
            decision=row.decision,
            plan_hash=row.plan_hash,
            issued_at=row.issued_at,
            expires_at=row.expires_at,
            expired=window is None or now > window[1],
            approval_digest=row.approval_digest,
            created_at=row.created_at,
        )


@dataclass(frozen=True, slots=True)
class AttemptDetail(_Detail):
    """One execute or compensate attempt."""

    attempt_id: str
    operation_id: str
    phase: str
    attempt_number: int
    state: str
    idempotency_key: str
    provider_request_id: str | None
    error_code: str | None
    error_digest: str | None
    started_at: Any
    finished_at: Any

    @classmethod
    def of(cls, row: ActionAttempt) -> AttemptDetail:
        return cls(
            attempt_id=row.id,
            operation_id=row.operation_id,
            phase=row.phase,
            attempt_number=row.attempt_number,
            state=row.state,
            idempotency_key=row.idempotency_key,
            provider_request_id=row.provider_request_id,
            error_code=row.error_code,
            error_digest=row.error_digest,
            started_at=row.started_at,
            finished_at=row.finished_at,
        )


@dataclass(frozen=True, slots=True)
class ResolutionDetail(_Detail):
    """What a person recorded when closing an uncertain or recovery_required transaction."""

    outcome: str
    outcome_label: str
    note: str
    owner: str
    resolved_by: str
    audit_event_id: str
    created_at: Any

    @classmethod
    def of(cls, row: ActionResolution) -> ResolutionDetail:
        return cls(
            outcome=row.outcome,
            outcome_label=dict(ActionResolution.OUTCOMES).get(row.outcome, row.outcome),
            note=row.note,
            owner=row.owner,
            resolved_by=row.resolved_by,
            audit_event_id=row.audit_event_id,
            created_at=row.created_at,
        )


@dataclass(frozen=True, slots=True)
class DetailPermissions(_Detail):
    """Which buttons the page offers; the services check each again when it is pressed."""

    approve: bool
    deny: bool
    commit: bool
    abort: bool
    recover: bool
    resolve: bool
    purge: bool
    verify: bool


@dataclass(frozen=True, slots=True)
class TransactionDetail(_Detail):
    """Everything a reviewer needs about one transaction.

    ``plan`` is the exact hashed world-patch body and ``plan_matches_hash``
    says it hashes to the stored plan hash; ``evidence`` gathers every
    operation's authorizing and informing items.
    """

    transaction: dict[str, Any]
    abort_reason: str
    plan: dict[str, Any]
    plan_matches_hash: bool
    operations: tuple[OperationDetail, ...]
    evidence: dict[str, list[dict[str, Any]]]
    approvals: tuple[ApprovalDetail, ...]
    attempts: tuple[AttemptDetail, ...]
    receipt: dict[str, Any] | None
    payloads_purged: bool
    attention: tuple[str, ...]
    permissions: DetailPermissions
    self_proposed: bool
    approval_enabled: bool
    resolution: ResolutionDetail | None
    summary: str
    # The cited messages and records themselves (text, time, session), by ref_id, for the
    # plan page. Not in as_dict(): an API token reads only its own subtree, and a cited
    # episode may sit at an ancestor scope, so the API answers with the verdict alone.
    authorizing: dict[str, Any] = field(default_factory=dict, metadata={"dashboard_only": True})
