from __future__ import annotations

import pytest

from actions import selectors, services
from aetnaweb.access import SYSTEM
from tests.actions.conftest import SCOPE, write_op


@pytest.mark.django_db
def test_stage_approve_commit_smoke(actions_root, approval_key, approver_principal):
    patch = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("notes.txt", "hello")]
    )
    assert patch.state == "awaiting_approval"
    services.approve(transaction_id=patch.transaction_id, principal=approver_principal)
    result = services.commit(transaction_id=patch.transaction_id, principal=approver_principal)
    assert result.transaction.state == "committed", result
    assert (actions_root / "notes.txt").read_text() == "hello"
    report = services.verify(transaction_id=patch.transaction_id, principal=approver_principal)
    assert report.valid, report
    detail = selectors.transaction_detail(approver_principal, patch.transaction_id)
    assert detail.receipt["format"] == "aetna-action-receipt-v1"
    assert "+hello" in detail.operations[0].diff
