"""A16 import-journal: digest-only, idempotent, refuses incompatible files (IJ-*, T-15)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from actions import services
from actions.errors import JournalError
from actions.models import ActionTransaction
from aetnaweb.access import SYSTEM
from audit.canonical import digest
from audit.models import AuditEvent
from audit.verification import verify_subject
from tests.actions.conftest import SCOPE, audit_dump, table_counts

pytestmark = pytest.mark.django_db

PRIVATE = {
    "args": '{"to": "private-recipient@example.org", "body": "PRIVATE-ARGS"}',
    "snapshot": '{"before": "PRIVATE-SNAPSHOT"}',
    "result": '{"status": "PRIVATE-RESULT"}',
}


def make_journal(
    path: Path, *, transactions=None, effects=None, drop_column: str | None = None
) -> Path:
    connection = sqlite3.connect(path)
    columns = [
        "txn_id",
        "state",
        "created_at",
        "updated_at",
        "replayed_from",
        "dry_run",
        "client_id",
    ]
    if drop_column in columns:
        columns.remove(drop_column)
    connection.execute(f"CREATE TABLE transactions ({', '.join(columns)})")
    connection.execute(
        "CREATE TABLE effects (txn_id, idx, effect_id, tool, resource, reversible, status, args, "
        "snapshot, result, read_keys, write_keys, actor, ts)"
    )
    for row in (
        transactions
        if transactions is not None
        else [
            (
                "txn-1",
                "committed",
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:00:05Z",
                None,
                0,
                "PRIVATE-CLIENT",
            )
        ]
    ):
        row = row[: len(columns)]
        connection.execute(f"INSERT INTO transactions VALUES ({', '.join('?' * len(row))})", row)
    for row in (
        effects
        if effects is not None
        else [
            (
                "txn-1",
                0,
                "eff-1",
                "email.send",
                "mailbox:ops",
                1,
                "applied",
                PRIVATE["args"],
                PRIVATE["snapshot"],
                PRIVATE["result"],
                '["k1"]',
                "not json {",
                "PRIVATE-ACTOR",
                "2026-01-01T00:00:01Z",
            )
        ]
    ):
        connection.execute(f"INSERT INTO effects VALUES ({', '.join('?' * 14)})", row)
    connection.commit()
    connection.close()
    return path


def test_source_import_is_digest_only_and_idempotent(tmp_path):
    # T-15: Given a journal with one transaction holding private details
    journal = make_journal(tmp_path / "journal.sqlite3")
    # When it is imported twice
    first = services.import_journal(principal=SYSTEM, scope=SCOPE, path=journal)
    second = services.import_journal(principal=SYSTEM, scope=SCOPE, path=journal)
    # Then the first imports one transaction and the second skips it
    assert len(first.imported) == 1 and first.skipped_transaction_ids == ()
    assert second.imported == () and second.skipped_transaction_ids == ("txn-1",)
    event = AuditEvent.objects.get()
    assert event.event_type == "action.source_imported" and event.actor == "journal-importer"
    assert (event.session_id, event.turn_id) == (None, None)
    payload = json.loads(event.payload)
    assert payload["evidence_status"] == "unverified_operational_journal"
    assert payload["provider"] == "external_transaction_journal"
    # And nothing private appears in the audit dump
    dump = audit_dump()
    for secret in (
        "PRIVATE-ARGS",
        "private-recipient",
        "PRIVATE-SNAPSHOT",
        "PRIVATE-RESULT",
        "PRIVATE-CLIENT",
        "PRIVATE-ACTOR",
    ):
        assert secret not in dump
    # And the chain is valid, and no action rows were created (IJ-5)
    assert verify_subject(SCOPE, principal=SYSTEM).ok
    assert ActionTransaction.objects.count() == 0


def test_import_payload_shape_ij4_ij5(tmp_path):
    journal = make_journal(tmp_path / "journal.sqlite3")
    result = services.import_journal(
        principal=SYSTEM, scope=SCOPE, path=journal, source_id="ops-journal"
    )
    event = AuditEvent.objects.get()
    payload = json.loads(event.payload)
    assert result.as_dict() == {
        "source_id_digest": digest("ops-journal"),
        "imported": [
            {
                "source_transaction_id": "txn-1",
                "audit_event_id": event.event_id,
                "audit_event_hash": event.event_hash,
                "effect_count": 1,
            }
        ],
        "skipped_transaction_ids": [],
    }
    effect = payload["effects"][0]
    assert effect == {
        "index": 0,
        "effect_id": "eff-1",
        "tool": "email.send",
        "resource": "mailbox:ops",
        "reversible_claim": True,
        "status_claim": "applied",
        "args_digest": digest(json.loads(PRIVATE["args"])),
        "snapshot_digest": digest(json.loads(PRIVATE["snapshot"])),
        "result_digest": digest(json.loads(PRIVATE["result"])),
        "read_keys_digest": digest(["k1"]),
        "write_keys_digest": {"invalid_json_digest": digest("not json {")},
        "claimed_actor_digest": digest("PRIVATE-ACTOR"),
        "timestamp": "2026-01-01T00:00:01Z",
    }
    assert payload["effects_digest"] == digest(payload["effects"])
    assert payload["source_transaction_id"] == "txn-1" and payload["source_state"] == "committed"
    assert payload["client_id_digest"] == digest("PRIVATE-CLIENT")
    assert payload["replayed_from_digest"] is None and payload["dry_run"] is False


def test_transactions_are_read_in_created_order_ij3(tmp_path):
    journal = make_journal(
        tmp_path / "j.sqlite3",
        transactions=[
            ("b", "committed", "2026-01-02", "2026-01-02", None, 0, None),
            ("a", "committed", "2026-01-02", "2026-01-02", None, 1, None),
            ("z", "failed", "2026-01-01", "2026-01-01", "x", 0, None),
        ],
        effects=[],
    )
    result = services.import_journal(principal=SYSTEM, scope=SCOPE, path=journal)
    assert [item.source_transaction_id for item in result.imported] == ["z", "a", "b"]
    # Another source with the same transaction IDs is not a duplicate
    other = services.import_journal(
        principal=SYSTEM, scope=SCOPE, path=journal, source_id="another journal"
    )
    assert len(other.imported) == 3


def test_missing_file_ij1(tmp_path):
    with pytest.raises(FileNotFoundError):
        services.import_journal(principal=SYSTEM, scope=SCOPE, path=tmp_path / "nope.sqlite3")
    assert issubclass(JournalError, ValueError)


def test_incompatible_schema_writes_nothing_ij2(tmp_path):
    before = table_counts()
    bare = tmp_path / "bare.sqlite3"
    sqlite3.connect(bare).execute("CREATE TABLE transactions (txn_id)").connection.close()
    with pytest.raises(ValueError, match="not a compatible transaction journal; missing tables"):
        services.import_journal(principal=SYSTEM, scope=SCOPE, path=bare)
    partial = make_journal(tmp_path / "partial.sqlite3", drop_column="client_id")
    with pytest.raises(ValueError, match=r"missing columns.*client_id"):
        services.import_journal(principal=SYSTEM, scope=SCOPE, path=partial)
    text = tmp_path / "text.sqlite3"
    text.write_text("this is not a database at all")
    with pytest.raises(ValueError, match="not a compatible transaction journal"):
        services.import_journal(principal=SYSTEM, scope=SCOPE, path=text)
    assert table_counts() == before


def test_journal_is_opened_read_only(tmp_path):
    journal = make_journal(tmp_path / "journal.sqlite3")
    before = journal.read_bytes()
    services.import_journal(principal=SYSTEM, scope=SCOPE, path=journal)
    assert journal.read_bytes() == before


def test_import_needs_write_capability(tmp_path, approver_principal):
    from aetnaweb import access

    journal = make_journal(tmp_path / "journal.sqlite3")
    with pytest.raises(access.AccessDenied):
        services.import_journal(scope=SCOPE, path=journal, principal=approver_principal)
    assert AuditEvent.objects.count() == 0
