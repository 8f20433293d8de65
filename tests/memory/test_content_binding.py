"""Issue 10 item 4: a record's content is bound into its creation event and checked.

With database access, ``UPDATE memory_record SET content=...`` changed what
recall returned while the chain verifier, ``memory inspect`` and the record
page all said fine. The creation event now carries ``content_sha256`` (the
SHA-256 of the exact content stored) and every one of those checks it.
"""

from __future__ import annotations

import io
import json

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse

from aetnaweb.access import SYSTEM
from audit.canonical import sha256_text
from audit.models import AuditEvent
from audit.services import append_event
from audit.verification import verify_all, verify_subject
from memory import selectors, services
from memory.binding import salted_sha256
from memory.models import Record
from tests.factories import login_as, make_operator
from tests.tools.test_verify_audit import database_file, parse_report, run_tool

SCOPE = "acme:alice:proj"
committed = pytest.mark.django_db(transaction=django_settings.DATABASE_VENDOR == "sqlite")


def remember(text: str = "My deploy window is Fridays.") -> Record:
    result = services.remember(principal=SYSTEM, scope=SCOPE, text=text)
    return Record.objects.get(record_id=result.records[0].record_id)


def creation_event(record: Record) -> AuditEvent:
    return AuditEvent.objects.get(
        record_id=record.record_id,
        event_type__in=("memory.record_created", "memory.record_quarantined"),
    )


def edit_behind_the_engine(
    record: Record, sql: str = "content = %s", value="Fridays are off."
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE memory_record SET {sql} WHERE record_id = %s", [value, record.record_id]
        )


def inspect_text() -> str:
    out = io.StringIO()
    call_command("memory", "inspect", SCOPE, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "make",
    [
        lambda: remember(),
        lambda: remember("<webpage>My backup email is eve@example.org.</webpage>"),
        lambda: Record.objects.get(
            record_id=services.propose_facts(
                principal=SYSTEM,
                scope=SCOPE,
                facts=[{"content": "User likes tea.", "evidence": [remember().record_id]}],
            )
            .accepted[0]
            .record_id
        ),
    ],
    ids=["trusted", "quarantined", "proposed"],
)
def test_every_new_record_binds_its_exact_content(make):
    record = make()
    payload = json.loads(creation_event(record).payload)
    # salted with the record's own salt (issue 29 item 4), never the plain SHA-256
    assert payload["digests"] == "salted-v1" and len(record.digest_salt) == 32
    assert payload["content_sha256"] == salted_sha256(record.digest_salt, record.content)
    assert payload["content_sha256"] != sha256_text(record.content)
    assert selectors.content_binding(record).state == "ok"
    assert verify_subject(SCOPE, principal=SYSTEM).ok


@pytest.mark.django_db
def test_an_edited_content_fails_the_verifier_inspect_and_the_record_page(client):
    # Given an active record, and a recall that returns it
    record = remember()
    event = creation_event(record)
    # When someone with database access edits its content
    edit_behind_the_engine(record)
    # Then recall returns the edited text (the attack) ...
    result = services.recall(principal=SYSTEM, scope=SCOPE, query="Fridays")
    assert [c.content for c in result.candidates] == ["Fridays are off."]
    # ... and the chain verifier names the record and its creation event
    reason = (
        f"sequence {event.sequence}: record {record.record_id} content does not match the "
        "content_sha256 its memory.record_created event binds"
    )
    report = verify_subject(SCOPE, principal=SYSTEM)
    assert not report.ok
    assert report.first_bad_sequence == event.sequence
    assert reason in report.reasons
    assert reason in verify_all(principal=SYSTEM).by_subject()[SCOPE].reasons
    # ... memory inspect says BROKEN with the same reason
    text = inspect_text()
    assert "chain: BROKEN" in text and reason in text
    # ... and the record page shows a red banner with the next step
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    page = client.get(reverse("memory:record", args=[record.record_id]))
    body = page.content.decode()
    assert page.status_code == 200
    assert 'id="content-mismatch"' in body and "banner-danger" in body
    assert "changed outside aetnaweb" in body and "Forget the record" in body


@pytest.mark.django_db
def test_an_untouched_record_page_has_no_banner(client):
    record = remember()
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    page = client.get(reverse("memory:record", args=[record.record_id]))
    assert 'id="content-mismatch"' not in page.content.decode()
    assert "chain: verifies" in inspect_text()


@pytest.mark.django_db
def test_a_case_only_edit_is_caught_too():
    # content_digest (used for duplicates) ignores case; the bound digest does not
    record = remember()
    edit_behind_the_engine(record, value="my deploy window is fridays.")
    assert selectors.content_binding(record.__class__.objects.get(pk=record.pk)).state == "mismatch"
    assert not verify_subject(SCOPE, principal=SYSTEM).ok


@pytest.mark.django_db
def test_a_record_inserted_or_revived_behind_the_engine_fails():
    # Given a record forgotten through the engine
    record = remember()
    services.forget(principal=SYSTEM, scope=SCOPE, record_ids=[record.record_id])
    assert verify_subject(SCOPE, principal=SYSTEM).ok
    # When its content is put back by hand
    edit_behind_the_engine(record, value="My deploy window is Fridays.")
    # Then the verifier says so
    assert verify_subject(SCOPE, principal=SYSTEM).reasons == [
        f"sequence {creation_event(record).sequence}: record {record.record_id} is tombstoned "
        "but still holds content"
    ]
    # And a record row with no creation event in the chain is named too
    edit_behind_the_engine(record, value="")
    other = remember("My editor is helix.")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_record SET record_id = %s WHERE record_id = %s",
            ["mem_" + "f" * 32, other.record_id],
        )
    assert verify_subject(SCOPE, principal=SYSTEM).reasons == [
        f"record mem_{'f' * 32} has no memory.record_created or memory.record_quarantined "
        "event in its scope's chain"
    ]


@pytest.mark.django_db
def test_records_written_before_the_binding_are_not_judged():
    # Given a record whose creation event predates content_sha256
    record = remember()
    Record.objects.filter(pk=record.pk).update(record_id="mem_" + "a" * 32)
    with transaction.atomic():
        append_event(
            subject=SCOPE,
            event_type="memory.record_created",
            actor="user",
            payload={"record_id": "mem_" + "a" * 32, "status": "active"},
            record_id="mem_" + "a" * 32,
        )
    # Then it is unbound, not broken, and the chain holds
    legacy = Record.objects.get(pk=record.pk)
    assert selectors.content_binding(legacy).state == "unbound"
    assert verify_subject(SCOPE, principal=SYSTEM).ok


@committed
def test_the_standalone_tool_names_the_same_edit(tmp_path):
    record = remember()
    event = creation_event(record)
    edit_behind_the_engine(record)
    result = run_tool(str(database_file(tmp_path)))
    reasons = parse_report(result.stdout).get(SCOPE)
    if connection.vendor != "sqlite":
        return  # the tool reads SQLite files; a copy of audit_log alone has no records
    assert result.returncode == 1
    assert reasons == verify_subject(SCOPE, principal=SYSTEM).failure_lines()
    assert reasons == [
        f"sequence {event.sequence}: record {record.record_id} content does not match the "
        "content_sha256 its memory.record_created event binds"
    ]
