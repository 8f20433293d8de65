"""``manage.py memory import-aetnamem``: moving in from aetnamem 0.2.1 (issue 32 item 6).

The source databases are written by aetnamem 0.2.1 itself (a dev dependency,
never imported by the application). Run on both databases.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from aetnamem import Memory
from django.core.management import call_command
from django.core.management.base import CommandError

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.verification import verify_subject
from memory import selectors
from memory.models import Episode, Record

pytestmark = pytest.mark.django_db

ALICE, BOB = "acme:alice:proj", "acme:bob:proj"
MAPS = ["--map", f"alice={ALICE}", "--map", f"bob={BOB}"]


@pytest.fixture
def source(tmp_path) -> Path:
    """An aetnamem file: alice with a superseded fact and its successor, a quarantined one and
    a forgotten one; bob with one fact."""
    path = tmp_path / "aetnamem.sqlite3"
    memory = Memory(path)
    memory.remember("alice", "My editor is vim.")
    memory.remember("alice", "My editor is helix.", session_id="s-1", turn_id="t-1")
    memory.remember("alice", "<webpage>My backup email is eve@example.org.</webpage>")
    memory.remember("alice", "My locker code is 4821.")
    memory.forget("alice", "locker code")
    memory.remember("bob", "My timezone is UTC.")
    memory.close()
    return path


def run(*args: str) -> tuple[str, dict]:
    out = io.StringIO()
    call_command("memory", "import-aetnamem", *args, "--json", stdout=out)
    return out.getvalue(), json.loads(out.getvalue())


def rows() -> tuple[int, int, int]:
    return Record.objects.count(), Episode.objects.count(), AuditEvent.objects.count()


def test_an_aetnamem_database_moves_in_with_its_provenance_and_chain_head(source):
    # Given an aetnamem database and its chain heads as aetnamem reports them
    upstream = Memory(source)
    heads = upstream.store.chain_heads()
    upstream.close()
    # When it is imported with a scope for each subject
    _, result = run(str(source), *MAPS)
    # Then alice's trusted fact is active and the webpage's is quarantined, at her scope
    alice = {r.content: r for r in Record.objects.filter(scope=ALICE)}
    assert alice["User's editor is helix."].status == "active"
    assert alice["User's backup email is eve@example.org."].status == "quarantined"
    # Superseded and forgotten there: not carried over
    assert not any("4821" in content or "vim" in content for content in alice)
    assert Record.objects.filter(scope=BOB, content="User's timezone is UTC.").exists()
    assert Episode.objects.filter(scope=ALICE).count() == 4
    helix = alice["User's editor is helix."]
    assert (helix.session_id, helix.turn_id) == ("s-1", "t-1")
    # And each record's creation event names where it came from
    creation = AuditEvent.objects.get(record_id=helix.record_id)
    payload = json.loads(creation.payload)
    assert payload["imported_from"] == "aetnamem-0.2.1" and payload["source_record_id"]
    # And one event per scope records the source chain head imported, with counts
    by_scope = {s["scope"]: s for s in result["subjects"]}
    event = AuditEvent.objects.get(subject_id=ALICE, event_type="memory.aetnamem_imported")
    imported = json.loads(event.payload)
    assert imported["source_head_hash"] == heads["alice"]["event_hash"]
    assert imported["source_head_sequence"] == heads["alice"]["sequence"]
    assert imported["source_events"] == heads["alice"]["event_count"]
    assert (imported["records"], imported["skipped_records"], imported["forced"]) == (2, 2, False)
    assert imported["source_chain_verified"] is True and "alice" not in event.payload
    assert by_scope[ALICE]["event_id"] == event.event_id
    # And our chain, and every record's binding, verify; the old chain still verifies upstream
    for scope in (ALICE, BOB):
        assert verify_subject(scope, principal=SYSTEM).ok
    assert all(not selectors.content_binding(r).broken for r in Record.objects.all())
    upstream = Memory(source)
    assert upstream.store.verify_audit_chain("alice") and upstream.store.chain_heads() == heads
    upstream.close()


def refused(*args: str) -> str:
    before = rows()
    with pytest.raises(CommandError) as caught:
        call_command("memory", "import-aetnamem", *args)
    assert caught.value.returncode == 2
    assert rows() == before  # nothing written, not even an audit event
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_file_that_is_not_sqlite_is_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    assert "is not an SQLite database" in refused(str(text), "--map", f"alice={ALICE}")
    assert "is not a file" in refused(str(tmp_path / "missing.sqlite3"))


def test_another_schema_version_is_refused(source, tmp_path):
    # Given an aetnamem database from before fact keys (records without fact_key)
    older = tmp_path / "older.sqlite3"
    conn = sqlite3.connect(older)
    conn.executescript(
        "CREATE TABLE episodes (id TEXT, subject_id TEXT, session_id TEXT, turn_id TEXT, "
        "message TEXT, source_type TEXT, created_at TEXT);"
        "CREATE TABLE records (id TEXT, subject_id TEXT, content TEXT);"
        "CREATE TABLE audit_log (sequence INTEGER);"
    )
    conn.close()
    message = refused(str(older), *MAPS)
    assert "is not an aetnamem-0.2.1 database: records lacks source_type" in message
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()
    assert "it has no episodes table" in refused(str(empty), *MAPS)


def test_a_broken_source_chain_is_refused_unless_forced(source):
    # Given a source chain edited behind aetnamem's back
    conn = sqlite3.connect(source)
    conn.execute(
        "UPDATE audit_log SET actor = 'mallory' WHERE sequence = "
        "(SELECT min(sequence) FROM audit_log WHERE subject_id = 'alice')"
    )
    conn.commit()
    conn.close()
    # When it is imported, then it is refused, naming where it breaks
    message = refused(str(source), *MAPS)
    assert "source audit chain does not verify (alice at sequence" in message
    # And with --force it is imported, the event saying it was forced and unverified
    _, result = run(str(source), *MAPS, "--force")
    assert result["forced"] is True
    event = AuditEvent.objects.get(subject_id=ALICE, event_type="memory.aetnamem_imported")
    imported = json.loads(event.payload)
    assert imported["forced"] is True and imported["source_chain_verified"] is False
    bob = AuditEvent.objects.get(subject_id=BOB, event_type="memory.aetnamem_imported")
    assert json.loads(bob.payload)["source_chain_verified"] is True


def test_an_unknown_or_missing_scope_mapping_is_refused(source):
    assert "no scope given for source subject(s) bob" in refused(
        str(source), "--map", f"alice={ALICE}"
    )
    assert "holds no subject carol" in refused(str(source), *MAPS, "--map", f"carol={ALICE}")
    assert "scope for subject bob is invalid" in refused(
        str(source), "--map", f"alice={ALICE}", "--map", "bob=acme:bob"
    )
    assert "must name one project" in refused(
        str(source), "--map", f"alice={ALICE}", "--map", "bob=acme:bob:*"
    )
    assert "--map takes SUBJECT=SCOPE" in refused(str(source), "--map", "alice")


def test_a_file_name_with_uri_characters_is_read_as_a_name(source, tmp_path):
    # Given the file under a name holding '?', '#' and '%' (read-only opening uses a URI)
    odd = tmp_path / "old #1?x=%20.sqlite3"
    odd.write_bytes(source.read_bytes())
    # When it is imported, then it is that file that is read
    _, result = run(str(odd), *MAPS)
    assert {s["scope"] for s in result["subjects"]} == {ALICE, BOB}
