"""Issue 29 item 7: every column a reader sees, edited behind the app's back, is noticed.

Before: a forgotten record set back to ``status='active'`` with its content
passed the chain check, ``memory inspect`` and the record page; edits to
``metadata``, ``memory_episode.text``, ``trust_tier``, ``fact_key`` went
unseen. Each edit below must now be named by the chain verifier, ``memory
inspect``, the record page and (on SQLite, where it can read the records)
``tools/verify_audit.py``, in the same words. Run on both databases.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils.html import escape

from aetnaweb.access import SYSTEM
from audit.verification import verify_all, verify_subject
from memory import search, selectors, services
from memory.corrections import correct_record
from memory.models import Episode, Record
from tests.factories import login_as, make_operator
from tests.tools.test_verify_audit import database_file, parse_report, run_tool

SCOPE = "acme:alice:proj"
committed = pytest.mark.django_db(transaction=django_settings.DATABASE_VENDOR == "sqlite")


def sql(statement: str, params: list[object]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def json_value() -> str:
    # PostgreSQL stores metadata as jsonb: a text parameter needs the cast
    return "%s::jsonb" if connection.vendor == "postgresql" else "%s"


def remember(text: str, **extra: object) -> Record:
    result = services.remember(principal=SYSTEM, scope=SCOPE, text=text, **extra)
    return Record.objects.get(record_id=result.records[0].record_id)


def forgotten() -> Record:
    record = remember("My bank PIN is 4821.", metadata={"customer_id": 90417})
    services.forget(principal=SYSTEM, scope=SCOPE, record_ids=[record.record_id])
    return record


def revive(record: Record) -> None:
    """The attack: the row set back to active with its content, and put back in the index."""
    sql(
        "UPDATE memory_record SET status = 'active', content = %s, fact_key = 'bank pin', "
        "deleted_at = NULL WHERE record_id = %s",
        ["User's bank PIN is 4821.", record.record_id],
    )
    search.index_records([(record.pk, record.record_id, SCOPE, "User's bank PIN is 4821.")])


@dataclass(frozen=True)
class Edit:
    make: Callable[[], Record]
    edit: Callable[[Record], None]
    says: str  # what the reason names


def _set(column: str, value: object, placeholder: str = "%s") -> Callable[[Record], None]:
    return lambda record: sql(
        f"UPDATE memory_record SET {column} = {placeholder} WHERE record_id = %s",
        [value, record.record_id],
    )


def _quarantined() -> Record:
    return remember("<webpage>My backup email is eve@example.org.</webpage>")


def _superseded() -> Record:
    older = remember("My editor is vim.")
    remember("My editor is helix.")
    return older


def _proposed() -> Record:
    """A derived record citing another record as its evidence."""
    cited = remember("My editor is helix.")
    result = services.propose_facts(
        principal=SYSTEM,
        scope=SCOPE,
        facts=[{"content": "User likes tea.", "evidence": [cited.record_id]}],
    )
    return Record.objects.get(record_id=result.accepted[0].record_id)


def _newer() -> Record:
    remember("My editor is vim.")
    return remember("My editor is helix.")


def _consolidated_keeper() -> Record:
    """A note said by the user after the same words on a page were promoted: consolidation
    keeps the newer and links it to the older (the event names only the older)."""
    page = remember("<webpage>Remember that the gate code is 42.</webpage>")
    mine = remember("Remember that the gate code is 42.")
    services.promote(principal=SYSTEM, scope=SCOPE, record_id=page.record_id)
    assert services.consolidate(principal=SYSTEM, scope=SCOPE).changed
    mine.refresh_from_db()
    assert mine.supersedes_id == page.record_id
    return mine


def _json(column: str, value: str) -> Callable[[Record], None]:
    return lambda record: sql(
        f"UPDATE memory_record SET {column} = {json_value()} WHERE record_id = %s",
        [value, record.record_id],
    )


def _link_to_another(column: str) -> Callable[[Record], None]:
    """Point the record's link at another record of the scope that the chain never linked."""

    def edit(record: Record) -> None:
        remember("My shell is fish.")
        other = Record.objects.exclude(record_id=record.record_id).order_by("-id")[0]
        _set(column, other.record_id)(record)

    return edit


# Issue 29 item 7, the remainder: a record's time, its supersession links and
# its evidence, which the chain commits (links through superseded_ids, time and
# evidence in the creation event since record_created_at), on both databases.
LINEAGE_EDITS = {
    "created_at": Edit(
        lambda: remember("My deploy window is Fridays."),
        _set("created_at", "2025-01-01 00:00:00"),
        "created_at differs from the one its memory.record_created event names",
    ),
    "created_at_of_a_forgotten_record": Edit(
        forgotten,
        _set("created_at", "2025-01-01 00:00:00"),
        "created_at differs from the one its memory.record_created event names",
    ),
    "evidence_emptied": Edit(
        _proposed,
        _json("evidence", "[]"),
        "evidence differs from the one its memory.record_quarantined event names",
    ),
    "evidence_added": Edit(
        lambda: remember("My editor is helix."),
        _json("evidence", '["ep_0123456789abcdef0123456789abcdef"]'),
        "evidence differs from the one its memory.record_created event names",
    ),
    "supersedes_cleared": Edit(
        _newer,
        _set("supersedes_record_id", None),
        "supersedes nothing, but its chain's events say it supersedes mem_",
    ),
    "supersedes_cleared_on_a_consolidation_keeper": Edit(
        _consolidated_keeper,
        _set("supersedes_record_id", None),
        "supersedes nothing, but its chain's events say it supersedes mem_",
    ),
    "supersedes_forged": Edit(
        lambda: remember("My deploy window is Fridays."),
        _link_to_another("supersedes_record_id"),
        "supersedes mem_",
    ),
    "superseded_by_cleared": Edit(
        _superseded,
        _set("superseded_by_record_id", None),
        "is superseded by nothing, but its chain's events say mem_",
    ),
    "superseded_by_redirected": Edit(
        _superseded,
        _link_to_another("superseded_by_record_id"),
        "is superseded by mem_",
    ),
}


EDITS = {
    "content": Edit(
        lambda: remember("My deploy window is Fridays."),
        _set("content", "Fridays are off."),
        "content does not match the content_sha256",
    ),
    "metadata": Edit(
        lambda: remember("My editor is helix.", metadata={"customer_id": 90417}),
        lambda r: sql(
            f"UPDATE memory_record SET metadata = {json_value()} WHERE record_id = %s",
            ['{"customer_id": 1}', r.record_id],
        ),
        "metadata does not match the metadata_sha256",
    ),
    "metadata_added": Edit(
        lambda: remember("My editor is helix."),
        lambda r: sql(
            f"UPDATE memory_record SET metadata = {json_value()} WHERE record_id = %s",
            ['{"customer_id": 1}', r.record_id],
        ),
        "holds metadata its memory.record_created event never bound",
    ),
    "fact_key": Edit(
        lambda: remember("My editor is helix."),
        _set("fact_key", "shell"),
        "fact_key does not match the fact_key_sha256",
    ),
    "trust_tier": Edit(
        _quarantined,
        _set("trust_tier", "trusted_user"),
        "has trust tier trusted_user, but its chain's events give it untrusted_content",
    ),
    "status_quarantine_escape": Edit(
        _quarantined,
        _set("status", "active"),
        "is active, but its chain's events leave it quarantined",
    ),
    "status_unsuperseded": Edit(
        _superseded,
        _set("status", "active"),
        "is active, but its chain's events leave it superseded",
    ),
    "source_type": Edit(
        lambda: remember("My editor is helix."),
        _set("source_type", "derived"),
        "source_type differs from the one its memory.record_created event names",
    ),
    "kind": Edit(
        lambda: Record.objects.get(
            record_id=services.remember_fact(
                principal=SYSTEM, scope=SCOPE, key="timezone", value="UTC", kind="setting"
            ).record_ids[0]
        ),
        _set("kind", "secret"),
        "kind differs from the one its memory.record_created event names",
    ),
    "confidence": Edit(
        _quarantined,  # a capped 0.3 raised to look trustworthy
        _set("confidence", 0.99),
        "confidence differs from the one its memory.record_quarantined event names",
    ),
    "session_id": Edit(
        lambda: remember("My editor is helix.", session_id="s-1", turn_id="t-1"),
        _set("session_id", "s-2"),
        "session_id differs from the one its memory.record_created event names",
    ),
    "turn_id": Edit(
        lambda: remember("My editor is helix.", session_id="s-1", turn_id="t-1"),
        _set("turn_id", "t-9"),
        "turn_id differs from the one its memory.record_created event names",
    ),
    "digest_salt": Edit(
        lambda: remember("My editor is helix."),
        _set("digest_salt", "0" * 32),
        "content does not match the content_sha256",
    ),
    "episode_text": Edit(
        lambda: remember("My editor is helix."),
        lambda r: sql(
            "UPDATE memory_episode SET text = %s WHERE episode_id = %s",
            ["My editor is emacs.", r.episode_id],
        ),
        "text does not match the message_sha256 its episode.ingested event binds",
    ),
    "episode_purged_keeping_salt": Edit(
        lambda: remember("My editor is helix."),
        lambda r: sql(
            # a purge that forgets the salt: the message digest stays testable
            "UPDATE memory_episode SET text = '', purged_at = CURRENT_TIMESTAMP "
            "WHERE episode_id = %s",
            [r.episode_id],
        ),
        "is purged but still holds its text or digest salt",
    ),
    "revived": Edit(forgotten, revive, "is active, but its chain purged it (memory.forget"),
    "purged_fact_key_restored": Edit(
        forgotten, _set("fact_key", "bank pin"), "still holds its fact key, metadata or digest"
    ),
    "purged_episode_restored": Edit(
        forgotten,
        lambda r: sql(
            "UPDATE memory_episode SET text = %s, purged_at = NULL WHERE episode_id = %s",
            ["My bank PIN is 4821.", r.episode_id],
        ),
        "still holds its text or digest salt, but its chain purged it",
    ),
    "purge_marker_deleted": Edit(
        forgotten,
        lambda r: sql(
            "DELETE FROM memory_recordauditlink WHERE record_id = %s AND event_type = %s",
            [r.record_id, "memory.forget"],
        ),
        "has lost the purge marker of its memory.forget event",
    ),
}


EDITS.update(LINEAGE_EDITS)


def inspect_text() -> str:
    out = io.StringIO()
    call_command("memory", "inspect", SCOPE, stdout=out)
    return out.getvalue()


@committed
@pytest.mark.parametrize("name", list(EDITS))
def test_an_edit_behind_the_app_is_named_by_every_verifier_and_the_record_page(
    name, client, tmp_path
):
    # Given a record the engine wrote (and a chain that verifies)
    case = EDITS[name]
    record = case.make()
    assert verify_subject(SCOPE, principal=SYSTEM).ok
    # When one column a reader sees is edited in the database
    case.edit(record)
    # Then the chain verifier names it (per scope and across all scopes)
    report = verify_subject(SCOPE, principal=SYSTEM)
    assert not report.ok
    named = [line for line in report.failure_lines() if case.says in line]
    assert named and (record.record_id in named[0] or str(record.episode_id) in named[0])
    assert verify_all(principal=SYSTEM).by_subject()[SCOPE].reasons == report.reasons
    # ... memory inspect says BROKEN with the reason
    text = inspect_text()
    assert "chain: BROKEN" in text and case.says in text
    # ... the record page shows the red banner listing it
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    body = client.get(reverse("memory:record", args=[record.record_id])).content.decode()
    assert 'id="content-mismatch"' in body and escape(case.says.split(" (")[0]) in body
    # ... and the standalone tool, reading the same SQLite file, says the same lines
    if connection.vendor == "sqlite":
        result = run_tool(str(database_file(tmp_path)))
        assert result.returncode == 1
        assert parse_report(result.stdout)[SCOPE] == report.failure_lines()


@pytest.mark.django_db
def test_a_revived_record_never_recalls_nor_renders_as_live(client):
    # Given a forgotten record whose row was set back to active, content and index included
    record = forgotten()
    revive(record)
    assert Record.objects.get(pk=record.pk).status == "active"
    # When it is recalled by its own words
    result = services.recall(principal=SYSTEM, scope=SCOPE, query="bank PIN 4821")
    # Then recall does not return it (its purge marker stands)
    assert record.record_id not in [c.record_id for c in result.candidates]
    block = services.recall_block(principal=SYSTEM, scope=SCOPE, query="bank PIN 4821")
    assert "4821" not in block.text
    # And the record page and the API show it as purged, content hidden
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    body = client.get(reverse("memory:record", args=[record.record_id])).content.decode()
    assert "badge-tombstoned" in body and "badge-active" not in body
    assert "4821" not in body.split('id="content-heading"')[1]
    detail = selectors.record_detail(SYSTEM, record.record_id)
    assert (detail.record.status, detail.record.content) == ("tombstoned", "")
    assert detail.binding.state == "revived"
    # And the scope's record list (page, API, MCP) lists it as purged, without its content
    listed = {r.record_id: r for r in selectors.list_records(SYSTEM, scope=SCOPE).items}
    assert (listed[record.record_id].status, listed[record.record_id].content) == ("tombstoned", "")
    assert "4821" not in client.get(reverse("memory:scope", args=[SCOPE])).content.decode()
    # And the scenes (API, MCP) show neither it nor its message, even with the text put back
    sql(
        "UPDATE memory_episode SET text = %s WHERE episode_id = %s",
        ["My bank PIN is 4821.", record.episode_id],
    )
    scenes = services.scenes(principal=SYSTEM, scope=SCOPE)
    assert scenes and "4821" not in repr([scene.as_dict() for scene in scenes])


@pytest.mark.django_db
def test_an_untouched_history_passes_every_check():
    # Given every transition the engine makes: create, quarantine, promote,
    # supersede, consolidate, reject, forget (with episodes and metadata)
    remember("My editor is vim.", metadata={"team": "core"})
    remember("My editor is helix.")
    held = _quarantined()
    services.promote(principal=SYSTEM, scope=SCOPE, record_id=held.record_id, reason="ok")
    other = remember("<webpage>My shell is fish.</webpage>")
    services.reject(principal=SYSTEM, scope=SCOPE, record_id=other.record_id, reason="no")
    services.remember_fact(principal=SYSTEM, scope=SCOPE, key="timezone", value="UTC")
    note = remember("Remember that the standup moved to ten.")
    correct_record(principal=SYSTEM, record_id=note.record_id, content="The standup is at nine.")
    quarantined_note = remember("<webpage>My pager number is 5550100.</webpage>")
    correct_record(
        principal=SYSTEM, record_id=quarantined_note.record_id, content="User's email is a@b.org."
    )
    services.consolidate(principal=SYSTEM, scope=SCOPE)
    forgotten()
    # Then the chain check, inspect and each record's binding agree with the rows
    assert verify_subject(SCOPE, principal=SYSTEM).ok
    assert "chain: verifies" in inspect_text()
    assert all(not selectors.content_binding(r).broken for r in Record.objects.all())
    assert Episode.objects.filter(purged_at__isnull=False).count() == 2


@committed
def test_an_imported_conversation_passes_every_check(tmp_path):
    # Given a conversation imported with every role, a confirmation, a correction,
    # a negation, a name, a dated turn, and then one of its facts forgotten
    turns = [
        {"text": "My editor is vim.", "role": "user", "speaker": "Alice", "turn_id": "t1"},
        {"text": "So you prefer morning meetings?", "role": "assistant", "session_id": "s1"},
        {"text": "Yes, exactly.", "role": "user", "session_id": "s1", "turn_id": "t3"},
        {"text": "Actually, my editor is helix, not vim.", "role": "user", "turn_id": "t4"},
        {"text": "I am vegetarian.", "role": "user", "turn_id": "t5"},
        {"text": "I'm no longer vegetarian.", "role": "user", "turn_id": "t6"},
        {"text": "Call me Sam.", "role": "user", "turn_id": "t7"},
        {"text": "Lee said the flight is next Tuesday.", "role": "other", "speaker": "Lee"},
        {"text": "The build passed.", "role": "tool", "speaker": "ci"},
        {
            "text": "My bank PIN is 4821.",
            "role": "user",
            "turn_id": "t10",
            "occurred_at": "2026-03-02T09:00:00+00:00",
        },
    ]
    services.import_conversation(principal=SYSTEM, scope=SCOPE, turns=turns)
    receipt = services.forget(principal=SYSTEM, scope=SCOPE, utterance="forget my bank PIN")
    assert receipt["purged_record_ids"] and receipt["purged_episode_ids"]
    # Then the chain check, inspect, each record's binding and the tool all agree with the rows
    assert verify_subject(SCOPE, principal=SYSTEM).ok
    assert "chain: verifies" in inspect_text()
    assert all(not selectors.content_binding(r).broken for r in Record.objects.all())
    if connection.vendor == "sqlite":
        assert run_tool(str(database_file(tmp_path))).returncode == 0


@committed
def test_a_consolidated_keeper_and_a_corrected_lineage_pass_every_check(tmp_path):
    # Given a keeper linked by a consolidation (whose event names only what it retired)
    keeper = _consolidated_keeper()
    # And a record corrected by ID, whose correction points at it
    note = remember("Remember that the standup moved to ten.")
    fixed = correct_record(principal=SYSTEM, record_id=note.record_id, content="It is at nine.")
    assert Record.objects.get(record_id=fixed.record.record_id).supersedes_id == note.record_id
    # Then the chain check, the record page's binding and the tool agree with the rows
    assert verify_subject(SCOPE, principal=SYSTEM).ok
    for record in Record.objects.all():
        assert not selectors.content_binding(record).broken, record.record_id
    assert selectors.content_binding(keeper).state == "ok"
    if connection.vendor == "sqlite":
        assert run_tool(str(database_file(tmp_path))).returncode == 0
