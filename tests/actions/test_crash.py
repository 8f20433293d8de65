"""Real processes: a commit killed between intent and effect, and two commits racing.

Both run on SQLite and PostgreSQL: the child processes connect to this test
run's own database (committed data, ``transaction=True``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from actions import services
from actions.errors import ActionStateError
from actions.models import ActionAttempt, ActionOperation, ActionTransaction
from actions.verification import verify_action
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.verification import verify_subject
from tests.actions.conftest import (
    APPROVAL_KEY,
    SCOPE,
    child_database_url,
    event_types,
    stage_and_approve,
)
from tests.actions.fakes import scripted_op, set_script

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BASE_DIR = Path(__file__).resolve().parents[2]

CHILD = """
import os, sys
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
django.setup()
from tests.actions.fakes import register_scripted
register_scripted(os.environ["AETNAWEB_ACTIONS_ROOT"])
from actions import services
from actions.errors import ActionError
from aetnaweb.access import SYSTEM
try:
    result = services.commit(transaction_id=sys.argv[1], principal=SYSTEM)
    print("RESULT", result.transaction.state, flush=True)
except ActionError as exc:
    print("REFUSED", type(exc).__name__, exc, flush=True)
"""


def _spawn(txn_id: str, root: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": child_database_url(),
        "AETNAWEB_ACTIONS_ROOT": str(root),
        "AETNAWEB_APPROVAL_KEY": APPROVAL_KEY,
        "PYTHONPATH": str(BASE_DIR),
    }
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, txn_id],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, child: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if child.poll() is not None:
            raise AssertionError(f"child exited early: {child.communicate()}")
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError("child never reached the effect")
        time.sleep(0.05)


def test_commit_killed_between_intent_and_effect_is_fenced_by_recover(
    scripted, approval_key, approver_principal, tmp_path
):
    # Given an approved plan whose adapter blocks after the intent is recorded
    set_script(scripted, execute="block")
    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    child = _spawn(txn_id, scripted)
    try:
        _wait_for(scripted / "executing.marker", child)
        # Then the intent is durable before the effect (EX-3), seen from this process
        assert ActionTransaction.objects.get(pk=txn_id).state == "committing"
        op = ActionOperation.objects.get(transaction_id=txn_id)
        assert op.state == "executing"
        assert ActionAttempt.objects.get(operation=op).state == "executing"
        assert "action.effect_executing" in event_types(txn_id)
        # When the process is killed outright
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert (
        ActionTransaction.objects.get(pk=txn_id).state == "committing"
    )  # only a dead process leaves this
    # And an operator recovers it
    result = services.recover(transaction_id=txn_id, principal=approver_principal)
    # Then it is recovery_required, the operation uncertain, and nothing was retried
    assert result.transaction.state == "recovery_required"
    assert ActionOperation.objects.get(transaction_id=txn_id).state == "uncertain"
    assert ActionAttempt.objects.get().state == "executing"  # left as the dead run left it
    assert not (scripted / "executions.log").exists()
    assert not (scripted / "kv.json").exists()
    with pytest.raises(ActionStateError):
        services.commit(transaction_id=txn_id, principal=approver_principal)
    # And both verifiers pass
    assert verify_action(txn_id)["valid"]
    if connection.vendor == "sqlite":
        tool = subprocess.run(
            [
                sys.executable,
                str(BASE_DIR / "tools" / "verify_actions.py"),
                connection.settings_dict["NAME"],
                txn_id,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert tool.returncode == 0, tool.stdout + tool.stderr
        assert tool.stdout.startswith("OK")


def test_two_processes_committing_at_once_cannot_both_win(
    scripted, approval_key, approver_principal
):
    # Given an approved plan, and two processes held at a barrier until both passed the state check
    set_script(scripted, revalidate="barrier:2")
    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    children = [_spawn(txn_id, scripted) for _ in range(2)]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        outputs.append(out.strip() + err.strip()[-500:])
    # Then exactly one commits and the other loses the compare-and-swap
    winners = [o for o in outputs if o.startswith("RESULT committed")]
    losers = [o for o in outputs if o.startswith("REFUSED ConcurrentTransitionError")]
    assert len(winners) == 1 and len(losers) == 1, outputs
    assert "expected ['approved']" in losers[0]
    # And the effect ran once, the chain did not fork, the transaction verifies
    assert (scripted / "executions.log").read_text().count("\n") == 1
    assert AuditEvent.objects.filter(record_id=txn_id, event_type="action.committing").count() == 1
    assert verify_subject(SCOPE, principal=SYSTEM).ok
    assert verify_action(txn_id)["valid"]
