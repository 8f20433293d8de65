"""PostgreSQL: a transaction asks for its subject's locks once, and again whenever it may have lost them."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from aetnaweb.access import SYSTEM
from audit.services import lock_subject, subject_lock_key
from audit.tree import TREE_LOCK_KEY
from memory import services

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="advisory locks are PostgreSQL's"
)

SUBJECT = "acme:alice:proj"


def _lock_statements(captured: CaptureQueriesContext) -> int:
    return sum("pg_advisory_xact_lock" in query["sql"] for query in captured.captured_queries)


def _held(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            " AND ((classid::bigint << 32) | objid::bigint) = %s AND granted",
            [key],  # bigint keys: classid holds the high half, objid the low one
        )
        return bool(cursor.fetchone()[0])


class _Undo(Exception):
    pass


@pytest.mark.django_db
def test_a_transaction_holding_the_locks_does_not_ask_again():
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        lock_subject(SUBJECT)
        lock_subject(SUBJECT)
        with transaction.atomic():  # a savepoint that commits keeps them
            lock_subject(SUBJECT)
        lock_subject(SUBJECT)
        assert _held(TREE_LOCK_KEY) and _held(subject_lock_key(SUBJECT))
    assert _lock_statements(captured) == 1


@pytest.mark.django_db
def test_another_subject_is_locked_on_its_own():
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        lock_subject(SUBJECT)
        lock_subject("acme:bob:proj")
        assert _held(subject_lock_key("acme:bob:proj"))
    assert _lock_statements(captured) == 2


@pytest.mark.django_db
def test_locks_taken_in_a_savepoint_rolled_back_are_asked_for_again():
    with transaction.atomic():
        # Given the locks taken inside a savepoint that is then rolled back
        with pytest.raises(_Undo), transaction.atomic():
            lock_subject(SUBJECT)
            raise _Undo
        # (PostgreSQL released them with the savepoint)
        assert not _held(subject_lock_key(SUBJECT))
        # When the subject is locked again, Then the lock is really asked for, and held
        with CaptureQueriesContext(connection) as captured:
            lock_subject(SUBJECT)
        assert _lock_statements(captured) == 1
        assert _held(subject_lock_key(SUBJECT))


@pytest.mark.django_db(transaction=True)
def test_a_new_transaction_asks_again_after_commit_and_after_rollback():
    with transaction.atomic():
        lock_subject(SUBJECT)
    with pytest.raises(_Undo), transaction.atomic():
        with CaptureQueriesContext(connection) as captured:
            lock_subject(SUBJECT)
        assert _lock_statements(captured) == 1
        raise _Undo
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        lock_subject(SUBJECT)
        assert _held(subject_lock_key(SUBJECT))
    assert _lock_statements(captured) == 1


@pytest.mark.django_db
def test_a_remember_with_two_audit_events_locks_its_scope_once():
    with CaptureQueriesContext(connection) as captured:
        result = services.remember(principal=SYSTEM, scope=SUBJECT, text="I take my tea green.")
    assert result.records  # an episode event and a record event were appended
    assert _lock_statements(captured) == 1
