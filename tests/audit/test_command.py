"""manage.py audit: every sub-verb, and every refusal as one stderr line with nothing written."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
from django.core.management import ManagementUtility

from audit import tree
from audit.canonical import canonical_json
from audit.models import AuditEvent, Checkpoint
from tests.audit.conftest import append, tamper
from tests.audit.test_receipts import forget

# run_from_argv closes connections at the end, so these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True)


def audit(*argv: str) -> tuple[int, str, str]:
    """Run ``manage.py audit ...`` in-process exactly as the shell would: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            ManagementUtility(["manage.py", "audit", *argv]).execute()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def refused(result: tuple[int, str, str], code: int, fragment: str) -> None:
    exit_code, stdout, stderr = result
    assert exit_code == code, (stdout, stderr)
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert fragment in lines[0]


# -- log -------------------------------------------------------------------------------


def test_log_appends_an_agent_event():
    code, out, err = audit(
        "log",
        "acme:alice:proj",
        "agent.tool_call",
        "--payload",
        '{"tool_sha256": "ab"}',
        "--session-id",
        "s1",
    )
    assert (code, err) == (0, "")
    event = AuditEvent.objects.get()
    assert (event.event_type, event.actor, event.session_id, event.payload) == (
        "agent.log.tool_call",
        "agent",
        "s1",
        '{"tool_sha256":"ab"}',
    )
    assert out == (
        f"appended {event.event_id} (agent.log.tool_call) to acme:alice:proj at sequence "
        f"{event.sequence} (event_hash {event.event_hash})\n"
    )


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [
        (("log", "acme:alice", "agent.x"), 1, "expected exactly three segments"),
        (("log", "acme:*:secret", "agent.x"), 1, "under no user is ambiguous"),
        (("log", "acme:alice:proj", "agent.x", "--payload", "{nope"), 1, "--payload is not JSON"),
        (("log", "acme:alice:proj", "agent.x", "--payload", "[1]"), 1, "must be a JSON object"),
        (("log", "acme:alice:proj", "agent.x", "--payload", '{"n": NaN}'), 1, "not JSON"),
        (("log", "acme:alice:proj", "memory.forget"), 1, "only agent.* events"),
        (("log", "acme:alice:proj", "agent.Bad Type"), 1, "invalid event type"),
        (("log", "acme:alice:proj"), 2, "required: event_type"),
        (("frobnicate",), 2, "invalid choice"),
    ],
)
def test_log_refusals(argv, code, fragment):
    refused(audit(*argv), code, fragment)
    assert not AuditEvent.objects.exists()


# -- show ------------------------------------------------------------------------------


def test_show_prints_the_chain_readably_and_as_json_lines():
    first = append("acme:alice:proj", record_id="rec_1")
    second = append("acme:alice:proj", session_id="s1")
    code, out, err = audit("show", "acme:alice:proj")
    assert (code, err) == (0, "")
    assert f"#{first.sequence} {first.created_at} memory.recall by system record=rec_1" in out
    assert f"prev {first.event_hash[:12]}…" in out and "(first)" in out
    assert out.splitlines()[-1] == "acme:alice:proj: 2 events; the chain holds"
    code, out, _ = audit("show", "acme:alice:proj", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["event_id"] for r in rows] == [first.event_id, second.event_id]
    tamper("UPDATE audit_log SET actor = 'mallory' WHERE sequence = %s", [first.sequence])
    assert audit("show", "acme:alice:proj")[1].splitlines()[-1].endswith("FAILS verification")


def test_show_refuses_an_invalid_scope():
    refused(audit("show", "acme"), 1, "invalid scope 'acme'")


# -- verify ----------------------------------------------------------------------------


def test_verify_passes_a_healthy_database():
    for subject in ("acme:alice:proj", "zeta:*:*"):
        append(subject)
        append(subject)
    # Events not yet integrated wait for the next batch: not a failure, said plainly
    assert "OK merkle log (0 leaves, 4 newer events wait for the next batch)" in (
        audit("verify")[1].splitlines()
    )
    tree.integrate()
    code, out, err = audit("verify")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "OK acme:alice:proj",
        "OK zeta:*:*",
        "OK merkle log (4 leaves)",
        "verified: 4 events in 2 chains",
    ]
    assert audit("verify", "--subject", "zeta:*:*")[1].splitlines()[0] == "OK zeta:*:*"


def test_verify_fails_with_each_reason_on_its_own_line():
    events = [append("acme:alice:proj") for _ in range(3)]
    append("zeta:*:*")
    tree.integrate()
    tamper(
        "UPDATE audit_log SET event_hash = %s WHERE sequence = %s", ["0" * 64, events[1].sequence]
    )
    code, out, err = audit("verify")
    assert code == 1
    assert out.splitlines() == [
        "FAIL acme:alice:proj",
        f"  sequence {events[1].sequence}: event_hash does not recompute from the event's preimage",
        f"  sequence {events[2].sequence}: prev_hash does not match the previous event's event_hash",
        "OK zeta:*:*",
        # The stored leaf still hashes the original event_hash: the log names the edit too
        "FAIL merkle log (4 leaves)",
        f"  log leaf 1 does not hash event #{events[1].sequence}'s event_hash",
    ]
    assert len(err.splitlines()) == 1 and "verification FAILED" in err


def test_verify_checks_checkpoints_and_receipts(tmp_path, checkpoint_sink):
    events = [append("acme:alice:proj") for _ in range(3)]
    assert audit("checkpoint")[0] == 0
    _, receipt = forget()
    good = tmp_path / "receipt.json"
    good.write_text(json.dumps(receipt))
    altered = tmp_path / "altered.json"
    altered.write_text(json.dumps(receipt | {"purged_record_ids": []}))
    code, out, _ = audit("verify", "--checkpoints", str(checkpoint_sink), "--receipt", str(good))
    assert code == 0
    assert f"OK checkpoint {checkpoint_sink} line 1" in out and f"OK receipt {good}" in out
    # the tail is deleted: the chain still holds, the checkpoint does not
    tamper("DELETE FROM audit_log WHERE sequence > %s", [events[1].sequence])
    code, out, err = audit(
        "verify", "--checkpoints", str(checkpoint_sink), "--receipt", str(good), str(altered)
    )
    assert code == 1 and len(err.splitlines()) == 1
    assert "OK acme:alice:proj" in out.splitlines()
    assert f"FAIL checkpoint {checkpoint_sink} line 1" in out
    assert (
        f"  subject acme:alice:proj: pinned event at sequence {events[2].sequence} is missing"
        in out
    )
    assert f"FAIL receipt {good}" in out  # its event was deleted with the tail
    assert f"FAIL receipt {altered}\n  receipt_sha256 does not match the receipt's content" in out


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("not json\n", "checkpoint line 1 is not JSON"),
        ('{"format": "aetnamem-checkpoint-v1"}\n', "created_at is missing"),
    ],
)
def test_verify_refuses_a_malformed_checkpoint_file(tmp_path, content, fragment):
    append("acme:alice:proj")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    refused(audit("verify", "--checkpoints", str(bad)), 1, fragment)


def test_verify_refuses_missing_files_and_bad_input(tmp_path):
    refused(
        audit("verify", "--checkpoints", str(tmp_path / "nope")), 1, "cannot read checkpoint file"
    )
    refused(audit("verify", "--receipt", str(tmp_path / "nope")), 1, "cannot read receipt")
    not_json = tmp_path / "r.json"
    not_json.write_text("{")
    refused(audit("verify", "--receipt", str(not_json)), 1, "is not JSON")
    refused(audit("verify", "--subject", "acme:bob"), 1, "--subject: invalid scope")


# -- checkpoint ------------------------------------------------------------------------


def test_checkpoint_prints_and_appends_the_line(tmp_path):
    append("acme:alice:proj")
    sink = tmp_path / "elsewhere" / "cp.jsonl"
    code, out, err = audit("checkpoint", "--sink", str(sink), "--actor", "auditor-7")
    assert code == 0
    stored = Checkpoint.objects.get()
    assert out == stored.document + "\n" == sink.read_text()
    assert stored.created_by == "auditor-7"
    assert err.strip() == f"checkpoint of 1 chains appended to {sink}"
    assert json.loads(out)["subjects"]["acme:alice:proj"]["event_count"] == 1


def test_checkpoint_to_an_unwritable_sink_writes_nothing(tmp_path):
    append("acme:alice:proj")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    refused(
        audit("checkpoint", "--sink", str(blocker / "cp.jsonl")), 1, "cannot append the checkpoint"
    )
    assert not Checkpoint.objects.exists()


# -- export ----------------------------------------------------------------------------


def test_export_to_stdout_and_to_a_file(tmp_path):
    events = [append("acme:alice:proj", payload={"n": n}) for n in range(3)]
    append("zeta:*:*")
    code, out, _ = audit("export", "--subject", "acme:alice:proj")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["sequence"] for r in rows] == [e.sequence for e in events]
    assert out.splitlines()[0] == canonical_json(rows[0])
    target = tmp_path / "all.jsonl"
    code, out, err = audit("export", "--out", str(target))
    assert (code, out) == (0, "") and err.strip() == f"exported 4 events to {target}"
    assert len(target.read_text().splitlines()) == 4
    assert [p.name for p in tmp_path.iterdir()] == ["all.jsonl"]


def test_export_refusals_write_no_file(tmp_path):
    refused(
        audit("export", "--subject", "nope", "--out", str(tmp_path / "x.jsonl")), 1, "invalid scope"
    )
    refused(audit("export", "--out", str(tmp_path / "missing" / "x.jsonl")), 1, "does not exist")
    assert list(tmp_path.iterdir()) == []
