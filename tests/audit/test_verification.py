"""The chain rule: what the service verifier accepts and what it catches."""

from __future__ import annotations

import json

import pytest

from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.chain import compute_event_hash
from audit.models import AuditEvent
from audit.verification import (
    BAD_HASH,
    BAD_SUBJECT,
    BROKEN_LINK,
    FIRST_HAS_PREV,
    MAX_REASONS,
    PAYLOAD_NOT_FINITE,
    PAYLOAD_NOT_JSON,
    PAYLOAD_NOT_OBJECT,
    verify_all,
    verify_subject,
    verify_subjects,
)
from tests.audit.conftest import append, mixed_chains, tamper

pytestmark = pytest.mark.django_db

SUBJECTS = ["acme:alice:proj", "acme:alice:*", "acme:*:*", "platform:*:*", "zeta:bob:x"]


def reasons(report) -> list[str]:
    return report.failure_lines()


def test_mixed_appends_across_many_subjects_all_verify():
    # Given interleaved appends across five chains with varied columns
    events = mixed_chains(SUBJECTS, per_subject=6)
    # When everything is verified
    report = verify_all(principal=SYSTEM)
    # Then every chain holds and every event was checked exactly once
    assert report.ok
    assert report.events_checked == len(events) == 30
    assert {r.subject_id: r.events_checked for r in report.subjects} == dict.fromkeys(SUBJECTS, 6)
    for subject in SUBJECTS:
        single = verify_subject(subject, principal=SYSTEM)
        assert single.ok and single.events_checked == 6
        last = [e for e in events if e.subject_id == subject][-1]
        assert (single.last_sequence, single.head_hash) == (last.sequence, last.event_hash)


def test_stored_hashes_are_the_reference_hashes():
    # Given events with non-ASCII text, nested objects and null context columns
    for event in mixed_chains(["acme:alice:proj"], per_subject=8):
        row = AuditEvent.objects.get(pk=event.pk)
        # Then each stored hash is the plain reading of the spec, which the
        # fast verifier (that found them all valid above) must reproduce
        assert row.event_hash == compute_event_hash(
            event_id=row.event_id,
            subject_id=row.subject_id,
            event_type=row.event_type,
            created_at=row.created_at,
            actor=row.actor,
            session_id=row.session_id,
            turn_id=row.turn_id,
            record_id=row.record_id,
            payload=json.loads(row.payload),
            prev_hash=row.prev_hash,
        )
    assert verify_subject("acme:alice:proj", principal=SYSTEM).ok


def test_unknown_subject_is_an_empty_chain_that_holds():
    report = verify_subject("nobody:*:*", principal=SYSTEM)
    assert report.ok and report.events_checked == 0


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("event_id", "aud_" + "f" * 32),
        ("event_type", "memory.forget"),
        ("created_at", "2020-01-01T00:00:00+00:00"),
        ("actor", "mallory"),
        ("session_id", "ses-forged"),
        ("turn_id", "turn-forged"),
        ("record_id", "rec_forged"),
        ("payload", '{"n":999}'),
    ],
)
def test_editing_a_hashed_column_of_a_middle_row_is_caught(column, value):
    # Given a healthy chain of five events
    events = [append("acme:alice:proj", payload={"n": n}) for n in range(5)]
    target = events[2]
    # When one hashed column of the middle row is changed
    tamper(f"UPDATE audit_log SET {column} = %s WHERE sequence = %s", [value, target.sequence])
    # Then that row's hash no longer recomputes, and nothing else is blamed
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert not report.ok
    assert report.first_bad_sequence == target.sequence
    assert reasons(report) == [f"sequence {target.sequence}: {BAD_HASH}"]


def test_editing_event_hash_breaks_that_row_and_the_next_link():
    events = [append("acme:alice:proj") for _ in range(4)]
    tamper(
        "UPDATE audit_log SET event_hash = %s WHERE sequence = %s", ["0" * 64, events[1].sequence]
    )
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert reasons(report) == [
        f"sequence {events[1].sequence}: {BAD_HASH}",
        f"sequence {events[2].sequence}: {BROKEN_LINK}",
    ]


def test_editing_prev_hash_is_caught_as_hash_and_link():
    events = [append("acme:alice:proj") for _ in range(3)]
    tamper(
        "UPDATE audit_log SET prev_hash = %s WHERE sequence = %s", ["1" * 64, events[2].sequence]
    )
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert reasons(report) == [
        f"sequence {events[2].sequence}: {BAD_HASH}",
        f"sequence {events[2].sequence}: {BROKEN_LINK}",
    ]


def test_first_event_with_a_prev_hash_is_caught():
    first = append("acme:alice:proj")
    append("acme:alice:proj")
    tamper("UPDATE audit_log SET prev_hash = %s WHERE sequence = %s", ["2" * 64, first.sequence])
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert f"sequence {first.sequence}: {FIRST_HAS_PREV}" in reasons(report)


def test_deleting_a_middle_row_is_caught():
    events = [append("acme:alice:proj") for _ in range(5)]
    tamper("DELETE FROM audit_log WHERE sequence = %s", [events[2].sequence])
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert reasons(report) == [f"sequence {events[3].sequence}: {BROKEN_LINK}"]
    assert report.events_checked == 4


def test_deleting_the_first_row_is_caught():
    events = [append("acme:alice:proj") for _ in range(3)]
    tamper("DELETE FROM audit_log WHERE sequence = %s", [events[0].sequence])
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert reasons(report) == [f"sequence {events[1].sequence}: {FIRST_HAS_PREV}"]


def test_deleting_the_newest_rows_is_not_caught_by_the_chain_alone():
    # Documented limit (audit-log-v1 "What each layer detects"): a truncated
    # chain is still a valid chain; only a checkpoint kept elsewhere catches it
    # (see test_checkpoints.py).
    events = [append("acme:alice:proj") for _ in range(5)]
    tamper("DELETE FROM audit_log WHERE sequence >= %s", [events[3].sequence])
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert report.ok and report.events_checked == 3


def test_swapping_two_rows_contents_is_caught():
    # Given two events of one chain
    events = [append("acme:alice:proj", payload={"n": n}) for n in range(4)]
    a, b = events[1], events[2]
    columns = ["event_id", "created_at", "payload", "prev_hash", "event_hash"]
    rows = {
        e.sequence: AuditEvent.objects.filter(pk=e.pk).values_list(*columns).get() for e in (a, b)
    }
    # When their contents trade places (a reordering)
    tamper(
        "UPDATE audit_log SET event_id = %s WHERE sequence = %s", ["aud_" + "e" * 32, a.sequence]
    )
    for target, source in ((b.sequence, a.sequence), (a.sequence, b.sequence)):
        sets = ", ".join(f"{c} = %s" for c in columns)
        tamper(f"UPDATE audit_log SET {sets} WHERE sequence = %s", [*rows[source], target])
    # Then the links no longer line up
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert not report.ok
    assert f"sequence {a.sequence}: {BROKEN_LINK}" in reasons(report)


def test_moving_a_row_to_another_subject_is_caught_in_both_chains():
    events = [append("acme:alice:proj") for _ in range(3)]
    append("acme:bob:proj")
    tamper(
        "UPDATE audit_log SET subject_id = %s WHERE sequence = %s",
        ["acme:bob:proj", events[1].sequence],
    )
    report = verify_all(principal=SYSTEM)
    by_subject = report.by_subject()
    assert not by_subject["acme:alice:proj"].ok
    assert not by_subject["acme:bob:proj"].ok


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("not json", PAYLOAD_NOT_JSON),
        ('{"n":NaN}', PAYLOAD_NOT_JSON),
        ("[1,2]", PAYLOAD_NOT_OBJECT),
        ('{"n":1e999}', PAYLOAD_NOT_FINITE),
    ],
)
def test_payload_that_is_not_a_json_object_is_named(payload, reason):
    events = [append("acme:alice:proj") for _ in range(2)]
    tamper("UPDATE audit_log SET payload = %s WHERE sequence = %s", [payload, events[0].sequence])
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert reasons(report) == [f"sequence {events[0].sequence}: {reason}"]


def test_non_canonical_but_equivalent_payload_text_still_verifies():
    # The chain rule hashes the parsed payload: whitespace in the stored text
    # changes no meaning and no hash (an independent verifier agrees).
    event = append("acme:alice:proj", payload={"b": 1, "a": [1, 2]})
    tamper(
        "UPDATE audit_log SET payload = %s WHERE sequence = %s",
        [' {"b": 1, "a": [1, 2]} ', event.sequence],
    )
    assert verify_subject("acme:alice:proj", principal=SYSTEM).ok


def test_subject_that_is_not_a_canonical_scope_is_named():
    event = append("acme:alice:proj")
    tamper(
        "UPDATE audit_log SET subject_id = %s WHERE sequence = %s", ["acme:alice", event.sequence]
    )
    report = verify_all(principal=SYSTEM).by_subject()["acme:alice"]
    assert f"sequence {event.sequence}: {BAD_SUBJECT}" in reasons(report)


def test_reasons_are_capped_and_counted():
    events = [append("acme:alice:proj") for _ in range(MAX_REASONS + 5)]
    tamper("UPDATE audit_log SET actor = %s", ["mallory"])
    report = verify_subject("acme:alice:proj", principal=SYSTEM)
    assert report.problem_count == len(events)
    assert len(report.reasons) == MAX_REASONS
    assert report.failure_lines()[-1] == "... and 5 more problems"
    assert report.first_bad_sequence == events[0].sequence


def test_progress_is_reported_with_running_totals(monkeypatch):
    monkeypatch.setattr("audit.verification.CHUNK_SIZE", 4)
    for n in range(10):
        append("acme:alice:proj" if n % 2 else "acme:bob:proj")
    seen: list[int] = []
    report = verify_all(principal=SYSTEM, progress=seen.append)
    assert report.ok and seen == [4, 8, 10]
    seen.clear()
    verify_subjects(["acme:alice:proj", "acme:bob:proj"], principal=SYSTEM, progress=seen.append)
    assert seen == [4, 5, 9, 10]


def test_operator_needs_audit_on_the_subject(operator):
    from access.models import Role, ScopeGrant

    append("acme:alice:proj")
    ScopeGrant.objects.create(
        user=operator,
        scope="acme:bob:*",
        scope_tenant="acme",
        scope_user="bob",
        scope_project="*",
        role=Role.AUDITOR,
    )
    principal = access.operator_principal(operator)
    with pytest.raises(access.AccessDenied):
        verify_subject("acme:alice:proj", principal=principal)
    with pytest.raises(access.AccessDenied):
        verify_all(principal=principal)
    assert verify_subject("acme:bob:x", principal=principal).ok
