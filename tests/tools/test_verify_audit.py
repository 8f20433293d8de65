"""tools/verify_audit.py: standalone, read-only, and in agreement with the service verifier.

The tool runs as a subprocess on the database the application wrote (the
SQLite test database file; on PostgreSQL a SQLite copy of ``audit_log``, the
file an operator would hand an auditor). For every tampering case the two
verifiers must print the same verdicts and the same reasons.
"""

from __future__ import annotations

import ast
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from hypothesis import given

from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit import selectors
from audit.canonical import canonical_json
from audit.checkpoints import verify_checkpoints
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from audit.services import create_checkpoint
from audit.verification import COLUMNS, verify_all
from tests.audit.conftest import TOOL, append, mixed_chains, tamper, tool
from tests.audit.test_canonical import json_values
from tests.audit.test_receipts import forget

# The subprocess reads the SQLite test database file, so on SQLite the data must
# be committed; on PostgreSQL the tool reads a copy made on the test's own
# connection, and a rolled-back test spares the slow flush of every table.
committed = pytest.mark.django_db(transaction=django_settings.DATABASE_VENDOR == "sqlite")

SUBJECTS = ["acme:alice:proj", "acme:*:*", "zeta:bob:x"]


def database_file(tmp_path: Path) -> Path:
    """The SQLite file the tool reads: the test database itself, or a copy of audit_log."""
    if connection.vendor == "sqlite":
        return Path(connection.settings_dict["NAME"])
    path = tmp_path / "audit-copy.sqlite3"
    path.unlink(missing_ok=True)
    copy = sqlite3.connect(path)
    copy.execute(f"CREATE TABLE audit_log ({', '.join(COLUMNS)}, PRIMARY KEY (sequence))")
    rows = AuditEvent.objects.order_by("sequence").values_list(*COLUMNS)
    copy.executemany(f"INSERT INTO audit_log VALUES ({', '.join('?' * len(COLUMNS))})", rows)
    copy.commit()
    copy.close()
    return path


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60, check=False
    )


def parse_report(stdout: str) -> dict[str, list[str] | None]:
    """label -> reasons (``None`` for OK) from ``OK x`` / ``FAIL x`` + indented lines."""
    report: dict[str, list[str] | None] = {}
    label = None
    for line in stdout.splitlines():
        if line.startswith("  "):
            report[label].append(line[2:])
        elif line.startswith(("OK ", "FAIL ")):
            verdict, label = line.split(" ", 1)
            report[label] = None if verdict == "OK" else []
    return report


def service_report(checkpoints: Path, receipt: Path) -> dict[str, list[str] | None]:
    report: dict[str, list[str] | None] = {}
    for chain in verify_all(principal=SYSTEM).subjects:
        report[chain.subject_id] = None if chain.ok else chain.failure_lines()
    for result in verify_checkpoints(checkpoints.read_text().splitlines(), principal=SYSTEM):
        label = f"checkpoint {checkpoints} line {result.line_number}"
        report[label] = None if result.ok else result.failures
    failures = verify_deletion_receipt(json.loads(receipt.read_text()), principal=SYSTEM)
    report[f"receipt {receipt}"] = failures or None
    return report


def set_column(column: str, value, sequence: int) -> None:
    tamper(f"UPDATE audit_log SET {column} = %s WHERE sequence = %s", [value, sequence])


def chain_of(events, subject):
    return [e for e in events if e.subject_id == subject]


CASES: dict[str, Callable[[list, object], None]] = {
    "untouched": lambda events, purge: None,
    "payload edited": lambda e, p: set_column("payload", '{"n":-1}', e[4].sequence),
    "event_hash edited": lambda e, p: set_column("event_hash", "f" * 64, e[1].sequence),
    "prev_hash edited": lambda e, p: set_column("prev_hash", "e" * 64, e[5].sequence),
    "created_at edited": lambda e, p: set_column(
        "created_at", "2001-01-01T00:00:00+00:00", e[2].sequence
    ),
    "first prev_hash set": lambda e, p: set_column("prev_hash", "d" * 64, e[0].sequence),
    "middle row deleted": lambda e, p: tamper(
        "DELETE FROM audit_log WHERE sequence = %s", [e[6].sequence]
    ),
    "first row deleted": lambda e, p: tamper(
        "DELETE FROM audit_log WHERE sequence = %s", [e[0].sequence]
    ),
    "newest rows deleted": lambda e, p: tamper(
        "DELETE FROM audit_log WHERE sequence >= %s", [p.sequence]
    ),
    "payload not JSON": lambda e, p: set_column("payload", "{oops", e[3].sequence),
    "payload an array": lambda e, p: set_column("payload", "[1,2]", e[3].sequence),
    "payload NaN": lambda e, p: set_column("payload", '{"n":NaN}', e[3].sequence),
    "payload infinite": lambda e, p: set_column("payload", '{"n":1e999}', e[3].sequence),
    "payload re-spaced": lambda e, p: set_column(
        "payload",
        " " + json.dumps(json.loads(AuditEvent.objects.get(pk=e[3].pk).payload), indent=2),
        e[3].sequence,
    ),
    "subject not canonical": lambda e, p: set_column("subject_id", "acme:alice", e[0].sequence),
    "row moved to another chain": lambda e, p: set_column(
        "subject_id", "zeta:bob:x", e[0].sequence
    ),
    "purge event edited": lambda e, p: set_column(
        "payload", '{"purged_episode_ids":[],"purged_record_ids":[]}', p.sequence
    ),
    "every actor edited": lambda e, p: tamper("UPDATE audit_log SET actor = 'mallory'"),
}


@committed
@pytest.mark.parametrize("case", list(CASES))
def test_service_and_tool_agree(case, tmp_path, settings):
    # Given chains across subjects, a checkpoint kept elsewhere and a deletion receipt
    settings.AETNAWEB_CHECKPOINT_SINK = str(tmp_path / "checkpoints.jsonl")
    events = mixed_chains(SUBJECTS, per_subject=8)
    purge, receipt = forget(subject="acme:alice:proj")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    append("acme:alice:proj")
    checkpoints = tmp_path / "checkpoints.jsonl"
    receipt_file = tmp_path / "receipt.json"
    receipt_file.write_text(json.dumps(receipt))
    # When the database is tampered with (or not)
    CASES[case](events, purge)
    # Then the standalone tool, run on that database, reaches the service's verdicts
    expected = service_report(checkpoints, receipt_file)
    done = run_tool(
        str(database_file(tmp_path)),
        "--checkpoints",
        str(checkpoints),
        "--receipt",
        str(receipt_file),
    )
    assert done.stderr == ""
    assert parse_report(done.stdout) == expected
    everything_ok = all(reasons is None for reasons in expected.values())
    assert done.returncode == (0 if everything_ok else 1)
    assert everything_ok == (case in {"untouched", "payload re-spaced"})
    if case == "newest rows deleted":  # the documented limit: only the checkpoint notices
        assert all(expected[s] is None for s in SUBJECTS)
        assert expected[f"checkpoint {checkpoints} line 1"] is not None


@committed
def test_a_column_holding_a_blob_is_named_by_both(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL types the column: only SQLite can hold a BLOB in a text column")
    events = [append("acme:alice:proj") for _ in range(2)]
    tamper("UPDATE audit_log SET actor = X'00ff' WHERE sequence = %s", [events[0].sequence])
    [report] = verify_all(principal=SYSTEM).subjects
    assert report.failure_lines() == [f"sequence {events[0].sequence}: {tool.NOT_TEXT}"]
    done = run_tool(str(database_file(tmp_path)))
    assert parse_report(done.stdout) == {"acme:alice:proj": report.failure_lines()}


@committed
def test_subject_option_and_summary_line(tmp_path):
    mixed_chains(SUBJECTS, per_subject=2)
    done = run_tool(str(database_file(tmp_path)), "--subject", "acme:*:*")
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["OK acme:*:*", "verified: 2 events in 1 chains"]
    unknown = run_tool(str(database_file(tmp_path)), "--subject", "nobody:*:*")
    assert unknown.stdout.splitlines() == ["OK nobody:*:*", "verified: 0 events in 1 chains"]


@committed
def test_importable_functions_agree_with_the_service(tmp_path):
    events = mixed_chains(SUBJECTS, per_subject=3)
    purge, receipt = forget()
    set_column("actor", "mallory", events[1].sequence)
    conn = tool.open_readonly(str(database_file(tmp_path)))
    try:
        for report in verify_all(principal=SYSTEM).subjects:
            assert tool.verify_chain(conn, report.subject_id) == report.failure_lines()
        assert (
            tool.verify_receipt(conn, receipt)
            == verify_deletion_receipt(receipt, principal=SYSTEM)
            == []
        )
        document = create_checkpoint(principal=SYSTEM, actor="auditor", sink=tmp_path / "cp.jsonl")
        assert tool.digest(document) == tool.digest(json.loads(canonical_json(document)))
        assert (
            tool.verify_checkpoint(conn, document)
            == verify_checkpoints([canonical_json(document)], principal=SYSTEM)[0].failures
        )
        # read-only: the verifier cannot write to what it checks
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM audit_log")
    finally:
        conn.close()
    assert purge.sequence


@given(json_values)
def test_tool_canonical_json_matches_the_application(value):
    assert tool.canonical_json(value) == canonical_json(value)


def test_usage_errors_exit_2_with_one_line(tmp_path):
    missing = run_tool(str(tmp_path / "nope.sqlite3"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "database not found" in missing.stderr
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()
    no_table = run_tool(str(empty))
    assert no_table.returncode == 2 and "cannot read audit_log" in no_table.stderr
    no_args = run_tool()
    assert no_args.returncode == 2 and no_args.stderr.count("\n") == 1
    db = tmp_path / "ok.sqlite3"
    sqlite3.connect(db).execute(f"CREATE TABLE audit_log ({', '.join(COLUMNS)})").connection.close()
    unreadable = run_tool(str(db), "--checkpoints", str(tmp_path / "missing.jsonl"))
    assert unreadable.returncode == 2 and "cannot read checkpoint file" in unreadable.stderr
    malformed = tmp_path / "bad.jsonl"
    malformed.write_text("not json\n")
    bad = run_tool(str(db), "--checkpoints", str(malformed))
    assert bad.returncode == 1
    assert f"FAIL checkpoint {malformed} line 1\n  not JSON:" in bad.stdout


def test_the_tool_imports_only_the_standard_library():
    tree = ast.parse(TOOL.read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
    # 'cryptography' is optional: imported inside a try, for Ed25519 signatures only.
    assert modules <= set(sys.stdlib_module_names) | {"__future__", "cryptography"}
    source = TOOL.read_text()
    assert source.count("from cryptography") == 2 and "except ImportError:" in source
    # The documented entry points are defined in the tool itself, not imported
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name in ("canonical_json", "digest", "verify_chain", "verify_receipt", "verify_checkpoint"):
        assert name in defined
        assert f"``{name}(" in tool.__doc__


@committed
def test_an_export_file_verifies_like_the_database(tmp_path):
    # Given a tampered database and its export (the route for PostgreSQL deployments)
    events = mixed_chains(SUBJECTS, per_subject=4)
    set_column("payload", '{"n":-1}', events[5].sequence)
    export = tmp_path / "audit.jsonl"
    export.write_text("".join(selectors.export_lines(access.system_principal())))
    # When the tool reads the export instead of the database
    from_export = run_tool("--export", str(export))
    # Then it reaches the same verdicts as the service
    expected = {
        r.subject_id: (None if r.ok else r.failure_lines())
        for r in verify_all(principal=SYSTEM).subjects
    }
    assert parse_report(from_export.stdout) == expected
    assert from_export.returncode == 1


def test_a_malformed_export_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sequence": 1}\n[1]\n')
    done = run_tool("--export", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert f"export {bad} line 2: not an audit_log row" in done.stderr
    assert run_tool("--export", str(tmp_path / "missing.jsonl")).returncode == 2
