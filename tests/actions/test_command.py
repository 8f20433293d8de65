"""``manage.py actions``: every sub-verb, clear refusals with exit status 2, nothing written."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from access.models import Role
from actions.models import ActionOperation, ActionTransaction
from tests.actions.conftest import SCOPE, child_database_url, grant, table_counts, write_op
from tests.actions.test_journal import make_journal

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("actions", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def refused(*args: str, code: int = 2) -> str:
    with pytest.raises(CommandError) as info:
        run(*args)
    assert info.value.returncode == code
    return str(info.value)


@pytest.fixture
def plan_file(tmp_path) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"operations": [write_op("cli.txt", "from the command line")]}))
    return path


def _stage(plan_file: Path) -> str:
    return json.loads(run("stage", "--scope", SCOPE, "--plan", str(plan_file)))["transaction_id"]


def test_stage_show_list(actions_root, plan_file):
    txn_id = _stage(plan_file)
    assert ActionTransaction.objects.get().actor_id == "agent"
    shown = json.loads(run("show", txn_id))
    assert shown["transaction"]["state"] == "awaiting_approval"
    assert "+from the command line" in shown["operations"][0]["diff"]
    listing = run("list", "--state", "awaiting_approval")
    assert txn_id in listing and "awaiting_approval" in listing


def test_stage_from_stdin_with_mode(actions_root, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps([write_op("s.txt", "x")])))
    out = json.loads(
        run("stage", "--scope", SCOPE, "--plan", "-", "--mode", "preview", "--actor", "bot-7")
    )
    assert out["state"] == "staged"
    assert ActionTransaction.objects.get().actor_id == "bot-7"


def test_stage_refusals_write_nothing(actions_root, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    before = table_counts()
    assert "not valid JSON" in refused("stage", "--scope", SCOPE, "--plan", str(bad))
    assert "cannot read the plan file" in refused(
        "stage", "--scope", SCOPE, "--plan", str(tmp_path / "nope")
    )
    good = tmp_path / "good.json"
    good.write_text(json.dumps([write_op("a.txt", "x")]))
    assert "invalid scope" in refused("stage", "--scope", "acme:alice", "--plan", str(good))
    assert "at least one operation" in refused(
        "stage", "--scope", SCOPE, "--plan", _empty(tmp_path)
    )
    assert table_counts() == before


def _empty(tmp_path: Path) -> str:
    path = tmp_path / "empty.json"
    path.write_text("[]")
    return str(path)


def test_approve_commit_verify_purge(actions_root, approval_key, approver, plan_file):
    txn_id = _stage(plan_file)
    assert json.loads(run("approve", txn_id, "--as", "ada"))["state"] == "approved"
    result = json.loads(run("commit", txn_id, "--as", "ada"))
    assert result["transaction"]["state"] == "committed"
    assert result["receipt"]["format"] == "aetna-action-receipt-v1"
    assert (actions_root / "cli.txt").read_text() == "from the command line"
    assert run("verify", txn_id).startswith(f"OK   {txn_id}")
    purged = json.loads(run("purge-payloads", txn_id, "--as", "ada"))
    assert purged["purged_count"] >= 2


def test_approval_key_file_option(actions_root, approver, plan_file, tmp_path, settings):
    settings.AETNAWEB_APPROVAL_KEY = ""
    key = tmp_path / "key"
    key.write_text("m" * 48)
    txn_id = _stage(plan_file)
    run("approve", txn_id, "--as", "ada", "--approval-key-file", str(key))
    assert json.loads(run("commit", txn_id, "--as", "ada", "--approval-key-file", str(key)))[
        "receipt"
    ]
    short = tmp_path / "short"
    short.write_text("m" * 8)
    other = _stage(plan_file)
    assert "at least 32 bytes" in refused(
        "approve", other, "--as", "ada", "--approval-key-file", str(short)
    )


def test_approve_refusals_write_nothing(
    actions_root, approval_key, approver, plan_file, django_user_model, settings
):
    txn_id = _stage(plan_file)
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-viewer-1")
    grant(viewer, "acme:*:*", Role.VIEWER)
    agent_user = django_user_model.objects.create_user(username="agent", password="pw-agent-user-1")
    grant(agent_user, "acme:*:*", Role.APPROVER)
    before = table_counts()
    assert "no active user named 'ghost'" in refused("approve", txn_id, "--as", "ghost")
    assert "refused" in refused("approve", txn_id, "--as", "vic")
    assert "another approver must approve it" in refused("approve", txn_id, "--as", "agent")
    assert "no guarded-action transaction" in refused("approve", "act_nope", "--as", "ada")
    settings.AETNAWEB_APPROVAL_KEY = ""
    assert "approval is disabled: no approval key is configured" in refused(
        "approve", txn_id, "--as", "ada"
    )
    assert table_counts() == before
    with pytest.raises(CommandError):  # --as is required for deciding verbs
        call_command("actions", "approve", txn_id, stdout=io.StringIO(), stderr=io.StringIO())


def test_abort_deny_recover(actions_root, approval_key, approver, plan_file):
    first, second, third = (_stage(plan_file) for _ in range(3))
    assert (
        json.loads(run("abort", first, "--as", "ada", "--reason", "dup"))["transaction"]["state"]
        == "aborted"
    )
    assert "cannot abort from aborted" in refused("abort", first, "--as", "ada")
    denied = json.loads(run("deny", second, "--as", "ada", "--reason", "wrong file"))
    assert denied["transaction"]["state"] == "aborted"
    assert ActionTransaction.objects.get(pk=second).abort_reason == "wrong file"
    assert "does not require interrupted-run recovery" in refused("recover", third, "--as", "ada")
    ActionTransaction.objects.filter(pk=third).update(state="committing")
    ActionOperation.objects.filter(transaction_id=third).update(state="executing")
    assert (
        json.loads(run("recover", third, "--as", "ada"))["transaction"]["state"]
        == "recovery_required"
    )


def test_commit_and_purge_refusals(actions_root, approval_key, approver, plan_file):
    txn_id = _stage(plan_file)
    before = table_counts()
    assert "not approved" in refused("commit", txn_id, "--as", "ada")
    assert "only be purged from a finished transaction" in refused(
        "purge-payloads", txn_id, "--as", "ada"
    )
    assert table_counts() == before


def test_verify_failure_exits_1(actions_root, approval_key, approver, plan_file):
    txn_id = _stage(plan_file)
    ActionOperation.objects.update(operation="delete_file")
    out = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("actions", "verify", txn_id, stdout=out, stderr=io.StringIO())
    assert info.value.returncode == 1
    assert out.getvalue().startswith(f"FAIL {txn_id}")
    assert "plan hash" in out.getvalue()


def test_import_journal(tmp_path):
    journal = make_journal(tmp_path / "journal.sqlite3")
    out = json.loads(run("import-journal", str(journal), "--scope", SCOPE))
    assert out["imported"][0]["source_transaction_id"] == "txn-1"
    assert "not a file" in refused("import-journal", str(tmp_path / "missing"), "--scope", SCOPE)


@pytest.mark.django_db(transaction=True)
def test_real_process_without_key_exits_non_zero_with_one_line(
    actions_root, plan_file, django_user_model
):
    # Given a staged plan and an approver, in a database a child process can read
    user = django_user_model.objects.create_user(username="ada", password="pw-ada-approver-1")
    grant(user, "acme:*:*", Role.APPROVER)
    txn_id = _stage(plan_file)
    env = {
        **os.environ,
        "DATABASE_URL": child_database_url(),
        "AETNAWEB_APPROVAL_KEY": "",
        "AETNAWEB_APPROVAL_KEY_FILE": "",
    }
    # When approve runs without a key
    result = subprocess.run(
        [sys.executable, "manage.py", "actions", "approve", txn_id, "--as", "ada"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Then it exits non-zero with one clear line, and nothing changed
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "approval is disabled: no approval key is configured" in result.stderr
    assert ActionTransaction.objects.get(pk=txn_id).state == "awaiting_approval"


def test_recover_reports_and_removes_the_temporary_file_a_crashed_write_left(
    actions_root, approval_key, approver, plan_file
):
    # Given a commit that died inside the filesystem adapter's atomic write: the
    # temporary file (named by the adapter from the operation's idempotency key) is
    # left beside the target, next to another run's temporary file and a user's file
    from actions.adapters.filesystem import _temp_tag

    txn = _stage(plan_file)
    run("approve", txn, "--as", "ada")
    ActionTransaction.objects.filter(pk=txn).update(state="committing")
    ActionOperation.objects.filter(transaction_id=txn).update(state="executing")
    op = ActionOperation.objects.get(transaction_id=txn)
    ours = actions_root / f".cli.txt.{_temp_tag(op.idempotency_key)}.0a1b2c3d.aetnaweb-tmp"
    ours.write_text("from the command line")
    theirs = actions_root / f".cli.txt.{_temp_tag('another-run')}.0a1b2c3d.aetnaweb-tmp"
    theirs.write_text("another run, maybe alive")
    (actions_root / "notes.txt").write_text("mine")
    # When an operator recovers the run
    result = json.loads(run("recover", txn, "--as", "ada"))
    # Then the run is fenced, and our temporary file is reported and removed
    assert result["transaction"]["state"] == "recovery_required"
    assert result["leftovers"] == [
        {
            "operation_id": op.id,
            "path": ours.name,
            "bytes": len("from the command line"),
            "removed": True,
            "kept_because": None,
        }
    ]
    assert not ours.exists()
    # And nothing else in the folder was touched, nor the target created
    assert theirs.exists() and (actions_root / "notes.txt").read_text() == "mine"
    assert not (actions_root / "cli.txt").exists()


def test_recover_keeps_a_leftover_that_is_not_a_regular_file(
    actions_root, approval_key, approver, plan_file
):
    from actions.adapters.filesystem import _temp_tag

    txn = _stage(plan_file)
    run("approve", txn, "--as", "ada")
    ActionTransaction.objects.filter(pk=txn).update(state="committing")
    op = ActionOperation.objects.get(transaction_id=txn)
    odd = actions_root / f".cli.txt.{_temp_tag(op.compensation_key)}.0a1b2c3d.aetnaweb-tmp"
    odd.symlink_to(actions_root / "elsewhere")
    result = json.loads(run("recover", txn, "--as", "ada"))
    assert [(i["removed"], i["kept_because"]) for i in result["leftovers"]] == [
        (False, "not a regular file")
    ]
    assert odd.is_symlink()


def test_the_adapter_names_its_temporary_file_after_the_attempt_key(actions_root, monkeypatch):
    # The convention recover relies on: seen at the moment of the rename
    from actions.adapters import filesystem
    from actions.adapters.filesystem import FilesystemAdapter, _temp_tag

    seen: list[str] = []
    real_replace = os.replace

    def watching_replace(src, dst, **kwargs):
        seen.append(src)
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(filesystem.os, "replace", watching_replace)
    fd = os.open(actions_root, os.O_RDONLY)
    try:
        FilesystemAdapter._atomic_write(fd, "f.txt", b"x", 0o600, "key-1")
    finally:
        os.close(fd)
    assert len(seen) == 1
    assert seen[0].startswith(f".f.txt.{_temp_tag('key-1')}.") and seen[0].endswith(".aetnaweb-tmp")
    assert (actions_root / "f.txt").read_bytes() == b"x"
