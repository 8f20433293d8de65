"""``actions.demo.seed_demo``: every state an operator should see, idempotent, verifiable."""

from __future__ import annotations

import pytest

from actions import selectors
from actions.demo import seed_demo
from actions.models import ActionReceipt, ActionTransaction
from actions.verification import verify_action
from aetnaweb import access
from tests.actions.conftest import table_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_dirs(tmp_path, settings):
    settings.DATA_DIR = tmp_path / "data"
    settings.AETNAWEB_ACTIONS_ROOT = str(tmp_path / "data" / "actions-root")
    return tmp_path


def test_demo_has_each_state_and_is_idempotent(demo_dirs, approval_key):
    # When the demo is seeded twice
    first = seed_demo()
    counts = table_counts()
    second = seed_demo()
    # Then the second run changes nothing
    assert table_counts() == counts
    assert "already present" in second.describe()
    # And the plans are in the states an operator should see
    assert first.states == {
        "release-notes": "awaiting_approval",
        "zephyr-runners": "committed",
        "deploy-webhook": "uncertain",
        "ledger-export": "recovery_required",
        "payroll-cleanup": "aborted",
    }
    for txn in ActionTransaction.objects.all():
        assert verify_action(txn.id)["valid"], txn.session_id
        if txn.is_terminal:
            assert ActionReceipt.objects.filter(transaction=txn).count() == 1
    # And the pending one shows its file-write preview
    pending = ActionTransaction.objects.get(state="awaiting_approval")
    detail = selectors.transaction_detail(access.system_principal(), pending.id)
    assert "+## 2.4.1" in detail.operations[0].diff
    # And the committed file is on disk, the uncertain run's write was undone
    root = demo_dirs / "data" / "actions-root" / "demo"
    assert (root / "zephyr" / "runners.txt").exists()
    assert not (root / "apollo" / "deploy-window.txt").exists()


def test_demo_without_a_key_signs_with_a_generated_demo_key(demo_dirs, settings):
    settings.AETNAWEB_APPROVAL_KEY = ""
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    summary = seed_demo()
    key_file = demo_dirs / "data" / "approval_key"
    assert key_file.exists() and (key_file.stat().st_mode & 0o777) == 0o600
    assert "approval_key" in summary.describe()
    from actions.approvals import ApprovalAuthority

    authority = ApprovalAuthority(key_file.read_bytes().strip())
    committed = ActionTransaction.objects.get(state="committed")
    assert verify_action(committed.id, authority=authority)["valid"]
