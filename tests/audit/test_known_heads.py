"""A transaction reads a chain's head once: its later appends to that subject chain on what it wrote.

Both engines. Each append leaves the head it wrote in a commit hook
(:class:`audit.services.HeldLocks`), which lives exactly as long as the
transaction's hold on the chain; the next append to that subject in the same
transaction takes it from there instead of asking the database again.
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.services import KNOWN_HEAD_WINDOW, append_event, verify_all
from audit.tree import INTEGRATE_EVERY, pending_count, verify_log
from memory import services

SUBJECT = "acme:alice:proj"
OTHER = "acme:bob:proj"


class _Undo(Exception):
    pass


def _head_reads(captured: CaptureQueriesContext) -> int:
    # audit.services._HEAD_SQL: the only statement reading a subject's newest hash.
    return sum(
        "ORDER BY sequence DESC LIMIT 1" in query["sql"] for query in captured.captured_queries
    )


def _append(subject: str = SUBJECT) -> AuditEvent:
    return append_event(
        subject=subject, event_type="memory.recall", actor="system", payload={"n": 1}
    )


def _chain(subject: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(subject_id=subject).order_by("sequence"))


def _linked(events: list[AuditEvent]) -> bool:
    return all(later.prev_hash == earlier.event_hash for earlier, later in pairwise(events))


@pytest.mark.django_db
def test_a_remember_with_two_audit_events_reads_its_head_once():
    with CaptureQueriesContext(connection) as captured:
        result = services.remember(principal=SYSTEM, scope=SUBJECT, text="I take my tea green.")
    assert result.records  # an episode event and a record event were appended
    assert _head_reads(captured) == 1
    events = _chain(SUBJECT)
    assert len(events) >= 2 and _linked(events)
    assert verify_all(principal=SYSTEM).ok


@pytest.mark.django_db
def test_each_subject_is_read_once_and_chains_on_its_own_head():
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        for _ in range(3):
            _append(SUBJECT)
            _append(OTHER)
    assert _head_reads(captured) == 2
    for subject in (SUBJECT, OTHER):
        events = _chain(subject)
        assert len(events) == 3 and events[0].prev_hash is None and _linked(events)
    assert verify_all(principal=SYSTEM).ok


@pytest.mark.django_db
def test_after_a_savepoint_rolls_back_the_next_append_chains_on_the_head_before_it():
    with transaction.atomic():
        first = _append()
        # Given an append inside a savepoint that is then rolled back (its row goes with it)
        with pytest.raises(_Undo), transaction.atomic():
            _append()
            raise _Undo
        # When the subject is appended to again
        with CaptureQueriesContext(connection) as captured:
            second = _append()
    # Then it chains on the head the savepoint started from, read from what is left
    assert second.prev_hash == first.event_hash
    assert [event.event_id for event in _chain(SUBJECT)] == [first.event_id, second.event_id]
    assert _head_reads(captured) == 0  # the hook from before the savepoint is still good
    assert verify_all(principal=SYSTEM).ok


@pytest.mark.django_db
def test_a_savepoint_that_commits_hands_its_head_on():
    with transaction.atomic():
        with transaction.atomic():
            first = _append()
        with CaptureQueriesContext(connection) as captured:
            second = _append()
    assert second.prev_hash == first.event_hash and _head_reads(captured) == 0


@pytest.mark.django_db(transaction=True)
def test_a_new_transaction_reads_the_head_again_after_commit_and_after_rollback():
    with transaction.atomic():
        first = _append()
    with pytest.raises(_Undo), transaction.atomic():
        with CaptureQueriesContext(connection) as captured:
            _append()
        assert _head_reads(captured) == 1
        raise _Undo
    assert connection.run_on_commit == []  # nothing is carried past a transaction's end
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        second = _append()
    assert _head_reads(captured) == 1
    assert second.prev_hash == first.event_hash
    assert verify_all(principal=SYSTEM).ok


@pytest.mark.django_db
def test_the_merkle_log_stays_whole_when_one_transaction_crosses_an_integration():
    with transaction.atomic():
        for index in range(2 * INTEGRATE_EVERY + 5):
            _append(SUBJECT if index % 3 else OTHER)
    assert verify_log() == []
    assert pending_count() < INTEGRATE_EVERY  # integrated along the way, not all left waiting
    assert verify_all(principal=SYSTEM).ok


@pytest.mark.django_db
def test_a_head_further_back_than_the_window_is_read_again_and_still_chains():
    with transaction.atomic():
        first = _append(SUBJECT)
        for index in range(KNOWN_HEAD_WINDOW):
            _append(f"acme:user{index}:proj")
        with CaptureQueriesContext(connection) as captured:
            second = _append(SUBJECT)
    assert _head_reads(captured) == 1
    assert second.prev_hash == first.event_hash
    assert verify_all(principal=SYSTEM).ok
