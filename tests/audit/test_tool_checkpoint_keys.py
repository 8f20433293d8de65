"""tools/verify_audit.py --checkpoints with --public-key, in database mode (issue 29 remainder B).

Before: with a database the tool compared each checkpoint line with the
database only, so a checkpoint nobody signed (or signed by another key)
passed even when the auditor handed over the log's key. Now each line must
carry a log head signed by that key, by the same fail-closed rules as the
offline mode; without a key the line is compared with the database only.
"""

from __future__ import annotations

import sys

import pytest
from django.conf import settings as django_settings

from aetnaweb.access import SYSTEM
from audit import notes
from audit.canonical import canonical_json, digest
from audit.services import create_checkpoint
from tests.audit.conftest import append, tool
from tests.tools.test_verify_audit import database_file, parse_report, run_tool

ORIGIN = "aetnaweb.test/audit"
committed = pytest.mark.django_db(transaction=django_settings.DATABASE_VENDOR == "sqlite")


def use_key(settings, tmp_path, name: str) -> notes.SignerKey:
    key = notes.SignerKey.generate(ORIGIN)
    path = tmp_path / name
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


def unsigned_checkpoint(settings) -> dict:
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = ""
    return create_checkpoint(principal=SYSTEM, actor="auditor")


def run_with_key(tmp_path, checkpoints, key: notes.SignerKey, *extra: str):
    return run_tool(
        str(database_file(tmp_path)),
        "--checkpoints",
        str(checkpoints),
        "--public-key",
        key.verifier.text(),
        *extra,
    )


@committed
def test_a_checkpoint_signed_by_the_given_key_verifies(settings, tmp_path, checkpoint_sink):
    # Given a checkpoint whose log head the server's key signed
    signer = use_key(settings, tmp_path, "checkpoint_key")
    append("acme:alice:proj")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    # When the tool checks it against the database with that key
    result = run_with_key(tmp_path, checkpoint_sink, signer)
    # Then it verifies
    assert result.returncode == 0, result.stdout
    assert parse_report(result.stdout)[f"checkpoint {checkpoint_sink} line 1"] is None


@committed
def test_unsigned_foreign_and_headless_checkpoints_fail_with_a_key(
    settings, tmp_path, checkpoint_sink
):
    # Given four lines: one signed by the key, one by another key, one not signed at
    # all, and an old v1 line with no log head (each consistent with the database)
    signer = use_key(settings, tmp_path, "checkpoint_key")
    append("acme:alice:proj")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    use_key(settings, tmp_path, "other_key")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    document = unsigned_checkpoint(settings)
    old = {k: v for k, v in document.items() if k not in {"log", "checkpoint_sha256"}}
    old["checkpoint_sha256"] = digest(old)
    with checkpoint_sink.open("a") as sink:
        sink.write(canonical_json(old) + "\n")
    # When the tool checks them against the database with the first key
    result = run_with_key(tmp_path, checkpoint_sink, signer)
    report = parse_report(result.stdout)
    # Then only the first verifies; each other line fails, saying why
    label = f"checkpoint {checkpoint_sink} line"
    assert result.returncode == 1
    assert report[f"{label} 1"] is None
    assert report[f"{label} 2"] == ["log note is not signed by the given key"]
    assert report[f"{label} 3"] == [
        "checkpoint's signed log head is not signed: with --public-key it must be signed by "
        "that key"
    ]
    assert report[f"{label} 4"] == [
        "checkpoint's signed log head is missing: nothing signed by the given key vouches "
        "for this root"
    ]
    # And without a key, the same lines are compared with the database only (all hold)
    plain = run_tool(str(database_file(tmp_path)), "--checkpoints", str(checkpoint_sink))
    assert plain.returncode == 0, plain.stdout


@committed
def test_a_signature_the_tool_cannot_check_fails(settings, tmp_path, monkeypatch):
    # Given a signed checkpoint and the key, on a Python without 'cryptography'
    signer = use_key(settings, tmp_path, "checkpoint_key")
    append("acme:alice:proj")
    document = create_checkpoint(principal=SYSTEM, actor="auditor")
    key = tool.parse_verifier_key(signer.verifier.text())
    conn = tool.open_readonly(str(database_file(tmp_path)))
    try:
        assert tool.verify_checkpoint(conn, document, key) == []
        monkeypatch.setitem(sys.modules, "cryptography", None)
        monkeypatch.setitem(sys.modules, "cryptography.exceptions", None)
        # When the tool checks it
        failures = tool.verify_checkpoint(conn, document, key)
    finally:
        conn.close()
    # Then that is a failure, never a pass
    assert failures == [
        "checkpoint's signed log head signature cannot be checked (the 'cryptography' package "
        "is not installed): nothing proves the key signed it"
    ]


@committed
def test_a_key_without_checkpoints_is_a_usage_error(settings, tmp_path):
    # Given a database and a key, but no checkpoint file
    signer = use_key(settings, tmp_path, "checkpoint_key")
    append("acme:alice:proj")
    # When the tool is asked to check "with the key"
    result = run_tool(str(database_file(tmp_path)), "--public-key", signer.verifier.text())
    # Then it refuses with one line instead of passing a check it never made
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--public-key checks the signatures of --checkpoints lines" in result.stderr
