"""tools/verify_actions.py: the standalone, standard-library-only verifier (V-2, T-13).

It reads the SQLite file itself, so these tests commit their data
(``transaction=True``) and run on SQLite only.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from access.models import Role
from actions import formats, services
from actions.models import (
    ActionApproval,
    ActionDependency,
    ActionEvidence,
    ActionOperation,
    ActionReceipt,
    ActionTransaction,
)
from actions.verification import verify_action
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from tests.actions.conftest import APPROVAL_KEY, grant, stage_and_approve, write_op

TOOL = Path(__file__).resolve().parents[2] / "tools" / "verify_actions.py"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" in __import__("django.conf").conf.settings.DATABASES["default"]["ENGINE"],
        reason="the standalone verifier reads SQLite files",
    ),
]


def _load_tool():
    spec = importlib.util.spec_from_file_location("verify_actions_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _authorizing_messages(authorizing_messages) -> None:
    """The user message the action evidence here cites exists (evidence must resolve)."""


@pytest.fixture
def database() -> str:
    return connection.settings_dict["NAME"]


@pytest.fixture
def key_file(tmp_path) -> Path:
    path = tmp_path / "approval.key"
    path.write_text(APPROVAL_KEY + "\n")
    return path


@pytest.fixture
def tool():
    return _load_tool()


@pytest.fixture
def root(tmp_path, settings) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(path)
    settings.AETNAWEB_APPROVAL_KEY = APPROVAL_KEY
    return path


@pytest.fixture
def ada(django_user_model) -> access.Principal:
    user = django_user_model.objects.create_user(username="ada", password="pw-ada-approver-1")
    grant(user, "acme:*:*", Role.APPROVER)
    return access.operator_principal(user)


def _committed(principal, scope: str, root: Path) -> str:
    (root / scope.replace(":", "_")).mkdir(exist_ok=True)
    prefix = scope.replace(":", "_")
    txn_id = stage_and_approve(
        [
            write_op(f"{prefix}/a.txt", "secret body", key="a"),
            write_op(f"{prefix}/b.txt", "more", key="b", depends_on=["a"]),
        ],
        principal,
        scope=scope,
    )
    services.commit(transaction_id=txn_id, principal=principal)
    return txn_id


def _run(tool, capsys, *args) -> tuple[int, str]:
    code = tool.main([str(a) for a in args])
    return code, capsys.readouterr().out


def test_standalone_action_verifier(root, ada, database, key_file):
    # T-13: Given a committed transaction in the SQLite file
    txn_id = _committed(ada, "acme:alice:proj", root)
    # When the standalone tool runs as a subprocess with the key file
    result = subprocess.run(
        [sys.executable, str(TOOL), database, txn_id, "--approval-key-file", str(key_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Then it exits 0 and prints OK
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK")
    assert txn_id in result.stdout


def test_tool_catches_plan_edited_after_commit(root, ada, database, tool, capsys):
    txn_id = _committed(ada, "acme:alice:proj", root)
    ActionOperation.objects.filter(transaction_id=txn_id, operation_key="a").update(
        operation="delete_file"
    )
    code, out = _run(tool, capsys, database, txn_id)
    assert code == 1
    assert out.startswith(f"FAIL {txn_id}")
    assert "persisted action plan does not match its plan hash" in out
    assert not services.verify(principal=SYSTEM, transaction_id=txn_id).valid


def _edit_prepared_payload(txn: str, *, fresh_digest: bool) -> None:
    """Swap the approved content in a stored prepared payload (plan rows untouched)."""
    from actions.models import ActionPayload
    from audit.canonical import canonical_json, sha256_text

    row = ActionPayload.objects.filter(transaction_id=txn, kind="prepared").first()
    payload = json.loads(row.payload)
    payload["arguments"]["content"] = "edited after approval"
    text = canonical_json(payload)
    fields = (
        {"payload": text, "payload_digest": sha256_text(text)}
        if fresh_digest
        else {"payload": text}
    )
    ActionPayload.objects.filter(pk=row.pk).update(**fields)


def _rewrite_receipt(txn: str, **changes: str) -> None:
    """A holder's edit to the stored receipt, its unkeyed digest recomputed (issue 29)."""
    row = ActionReceipt.objects.get(transaction_id=txn)
    receipt = {**json.loads(row.receipt_json), **changes}
    receipt["receipt_sha256"] = formats.receipt_sha256(receipt)
    ActionReceipt.objects.filter(pk=row.pk).update(receipt_json=json.dumps(receipt))


TAMPERS = {
    "untouched": lambda txn: None,
    "prepared payload edited, digest refreshed": lambda txn: _edit_prepared_payload(
        txn, fresh_digest=True
    ),
    "prepared payload edited, digest stale": lambda txn: _edit_prepared_payload(
        txn, fresh_digest=False
    ),
    "operation renamed": lambda txn: ActionOperation.objects.filter(
        transaction_id=txn, operation_key="a"
    ).update(operation="delete_file"),
    "evidence attested flipped": lambda txn: ActionEvidence.objects.filter(
        operation__transaction_id=txn
    ).update(attested=False),
    "dependency dropped": lambda txn: ActionDependency.objects.filter(
        operation__transaction_id=txn
    ).delete(),
    "receipt edited": lambda txn: ActionReceipt.objects.filter(transaction_id=txn).update(
        receipt_json='{"format":"aetna-action-receipt-v1"}'
    ),
    "receipt deleted": lambda txn: ActionReceipt.objects.filter(transaction_id=txn).delete(),
    "receipt backdated, digest recomputed": lambda txn: _rewrite_receipt(
        txn, created_at="2025-01-01T00:00:00.000000Z"
    ),
    "receipt given a note, digest recomputed": lambda txn: _rewrite_receipt(
        txn, note="Deleted under GDPR Art. 17"
    ),
    "state edited": lambda txn: ActionTransaction.objects.filter(pk=txn).update(
        state="compensated"
    ),
    "plan hash edited": lambda txn: ActionTransaction.objects.filter(pk=txn).update(
        plan_hash="0" * 64
    ),
    "approval signature replaced": lambda txn: ActionApproval.objects.filter(
        transaction_id=txn
    ).update(signature="f" * 64),
    "approval plan hash edited": lambda txn: ActionApproval.objects.filter(
        transaction_id=txn
    ).update(plan_hash="1" * 64),
    "audit payload edited": lambda txn: AuditEvent.objects.filter(
        record_id=txn, event_type="action.committed"
    ).update(payload='{"plan_hash":"x","operation_ids":[]}'),
    "audit event deleted": lambda txn: AuditEvent.objects.filter(
        record_id=txn, event_type="action.effect_verified"
    ).delete(),
}


def test_tool_and_service_verifier_agree(root, ada, database, tool, capsys, key_file):
    # Given one committed transaction per tampering, each in its own scope (its own chain)
    cases = {}
    for index, (name, tamper) in enumerate(TAMPERS.items()):
        txn_id = _committed(ada, f"acme:user{index}:proj", root)
        tamper(txn_id)
        cases[name] = txn_id
    from actions.approvals import ApprovalAuthority

    authority = ApprovalAuthority(APPROVAL_KEY.encode())
    for name, txn_id in cases.items():
        service = verify_action(txn_id, authority=authority)
        code, out = _run(tool, capsys, database, txn_id, "--approval-key-file", key_file)
        # Then both verifiers reach the same verdict
        assert service["valid"] == (code == 0), (name, service, out)
        assert service["valid"] == (name == "untouched"), (name, service)


def test_tool_names_an_edited_payload(root, ada, database, tool, capsys):
    # Given a prepared payload rewritten after approval with a matching stored digest
    txn_id = _committed(ada, "acme:alice:proj", root)
    _edit_prepared_payload(txn_id, fresh_digest=True)
    code, out = _run(tool, capsys, database, txn_id)
    # Then the tool fails it, naming the payload that no longer matches the plan
    assert code == 1
    assert "prepared does not match the digests its plan hash binds" in out


def test_all_flag_and_output_format(root, ada, database, tool, capsys):
    first = _committed(ada, "acme:alice:proj", root)
    second = _committed(ada, "acme:bob:proj", root)
    code, out = _run(tool, capsys, database, "--all")
    assert code == 0
    assert out.splitlines() == [f"OK   {first}", f"OK   {second}"]
    ActionReceipt.objects.filter(transaction_id=second).delete()
    code, out = _run(tool, capsys, database, "--all")
    assert code == 1
    assert out.splitlines() == [
        f"OK   {first}",
        f"FAIL {second}",
        "     - terminal transaction has no receipt",
    ]


def test_unknown_transaction(database, tool, capsys):
    code, out = _run(tool, capsys, database, "act_" + "0" * 32)
    assert code == 1 and "transaction not found" in out


def test_usage_errors_exit_2(database, tool, tmp_path, capsys):
    short = tmp_path / "short.key"
    short.write_text("  short  \n")
    for args in (
        [database, "act_x", "--approval-key-file", short],
        [database, "act_x", "--approval-key-file", tmp_path / "missing.key"],
        [tmp_path / "missing.sqlite3", "act_x"],
        [database],
        [database, "act_x", "--all"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            tool.main([str(a) for a in args])
        assert exit_info.value.code == 2, args


def test_short_key_message(database, tool, tmp_path, capsys):
    short = tmp_path / "short.key"
    short.write_text("x" * 31)
    with pytest.raises(SystemExit):
        tool.main([database, "act_x", "--approval-key-file", str(short)])
    assert "at least 32 bytes" in capsys.readouterr().err


def test_tool_opens_the_database_read_only(database, tool):
    conn = tool.open_read_only(Path(database))
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM action_transactions")
    finally:
        conn.close()


def test_tool_uses_only_the_standard_library():
    # Given the tool and its one permitted sibling
    for path in (TOOL, TOOL.with_name("verify_audit.py")):
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.split(".")[0])
        # Then every import is the standard library (or the sibling verifier)
        # (verify_audit.py may use 'cryptography' for signatures, only when importable)
        allowed = (
            {"verify_audit", "cryptography"} if path.name == "verify_audit.py" else {"verify_audit"}
        )
        outside = {m for m in modules if m not in sys.stdlib_module_names and m not in allowed}
        assert outside == set(), (path.name, outside)


def test_tool_recomputes_the_same_plan_hash(root, ada, database, tool):
    txn_id = _committed(ada, "acme:alice:proj", root)
    conn = tool.open_read_only(Path(database))
    try:
        row = conn.execute("SELECT * FROM action_transactions WHERE id = ?", (txn_id,)).fetchone()
        assert (
            tool.recompute_plan_hash(conn, row)
            == ActionTransaction.objects.get(pk=txn_id).plan_hash
        )
    finally:
        conn.close()
    assert (
        json.loads(ActionReceipt.objects.get(transaction_id=txn_id).receipt_json)["format"]
        == formats.RECEIPT_FORMAT
    )
