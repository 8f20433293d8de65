"""A6-A8 commit: checks before the first effect, the execution loop, compensation.

Also decisions 1 (no stuck transactions), 2 (certain non-effects are not
uncertain) and 3 (a terminal state commits with its receipt).
"""

from __future__ import annotations

import json
import time

import pytest
from django.db import transaction

from access.models import Role
from actions import formats, services
from actions.adapters import registered_adapter
from actions.errors import (
    ActionStateError,
    AdapterDriftError,
    ApprovalInvalid,
    ApprovalUnavailable,
    ConcurrentTransitionError,
    PayloadPurged,
)
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
    APPROVAL_KEY,
    SCOPE,
    audit_dump,
    event_types,
    grant,
    stage_and_approve,
    table_counts,
    write_op,
)
from tests.actions.fakes import (
    DriftedFilesystemAdapter,
    LyingFilesystemAdapter,
    RaisingRevalidateFilesystemAdapter,
    RaisingVerifyFilesystemAdapter,
    ScriptedAdapter,
    scripted_op,
    set_script,
)

pytestmark = pytest.mark.django_db

SECRET = "the launch code is 0000-SECRET"


def _authority():
    from actions.approvals import ApprovalAuthority

    return ApprovalAuthority(APPROVAL_KEY.encode())


def _ops(txn_id: str) -> list[ActionOperation]:
    return list(ActionOperation.objects.filter(transaction_id=txn_id).order_by("ordinal"))


def _receipts(txn_id: str) -> list[ActionReceipt]:
    return list(ActionReceipt.objects.filter(transaction_id=txn_id))


def test_exact_plan_approval_commit_and_receipt(actions_root, approval_key, approver_principal):
    # T-3: Given a staged and approved write of secret content over an existing file
    (actions_root / "plan.txt").write_text("previous secret before-image")
    txn_id = stage_and_approve([write_op("plan.txt", SECRET)], approver_principal)
    # When it is committed
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    # Then the file holds the content and the transaction is committed with a receipt
    assert (actions_root / "plan.txt").read_text() == SECRET
    assert result.transaction.state == "committed"
    receipt = result.receipt
    assert receipt["format"] == "aetna-action-receipt-v1"
    assert set(receipt) == {
        "transaction_id",
        "subject_id",
        "plan_hash",
        "terminal_state",
        "operation_receipts",
        "audit_event_id",
        "audit_event_hash",
        "created_at",
        "log_proof",
        "format",
        "receipt_sha256",
    }
    assert verify_action(txn_id, authority=_authority())["valid"]
    # And neither the content nor the before-image is in the subject's audit log (C-5)
    dump = audit_dump()
    assert SECRET not in dump and "previous secret before-image" not in dump
    assert "cHJldmlvdXMgc2VjcmV0" not in dump  # nor its base64
    # And the events are the spec's, in order (CM-8, EX-3, EX-6, EX-8, R-3)
    assert event_types(txn_id) == [
        "action.proposed",
        "action.approved",
        "action.committing",
        "action.effect_executing",
        "action.effect_verified",
        "action.committed",
        "action.receipt_issued",
    ]
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert txn.terminal_at is not None and txn.error_code is None
    op = _ops(txn_id)[0]
    assert op.state == "verified" and op.result_digest
    attempt = ActionAttempt.objects.get()
    assert attempt.id == f"att_{op.id}_execute_1"
    assert (attempt.state, attempt.provider_request_id) == ("verified", op.idempotency_key)
    committed = json.loads(AuditEvent.objects.get(event_type="action.committed").payload)
    assert committed == {"plan_hash": txn.plan_hash, "operation_ids": [op.id]}


def test_commit_needs_enforce_mode_cm1(actions_root, approval_key, approver_principal):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")], mode="preview"
    ).transaction_id
    with pytest.raises(ActionStateError, match="observe and preview plans cannot execute"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (actions_root / "a.txt").exists()


def test_commit_needs_approved_state_cm2(actions_root, approval_key, approver_principal):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    with pytest.raises(ActionStateError, match="is awaiting_approval, not approved"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    services.approve(transaction_id=txn_id, principal=approver_principal)
    services.commit(transaction_id=txn_id, principal=approver_principal)
    before = table_counts()
    with pytest.raises(ActionStateError, match="is committed, not approved"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert table_counts() == before


def test_plan_mutation_after_approval_prevents_execution(
    actions_root, approval_key, approver_principal
):
    # T-10: Given an approved write, whose operation is edited in the database
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    ActionOperation.objects.filter(transaction_id=txn_id).update(operation="delete_file")
    # When it is committed, Then the integrity check refuses and nothing happens
    with pytest.raises(ActionStateError, match="integrity verification failed"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (actions_root / "a.txt").exists()
    assert ActionTransaction.objects.get(pk=txn_id).state == "approved"


def test_payload_edited_in_database_prevents_execution(
    actions_root, approval_key, approver_principal
):
    # Given the approved content swapped in the payload table (plan rows untouched)
    txn_id = stage_and_approve([write_op("a.txt", "approved text")], approver_principal)
    row = ActionPayload.objects.get(transaction_id=txn_id, kind="prepared")
    ActionPayload.objects.filter(pk=row.pk).update(
        payload=row.payload.replace("approved text", "evil text")
    )
    with pytest.raises(ActionStateError, match="does not match the digests its plan hash binds"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (actions_root / "a.txt").exists()


def test_missing_recorded_approval_cm4(actions_root, approval_key, approver_principal):
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    ActionTransaction.objects.filter(pk=txn_id).update(state="approved")
    with pytest.raises(ActionStateError, match="transaction has no recorded approval"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (actions_root / "a.txt").exists()


def test_expired_recorded_approval_cm4(actions_root, approval_key, approver_principal, settings):
    # Given an approval that lives one second
    settings.AETNAWEB_APPROVAL_TTL_SECONDS = 1
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    time.sleep(1.2)
    # When commit comes later, Then it is refused, the state stays approved, and abort still works
    with pytest.raises(ApprovalInvalid, match="recorded approval is invalid or expired"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert isinstance(ApprovalInvalid("x"), ValueError)
    assert ActionTransaction.objects.get(pk=txn_id).state == "approved"
    assert not (actions_root / "a.txt").exists()
    services.abort(transaction_id=txn_id, principal=approver_principal)
    assert ActionTransaction.objects.get(pk=txn_id).state == "aborted"


def test_commit_without_key_is_refused(actions_root, approval_key, approver_principal, settings):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    settings.AETNAWEB_APPROVAL_KEY = ""
    with pytest.raises(ApprovalUnavailable, match="required to commit actions"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert ActionTransaction.objects.get(pk=txn_id).state == "approved"


def test_commit_with_another_key_fails_integrity(
    actions_root, approval_key, approver_principal, settings
):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    settings.AETNAWEB_APPROVAL_KEY = "q" * 40
    with pytest.raises(ActionStateError, match="approval signature is invalid"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (actions_root / "a.txt").exists()


def test_adapter_manifest_drift_invalidates_approval(
    actions_root, approval_key, approver_principal
):
    # T-7: Given an approved write, and then a new adapter version
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    with (
        registered_adapter("filesystem", lambda: DriftedFilesystemAdapter(actions_root)),
        pytest.raises(AdapterDriftError, match="adapter manifest changed after approval"),
    ):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (actions_root / "a.txt").exists()
    assert ActionTransaction.objects.get(pk=txn_id).state == "approved"


def test_a_different_root_counts_as_drift_cm5(
    actions_root, approval_key, approver_principal, settings, tmp_path
):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    other = tmp_path / "other-root"
    other.mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(other)
    with pytest.raises(AdapterDriftError):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (other / "a.txt").exists()


def test_purged_prepared_payload_blocks_commit_cm6(actions_root, approval_key, approver_principal):
    # The purge service refuses open transactions (decision 4); simulate a purge behind its back.
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    ActionPayload.objects.filter(transaction_id=txn_id).update(
        payload="{}", purged_at="2026-01-01T00:00:00+00:00"
    )
    with pytest.raises(PayloadPurged, match="prepared payload was purged for op_"):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert isinstance(PayloadPurged("x"), RuntimeError)
    assert ActionTransaction.objects.get(pk=txn_id).state == "approved"


def test_world_state_change_invalidates_approved_patch(
    actions_root, approval_key, approver_principal
):
    # T-6: Given an approved write, and then a concurrent change to the target file
    (actions_root / "a.txt").write_text("original")
    txn_id = stage_and_approve([write_op("a.txt", "agent version")], approver_principal)
    (actions_root / "a.txt").write_text("concurrent human edit")
    # When it is committed, Then it ends aborted with a receipt, nothing executes
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "aborted"
    assert result.receipt["terminal_state"] == "aborted"
    assert (actions_root / "a.txt").read_text() == "concurrent human edit"
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert txn.error_code == "precondition_changed"
    assert ActionAttempt.objects.count() == 0
    failed = json.loads(AuditEvent.objects.get(event_type="action.precondition_failed").payload)
    assert failed["terminal_state"] == "aborted" and failed["operation_id"] == _ops(txn_id)[0].id
    assert "action.committing" not in event_types(txn_id)
    # And the verifier without an authority says it is valid
    assert verify_action(txn_id)["valid"]


def test_precondition_fails_in_loop_after_earlier_effect_compensates_ex1(
    actions_root, approval_key, approver_principal
):
    # Given two writes to the same new file: each alone expects it absent
    txn_id = stage_and_approve(
        [write_op("b.txt", "first", key="one"), write_op("b.txt", "second", key="two")],
        approver_principal,
    )
    # When committed, the second finds the first's effect: the first is undone
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "compensated"
    assert not (actions_root / "b.txt").exists()
    one, two = _ops(txn_id)
    assert (one.state, two.state) == ("compensated", "staged")
    assert one.compensation_digest
    assert event_types(txn_id)[-4:] == [
        "action.compensating",
        "action.compensation_verified",
        "action.precondition_failed",
        "action.receipt_issued",
    ]
    compensating = json.loads(AuditEvent.objects.get(event_type="action.compensating").payload)
    assert compensating == {"operation_ids": [one.id]}
    attempt = ActionAttempt.objects.get(phase="compensate")
    assert attempt.idempotency_key == one.idempotency_key + ":compensate"
    assert attempt.state == "verified"
    assert ActionTransaction.objects.get(pk=txn_id).error_code == "precondition_changed"
    assert verify_action(txn_id, authority=_authority())["valid"]


def test_precondition_fails_in_loop_with_nothing_applied_ex1(
    scripted, approval_key, approver_principal
):
    # Given a precondition that holds in the pre-flight pass and fails just before execution
    set_script(scripted, revalidate="fail_after:1")
    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    # Then it goes straight to compensated, with no compensating event
    assert result.transaction.state == "compensated"
    assert "action.compensating" not in event_types(txn_id)
    assert _ops(txn_id)[0].state == "staged"
    assert ScriptedAdapter(scripted).read() == {}


def test_later_uncertain_effect_compensates_verified_prior_effect(
    scripted, approval_key, approver_principal
):
    # T-11: Given a file write and a dependent operation whose execute raises
    set_script(scripted, execute="raise")
    txn_id = stage_and_approve(
        [
            write_op("report.txt", "draft", key="w"),
            scripted_op("k", "v", op_key="s", depends_on=["w"]),
        ],
        approver_principal,
    )
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    # Then the transaction is uncertain, the write was compensated, the failing op is uncertain
    assert result.transaction.state == "uncertain"
    w, s = _ops(txn_id)
    assert (w.state, s.state) == ("compensated", "uncertain")
    assert not (scripted / "report.txt").exists()
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert txn.error_code == "execution_raised"
    attempt = ActionAttempt.objects.get(operation=s)
    assert (attempt.state, attempt.error_code) == ("uncertain", "RuntimeError")
    # The failing operation itself is never compensated
    assert not ActionAttempt.objects.filter(operation=s, phase="compensate").exists()
    assert "action.transaction_uncertain" in event_types(txn_id)
    assert "secret-ish detail" not in audit_dump()
    assert verify_action(txn_id, authority=_authority())["valid"]


def test_uncertain_even_when_compensation_fails_ex5(scripted, approval_key, approver_principal):
    set_script(scripted, execute="raise")
    txn_id = stage_and_approve(
        [write_op("r.txt", "draft", key="w"), scripted_op("k", "v", op_key="s", depends_on=["w"])],
        approver_principal,
    )
    with registered_adapter("filesystem", lambda: LyingFilesystemAdapter(scripted)):
        result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "uncertain"


def test_noop_compensator_is_detected(scripted, approval_key, approver_principal):
    # T-12: Given a compensator that claims success without restoring
    (scripted / "value.txt").write_text("original value")
    set_script(scripted, execute="raise")
    txn_id = stage_and_approve(
        [
            write_op("value.txt", "changed value", key="w"),
            scripted_op("k", "v", op_key="s", depends_on=["w"]),
        ],
        approver_principal,
    )
    with registered_adapter("filesystem", lambda: LyingFilesystemAdapter(scripted)):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    # Then operation 0 is failed, the value is not restored, and the lie is recorded
    w, _ = _ops(txn_id)
    assert w.state == "failed"
    assert (scripted / "value.txt").read_text() == "changed value"
    failed = json.loads(AuditEvent.objects.get(event_type="action.compensation_failed").payload)
    assert failed["operation_id"] == w.id and failed["error_type"] == "CompensationUnverified"
    assert ActionAttempt.objects.get(operation=w, phase="compensate").state == "failed"
    assert ActionTransaction.objects.get(pk=txn_id).state == "uncertain"
    assert verify_action(txn_id, authority=_authority())["valid"]


def test_compensation_failure_gives_partial_cp4(scripted, approval_key, approver_principal):
    # Given a verified scripted effect whose compensation raises, then a later precondition failure
    set_script(scripted, compensate="raise")
    txn_id = stage_and_approve(
        [
            scripted_op("k", "v", op_key="s"),
            write_op("x.txt", "1", key="a", depends_on=["s"]),
            write_op("x.txt", "2", key="b", depends_on=["a"]),
        ],
        approver_principal,
    )
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    # Then the file write is undone, the scripted one is not: partial
    assert result.transaction.state == "partial"
    s, a, b = _ops(txn_id)
    assert (s.state, a.state, b.state) == ("failed", "compensated", "staged")
    assert not (scripted / "x.txt").exists()
    compensating = json.loads(AuditEvent.objects.get(event_type="action.compensating").payload)
    assert compensating["operation_ids"] == [a.id, s.id]  # reverse order
    failed = json.loads(AuditEvent.objects.get(event_type="action.compensation_failed").payload)
    assert failed["error_type"] == "RuntimeError"
    assert verify_action(txn_id)["valid"]


def test_postcondition_unverified_ends_uncertain_ex7(scripted, approval_key, approver_principal):
    set_script(scripted, verify="fail")
    txn_id = stage_and_approve(
        [write_op("w.txt", "x", key="w"), scripted_op("k", "v", depends_on=["w"])],
        approver_principal,
    )
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "uncertain"
    w, s = _ops(txn_id)
    assert (w.state, s.state) == ("compensated", "uncertain")
    assert s.result_digest  # the execution receipt is kept and digested (EX-6)
    assert ActionPayload.objects.filter(operation=s, kind="execution_receipt").exists()
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert txn.error_code == "postcondition_unverified"
    uncertain = json.loads(AuditEvent.objects.get(event_type="action.effect_uncertain").payload)
    assert uncertain["verified"] is False and uncertain["operation_id"] == s.id
    assert verify_action(txn_id)["valid"]


def test_exception_in_verify_ends_uncertain_with_receipt_decision1(
    actions_root, approval_key, approver_principal
):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    with registered_adapter("filesystem", lambda: RaisingVerifyFilesystemAdapter(actions_root)):
        result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "uncertain"
    assert result.transaction.error_code == "verification_raised"
    assert _ops(txn_id)[0].state == "uncertain"
    assert ActionAttempt.objects.get().error_code == "OSError"
    assert len(_receipts(txn_id)) == 1
    assert verify_action(txn_id)["valid"]


def test_exception_in_revalidate_during_loop_ends_uncertain_with_receipt_decision1(
    actions_root, approval_key, approver_principal
):
    txn_id = stage_and_approve(
        [write_op("a.txt", "x", key="a"), write_op("b.txt", "y", key="b")], approver_principal
    )
    RaisingRevalidateFilesystemAdapter.calls = -2  # pre-flight twice, then the loop: a ok, b raises
    with registered_adapter("filesystem", lambda: RaisingRevalidateFilesystemAdapter(actions_root)):
        result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "uncertain"
    assert result.transaction.error_code == "revalidation_raised"
    a, b = _ops(txn_id)
    assert (a.state, b.state) == ("compensated", "uncertain")
    assert not (actions_root / "a.txt").exists()
    assert len(_receipts(txn_id)) == 1
    assert verify_action(txn_id)["valid"]


def test_exception_in_preflight_revalidate_aborts_with_receipt(
    scripted, approval_key, approver_principal
):
    set_script(scripted, revalidate="raise")
    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "aborted"
    assert ActionAttempt.objects.count() == 0 and len(_receipts(txn_id)) == 1


def test_missing_parent_directory_is_not_dispatched_decision2(
    actions_root, approval_key, approver_principal
):
    # Given an earlier write and then a write under a directory that existed at staging
    # (a missing one is refused there) but was removed before the commit
    (actions_root / "no/such/dir").mkdir(parents=True)
    txn_id = stage_and_approve(
        [write_op("first.txt", "1", key="a"), write_op("no/such/dir/f.txt", "2", key="b")],
        approver_principal,
    )
    (actions_root / "no/such/dir").rmdir()
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    # Then the failing operation is failed (not uncertain), the first is undone: compensated
    assert result.transaction.state == "compensated"
    assert result.transaction.error_code == "not_dispatched"
    a, b = _ops(txn_id)
    assert (a.state, b.state) == ("compensated", "failed")
    assert ActionAttempt.objects.get(operation=b).state == "failed"
    assert not (actions_root / "first.txt").exists()
    failed = json.loads(AuditEvent.objects.get(event_type="action.effect_failed").payload)
    assert failed["dispatched"] is False and failed["error_type"] == "NotDispatched"
    assert "action.effect_uncertain" not in event_types(txn_id)
    assert verify_action(txn_id)["valid"]


def test_not_dispatched_alone_is_compensated_not_uncertain_decision2(
    scripted, approval_key, approver_principal
):
    set_script(scripted, execute="not_dispatched")
    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "compensated"
    assert _ops(txn_id)[0].state == "failed"


def test_not_dispatched_with_failed_compensation_is_partial_decision2(
    scripted, approval_key, approver_principal
):
    (scripted / "no/dir").mkdir(parents=True)  # exists at staging, gone at commit
    txn_id = stage_and_approve(
        [write_op("keep.txt", "1", key="a"), write_op("no/dir/x.txt", "2", key="b")],
        approver_principal,
    )
    (scripted / "no/dir").rmdir()
    with registered_adapter("filesystem", lambda: LyingFilesystemAdapter(scripted)):
        result = services.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "partial"


def test_keyboard_interrupt_is_recorded_then_reraised_ex5(
    scripted, approval_key, approver_principal
):
    set_script(scripted, execute="keyboard")
    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    with pytest.raises(KeyboardInterrupt):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert txn.state == "uncertain" and len(_receipts(txn_id)) == 1
    assert ActionAttempt.objects.get().error_code == "KeyboardInterrupt"


def test_commit_needs_approve_capability(
    actions_root, approval_key, approver_principal, django_user_model
):
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-viewer-1")
    grant(viewer, "acme:*:*", Role.VIEWER)
    before = table_counts()
    with pytest.raises(access.AccessDenied):
        services.commit(transaction_id=txn_id, principal=access.operator_principal(viewer))
    assert table_counts() == before
    assert not (actions_root / "a.txt").exists()


def test_commit_inside_an_open_transaction_is_refused(
    actions_root, approval_key, approver_principal
):
    # The intent record must be durable before the effect, so commit cannot nest.
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        services.commit(transaction_id=txn_id, principal=approver_principal)
    assert not (actions_root / "a.txt").exists()


def test_compare_and_swap_refuses_an_unexpected_state():
    # Given a transaction already moved on by someone else
    from actions.services._ledger import _transition

    with pytest.raises(ConcurrentTransitionError, match="is None, expected"):
        _transition("act_missing", ["approved"], "committing")


def test_recover_during_a_live_commit_fences_it(scripted, approval_key, approver_principal):
    # Given an adapter that, mid-execute, sees an operator fence the run (another process)
    class Recovering(ScriptedAdapter):
        def execute(self, prepared, key):
            receipt = super().execute(prepared, key)
            services.recover(transaction_id=txn_id, principal=approver_principal)
            return receipt

    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    # Then the live run cannot record over the fence
    with (
        registered_adapter("scripted", lambda: Recovering(scripted)),
        pytest.raises(ConcurrentTransitionError, match="recovery_required"),
    ):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    txn = ActionTransaction.objects.get(pk=txn_id)
    assert txn.state == "recovery_required"
    assert _ops(txn_id)[0].state == "uncertain"
    assert len(_receipts(txn_id)) == 1
    assert verify_action(txn_id)["valid"]


def test_terminal_state_and_receipt_commit_together_decision3(
    actions_root, approval_key, approver_principal, monkeypatch
):
    # Given receipt issuance that fails
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full while writing the receipt")

    monkeypatch.setattr("actions.services._ledger._issue_receipt", broken)
    # When the plan is aborted, Then the terminal state rolls back with the receipt
    with pytest.raises(RuntimeError, match="disk full"):
        services.abort(transaction_id=txn_id, principal=approver_principal)
    assert ActionTransaction.objects.get(pk=txn_id).state == "approved"
    assert not AuditEvent.objects.filter(event_type="action.aborted").exists()


def test_no_terminal_transaction_ever_lacks_a_receipt_decision3(
    scripted, approval_key, approver_principal
):
    # Given one transaction through each path to a terminal state
    scenarios = [
        ({}, [write_op("ok.txt", "1")]),
        ({"execute": "raise"}, [scripted_op("k", "v")]),
        ({"execute": "not_dispatched"}, [scripted_op("k", "v")]),
        ({"verify": "fail"}, [scripted_op("k", "v")]),
        ({"verify": "raise"}, [scripted_op("k", "v")]),
        ({"revalidate": "fail"}, [scripted_op("k", "v")]),
        ({"revalidate": "fail_after:1"}, [scripted_op("k", "v")]),
        (
            {"compensate": "raise", "execute": ""},
            [scripted_op("k2", "v"), write_op("d/x.txt", "1", key="w", depends_on=["s1"])],
        ),
    ]
    for script, ops in scenarios:
        (scripted / "revalidate.count").unlink(missing_ok=True)
        set_script(scripted, **script)
        (scripted / "d").mkdir(exist_ok=True)  # a folder that exists at staging...
        txn_id = stage_and_approve(ops, approver_principal)
        (scripted / "d").rmdir()  # ...and is gone at commit (not dispatched)
        services.commit(transaction_id=txn_id, principal=approver_principal)
    aborted = stage_and_approve([write_op("z.txt", "1")], approver_principal)
    services.abort(transaction_id=aborted, principal=approver_principal)
    # Then every terminal transaction has exactly one receipt and verifies
    terminal = ActionTransaction.objects.filter(state__in=formats.TERMINAL_STATES)
    states = set(terminal.values_list("state", flat=True))
    assert {"committed", "uncertain", "compensated", "aborted", "partial"} <= states
    for txn in terminal:
        assert ActionReceipt.objects.filter(transaction=txn).count() == 1, txn.state
        assert verify_action(txn.id, authority=_authority())["valid"], txn.state
        assert txn.terminal_at is not None
