"""A12 receipts and A14 the in-package verifier (R-*, V-1, V-3, T-9)."""

from __future__ import annotations

import json

import pytest

from access.models import Role
from actions import formats, services
from actions.errors import ActionStateError
from actions.models import (
    ActionApproval,
    ActionDependency,
    ActionEvidence,
    ActionOperation,
    ActionReceipt,
    ActionTransaction,
)
from actions.services._ledger import _issue_receipt
from actions.verification import verify_action
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.canonical import digest
from audit.models import AuditEvent
from tests.actions.conftest import APPROVAL_KEY, SCOPE, grant, stage_and_approve, write_op

pytestmark = pytest.mark.django_db


def _authority():
    from actions.approvals import ApprovalAuthority

    return ApprovalAuthority(APPROVAL_KEY.encode())


@pytest.fixture
def committed(actions_root, approval_key, approver_principal) -> str:
    txn_id = stage_and_approve(
        [write_op("a.txt", "x", key="a"), write_op("b.txt", "y", key="b", depends_on=["a"])],
        approver_principal,
    )
    services.commit(transaction_id=txn_id, principal=approver_principal)
    return txn_id


def _failures(txn_id: str, authority=None) -> list[str]:
    return verify_action(txn_id, authority=authority)["failures"]


def test_verify_returns_the_v1_shape(committed):
    report = verify_action(committed, authority=_authority())
    assert report == {
        "valid": True,
        "transaction_id": committed,
        "state": "committed",
        "plan_hash": ActionTransaction.objects.get().plan_hash,
        "failures": [],
    }


def test_unknown_transaction_v1():
    report = verify_action("act_" + "f" * 32)
    assert report["failures"] == ["transaction not found"] and not report["valid"]


def test_receipt_verifier_detects_operational_plan_tampering(committed):
    # T-9: changing the operation to delete_file after commit
    ActionOperation.objects.filter(transaction_id=committed, operation_key="a").update(
        operation="delete_file"
    )
    report = verify_action(committed)
    assert not report["valid"]
    assert any("plan hash" in failure for failure in report["failures"])


@pytest.mark.parametrize(
    "tamper",
    [
        lambda txn: ActionEvidence.objects.filter(operation__transaction_id=txn).update(
            attested=False
        ),
        lambda txn: ActionEvidence.objects.filter(operation__transaction_id=txn).update(
            trust_tier="user_confirmed"
        ),
        lambda txn: ActionDependency.objects.filter(operation__transaction_id=txn).delete(),
        lambda txn: ActionOperation.objects.filter(transaction_id=txn, operation_key="b").update(
            ordinal=7
        ),
        lambda txn: ActionOperation.objects.filter(transaction_id=txn, operation_key="a").update(
            arguments_digest="0" * 64
        ),
        lambda txn: ActionTransaction.objects.filter(pk=txn).update(actor_id="someone-else"),
        lambda txn: ActionTransaction.objects.filter(pk=txn).update(policy_hash="0" * 64),
    ],
)
def test_any_plan_row_edit_breaks_the_plan_hash(committed, tamper):
    tamper(committed)
    assert "persisted action plan does not match its plan hash" in _failures(committed)


def test_approval_checks(committed):
    approval = ActionApproval.objects.get()
    ActionApproval.objects.filter(pk=approval.pk).update(approver_principal="mallory")
    assert "approval digest is invalid" in _failures(committed)
    assert "approval signature is invalid" in _failures(committed, _authority())
    ActionApproval.objects.filter(pk=approval.pk).update(
        approver_principal="ada", plan_hash="0" * 64
    )
    assert "approval plan hash does not match transaction" in _failures(committed)


def test_expired_historical_approval_still_verifies_at_its_issued_at(committed):
    # Given the recorded approval replaced by a correctly signed one that expired long ago
    from datetime import UTC, datetime, timedelta

    txn = ActionTransaction.objects.get()
    old = _authority().issue(
        transaction_id=committed,
        plan_hash=txn.plan_hash,
        approver="ada",
        now=datetime.now(UTC) - timedelta(hours=2),
    )
    ActionApproval.objects.update(
        issued_at=old["issued_at"],
        expires_at=old["expires_at"],
        nonce=old["nonce"],
        signature=old["signature"],
        approval_digest=formats.approval_digest(old),
    )
    # Then the signature is checked at its own issued_at, so history stays valid (V-1)
    assert verify_action(committed, authority=_authority())["valid"]


def test_receipt_digest_and_binding_checks(committed):
    row = ActionReceipt.objects.get()
    receipt = json.loads(row.receipt_json)
    # A receipt edited without re-hashing
    ActionReceipt.objects.filter(pk=row.pk).update(
        receipt_json=json.dumps({**receipt, "terminal_state": "aborted"})
    )
    assert _failures(committed) == ["action receipt digest is invalid"]
    # A receipt re-hashed to claim another event
    forged = {**receipt, "audit_event_hash": "0" * 64}
    forged["receipt_sha256"] = formats.receipt_sha256(forged)
    ActionReceipt.objects.filter(pk=row.pk).update(receipt_json=json.dumps(forged))
    assert "action receipt is not bound to its audit event" in _failures(committed)
    # A receipt re-hashed with other operation results
    forged = {**receipt, "operation_receipts": receipt["operation_receipts"][:1]}
    forged["receipt_sha256"] = formats.receipt_sha256(forged)
    ActionReceipt.objects.filter(pk=row.pk).update(receipt_json=json.dumps(forged))
    assert "action receipt content does not match its audit event" in _failures(committed)
    # A receipt re-hashed with another plan hash
    forged = {**receipt, "plan_hash": "0" * 64}
    forged["receipt_sha256"] = formats.receipt_sha256(forged)
    ActionReceipt.objects.filter(pk=row.pk).update(receipt_json=json.dumps(forged))
    assert "action receipt plan hash does not match transaction" in _failures(committed)
    # A receipt re-hashed with an earlier date (issue 29): bound to its event's time
    forged = {**receipt, "created_at": "2025-01-01T00:00:00.000000Z"}
    forged["receipt_sha256"] = formats.receipt_sha256(forged)
    ActionReceipt.objects.filter(pk=row.pk).update(receipt_json=json.dumps(forged))
    assert _failures(committed) == ["action receipt created_at is not the time of its audit event"]
    # A receipt re-hashed with a field its format does not define
    forged = {**receipt, "note": "Approved by the board"}
    forged["receipt_sha256"] = formats.receipt_sha256(forged)
    ActionReceipt.objects.filter(pk=row.pk).update(receipt_json=json.dumps(forged))
    assert _failures(committed) == ["action receipt holds fields its format does not define: note"]


def test_state_edited_after_the_receipt_is_caught(committed):
    ActionTransaction.objects.filter(pk=committed).update(state="compensated")
    assert "action receipt terminal state does not match transaction" in _failures(committed)


def test_terminal_transaction_without_receipt_is_caught(committed):
    ActionReceipt.objects.all().delete()
    assert _failures(committed) == ["terminal transaction has no receipt"]


def test_audit_chain_edit_is_caught(committed):
    event = AuditEvent.objects.get(event_type="action.committed")
    AuditEvent.objects.filter(pk=event.pk).update(actor="mallory")
    assert "subject audit chain is invalid" in _failures(committed)


def test_receipt_issue_is_idempotent_and_checks_state_r1(committed, actions_root):
    from django.db import transaction

    first = json.loads(ActionReceipt.objects.get().receipt_json)
    with transaction.atomic():
        assert _issue_receipt(committed, "committed", "agent") == first
    assert ActionReceipt.objects.count() == 1
    open_txn = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("c.txt", "z")]
    ).transaction_id
    with (
        pytest.raises(
            ActionStateError, match="cannot issue aborted receipt for transaction in state"
        ),
        transaction.atomic(),
    ):
        _issue_receipt(open_txn, "aborted", "agent")


def test_receipt_content_r2_r3_f3(committed):
    row = ActionReceipt.objects.get()
    receipt = json.loads(row.receipt_json)
    ops = list(ActionOperation.objects.filter(transaction_id=committed).order_by("ordinal"))
    assert receipt["operation_receipts"] == [
        {
            "operation_id": op.id,
            "adapter": "filesystem",
            "operation": "write_text",
            "state": "verified",
            "result_digest": op.result_digest,
            "compensation_digest": None,
        }
        for op in ops
    ]
    event = AuditEvent.objects.get(event_type="action.receipt_issued")
    assert (receipt["audit_event_id"], receipt["audit_event_hash"], receipt["created_at"]) == (
        event.event_id,
        event.event_hash,
        event.created_at,
    )
    assert json.loads(event.payload) == {
        "transaction_id": committed,
        "plan_hash": receipt["plan_hash"],
        "terminal_state": "committed",
        "operations_digest": digest(receipt["operation_receipts"]),
    }
    body = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
    assert receipt["receipt_sha256"] == digest(body)
    assert row.id == "rcp_" + receipt["receipt_sha256"][:24]


def test_verify_service_permissions(committed, django_user_model, approver_principal):
    assert services.verify(transaction_id=committed, principal=approver_principal).valid
    auditor = django_user_model.objects.create_user(username="aud", password="pw-aud-auditor-1")
    grant(auditor, "acme:*:*", Role.AUDITOR)
    assert services.verify(
        transaction_id=committed, principal=access.operator_principal(auditor)
    ).valid
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-viewer-1")
    grant(viewer, "acme:*:*", Role.VIEWER)
    with pytest.raises(access.AccessDenied):
        services.verify(transaction_id=committed, principal=access.operator_principal(viewer))


def test_canonical_json_is_byte_compatible_c1():
    from audit.canonical import canonical_json

    assert (
        canonical_json({"b": 1, "a": "é", "c": [True, None]})
        == '{"a":"\\u00e9","b":1,"c":[true,null]}'
    )
