"""A9 abort (and deny), A10 recover, A11 purge_payloads with decision 4."""

from __future__ import annotations

import json

import pytest

from access.models import Role
from actions import services
from actions.errors import ActionInputError, ActionStateError
from actions.models import (
    ActionAttempt,
    ActionOperation,
    ActionPayload,
    ActionReceipt,
    ActionTransaction,
)
from actions.verification import verify_action
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from tests.actions.conftest import (
    SCOPE,
    audit_dump,
    event_types,
    grant,
    stage_and_approve,
    table_counts,
    write_op,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("state", ["staged", "awaiting_approval", "approved"])
def test_abort_from_each_open_state_ab1_ab2(actions_root, approval_key, approver_principal, state):
    mode = "preview" if state == "staged" else "enforce"
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")], mode=mode
    ).transaction_id
    if state == "approved":
        services.approve(transaction_id=txn_id, principal=approver_principal)
    result = services.abort(transaction_id=txn_id, principal=approver_principal, reason="not today")
    assert result.transaction.state == "aborted"
    assert result.receipt["terminal_state"] == "aborted"
    event = AuditEvent.objects.get(event_type="action.aborted")
    payload = json.loads(event.payload)
    assert event.actor == "ada"
    assert payload["aborted_by"] == "ada" and payload["reason_category"] == "aborted"
    assert payload["reason_digest"] and "not today" not in audit_dump()
    assert ActionTransaction.objects.get(pk=txn_id).abort_reason == "not today"
    assert verify_action(txn_id)["valid"]


def test_abort_by_trusted_caller_defaults_actor_user_ab2(actions_root):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    services.abort(principal=SYSTEM, transaction_id=txn_id)
    assert AuditEvent.objects.get(event_type="action.aborted").actor == "user"


def test_abort_twice_and_after_commit_is_refused_ab1(
    actions_root, approval_key, approver_principal
):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    services.abort(transaction_id=txn_id, principal=approver_principal)
    before = table_counts()
    with pytest.raises(ActionStateError, match="cannot abort from aborted"):
        services.abort(transaction_id=txn_id, principal=approver_principal)
    assert table_counts() == before
    committed = stage_and_approve([write_op("b.txt", "y")], approver_principal)
    services.commit(transaction_id=committed, principal=approver_principal)
    with pytest.raises(ActionStateError, match="cannot abort from committed"):
        services.abort(transaction_id=committed, principal=approver_principal)


def test_deny_records_reason_text_on_row_and_only_digest_in_audit(actions_root, approver_principal):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    services.deny(
        transaction_id=txn_id, reason="touches the payroll file", principal=approver_principal
    )
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert (txn.state, txn.abort_reason) == ("aborted", "touches the payroll file")
    payload = json.loads(AuditEvent.objects.get(event_type="action.aborted").payload)
    assert payload["reason_category"] == "denied"
    assert "payroll" not in audit_dump()


def test_deny_needs_a_reason_and_approve_capability(actions_root, django_user_model):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-viewer-1")
    grant(viewer, "acme:*:*", Role.VIEWER)
    before = table_counts()
    with pytest.raises(ActionInputError, match="needs a reason"):
        services.deny(transaction_id=txn_id, reason="  ", principal=access.system_principal())
    with pytest.raises(access.AccessDenied):
        services.deny(
            transaction_id=txn_id, reason="no", principal=access.operator_principal(viewer)
        )
    assert table_counts() == before


def _force_interrupted(
    txn_id: str, op_state: str = "executing", txn_state: str = "committing"
) -> None:
    ActionTransaction.objects.filter(pk=txn_id).update(state=txn_state)
    ActionOperation.objects.filter(transaction_id=txn_id).update(state=op_state)


def test_interrupted_execution_is_fenced_for_recovery(
    actions_root, approval_key, approver_principal
):
    # T-14: Given a transaction forced to committing with its operation executing
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    _force_interrupted(txn_id)
    # When it is recovered
    result = services.recover(transaction_id=txn_id, principal=approver_principal)
    # Then it is recovery_required, the operation uncertain, no file written, and it verifies
    assert result.transaction.state == "recovery_required"
    op = ActionOperation.objects.get(transaction_id=txn_id)
    assert op.state == "uncertain"
    assert not (actions_root / "a.txt").exists()
    assert verify_action(txn_id)["valid"]
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert txn.error_code == "interrupted_external_boundary"
    event = AuditEvent.objects.get(event_type="action.recovery_required")
    assert json.loads(event.payload) == {
        "uncertain_operation_ids": [op.id],
        "reason": "interrupted_external_boundary",
    }
    assert event.actor == "ada"
    assert ActionReceipt.objects.filter(transaction_id=txn_id).count() == 1


def test_recover_from_compensating_and_never_retries_rc2_rc3(
    scripted, approval_key, approver_principal
):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    _force_interrupted(txn_id, op_state="compensating", txn_state="compensating")
    ActionAttempt.objects.create(
        id="att_x_compensate_1",
        transaction_id=txn_id,
        operation=ActionOperation.objects.get(transaction_id=txn_id),
        phase="compensate",
        attempt_number=1,
        state="executing",
        idempotency_key="k",
        started_at="2026-01-01T00:00:00+00:00",
    )
    services.recover(transaction_id=txn_id, principal=approver_principal)
    assert ActionTransaction.objects.get(pk=txn_id).state == "recovery_required"
    # Attempt rows stay as they were; no adapter was called (no file appeared)
    assert ActionAttempt.objects.get().state == "executing"
    assert not (scripted / "a.txt").exists()


def test_recover_only_from_interrupted_states_rc1(actions_root, approval_key, approver_principal):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    before = table_counts()
    with pytest.raises(ActionStateError, match="does not require interrupted-run recovery"):
        services.recover(transaction_id=txn_id, principal=approver_principal)
    assert table_counts() == before


def test_nothing_leaves_a_terminal_state_st1(actions_root, approval_key, approver_principal):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    _force_interrupted(txn_id)
    services.recover(transaction_id=txn_id, principal=approver_principal)
    for call in (services.recover, services.abort, services.commit):
        with pytest.raises(ActionStateError):
            call(transaction_id=txn_id, principal=approver_principal)
    assert ActionTransaction.objects.get(pk=txn_id).state == "recovery_required"


def test_recover_needs_approve_capability(
    actions_root, approval_key, approver_principal, django_user_model
):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    _force_interrupted(txn_id)
    outsider = django_user_model.objects.create_user(username="out", password="pw-out-approver-1")
    grant(outsider, "globex:*:*", Role.APPROVER)
    with pytest.raises(access.AccessDenied):
        services.recover(transaction_id=txn_id, principal=access.operator_principal(outsider))
    assert ActionTransaction.objects.get(pk=txn_id).state == "committing"


def test_payload_purge_keeps_receipt_and_audit_verifiable(
    actions_root, approval_key, approver_principal
):
    # T-8: Given a committed one-operation transaction
    txn_id = stage_and_approve([write_op("a.txt", "sensitive body")], approver_principal)
    services.commit(transaction_id=txn_id, principal=approver_principal)
    # When its payloads are purged
    result = services.purge_payloads(transaction_id=txn_id, principal=approver_principal)
    # Then at least prepared + execution_receipt were purged, they read back as {}, and it verifies
    assert result.purged_count >= 2
    assert list(result.as_dict()) == ["transaction_id", "purged_count", "audit_event_id"]
    rows = ActionPayload.objects.filter(transaction_id=txn_id)
    assert all(row.payload == "{}" and row.purged_at for row in rows)
    assert all(row.payload_digest for row in rows)  # digest columns are kept
    assert verify_action(txn_id)["valid"]
    event = AuditEvent.objects.get(event_type="action.payloads_purged")
    assert event.event_id == result.audit_event_id and event.actor == "ada"
    assert json.loads(event.payload)["purged_count"] == result.purged_count
    # PG-2: purging again purges nothing but still records the event
    again = services.purge_payloads(transaction_id=txn_id, principal=approver_principal)
    assert again.purged_count == 0
    assert AuditEvent.objects.filter(event_type="action.payloads_purged").count() == 2


def test_purging_an_open_transaction_is_refused_decision4(
    actions_root, approval_key, approver_principal
):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    before = table_counts()
    with pytest.raises(
        ActionStateError, match="payloads can only be purged from a finished transaction"
    ):
        services.purge_payloads(transaction_id=txn_id, principal=approver_principal)
    assert table_counts() == before
    assert not ActionPayload.objects.filter(purged_at__isnull=False).exists()
    # And the approved plan can still be committed
    assert (
        services.commit(transaction_id=txn_id, principal=approver_principal).transaction.state
        == "committed"
    )


def test_purge_needs_approve_capability(
    actions_root, approval_key, approver_principal, django_user_model
):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    services.abort(transaction_id=txn_id, principal=approver_principal)
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-viewer-1")
    grant(viewer, SCOPE, Role.VIEWER)
    with pytest.raises(access.AccessDenied):
        services.purge_payloads(transaction_id=txn_id, principal=access.operator_principal(viewer))
    assert not ActionPayload.objects.filter(purged_at__isnull=False).exists()


def test_rewriting_a_payload_clears_purged_at_pg4(actions_root):
    from actions.services._ledger import _store_payload

    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    services.abort(principal=SYSTEM, transaction_id=txn_id)
    services.purge_payloads(principal=SYSTEM, transaction_id=txn_id)
    row = ActionPayload.objects.get(transaction_id=txn_id)
    _store_payload(ActionTransaction.objects.get(pk=txn_id), row.operation_id, row.kind, {"a": 1})
    row.refresh_from_db()
    assert row.purged_at is None and json.loads(row.payload) == {"a": 1}


def test_event_actor_labels_ae1(actions_root, approval_key, approver_principal):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    services.commit(transaction_id=txn_id, principal=approver_principal)
    actors = dict(AuditEvent.objects.filter(record_id=txn_id).values_list("event_type", "actor"))
    assert actors["action.proposed"] == "agent"
    assert actors["action.approved"] == "ada"
    assert actors["action.committing"] == "agent"  # engine events carry actor_id
    assert event_types(txn_id)[-1] == "action.receipt_issued"
