"""The raw SQL helpers of the hot paths write what the ORM would have written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from aetnaweb.sql import create_row, execute_rows
from memory.models import RetrievalEvent


def _event_values(retrieval_id: str) -> dict[str, object]:
    return {
        "retrieval_id": retrieval_id,
        "scope": "acme:alice:proj",
        "tenant": "acme",
        # "user" is a reserved word on PostgreSQL: the helper must quote it.
        "user": "alice",
        "project": "proj",
        "session_id": "s-1",
        "actor": "agent",
        "purpose": "recall",
        "query_sha256": "0" * 64,
        "query_text": "",
        "limit": 5,
        "min_score": 0.25,
        "candidates": [{"record_id": "mem_1", "parts": {"lexical": 0.5}, "returned": True}],
        "returned_ids": ["mem_1"],
        "audit_event_id": "aud_1",
        "created_at": datetime(2026, 12, 2, 16, 30, 5, 123456, tzinfo=UTC),
    }


@pytest.mark.django_db
def test_create_row_writes_what_the_orm_reads_back():
    # Given a retrieval row's values, JSON, a datetime and a reserved column name among them
    values = _event_values("ret_one")
    # When it is inserted by the helper
    with connection.cursor() as cursor:
        created = create_row(cursor, RetrievalEvent, **values)
    # Then the instance is saved, and the ORM reads the same values back under its key
    assert created.pk is not None and not created._state.adding
    row = RetrievalEvent.objects.get(pk=created.pk)
    for name, value in values.items():
        assert getattr(row, name) == value, name


@pytest.mark.django_db
def test_create_row_applies_field_defaults_like_the_orm():
    # Given values that leave out fields with Python defaults (session, purpose, query text)
    values = _event_values("ret_defaults")
    for name in ("session_id", "purpose", "query_text", "audit_event_id"):
        del values[name]
    # When it is inserted by the helper
    with connection.cursor() as cursor:
        created = create_row(cursor, RetrievalEvent, **values)
    # Then the defaults were written, as Model.objects.create would have
    row = RetrievalEvent.objects.get(pk=created.pk)
    assert (row.session_id, row.purpose, row.query_text, row.audit_event_id) == (
        "",
        "recall",
        "",
        "",
    )


@pytest.mark.django_db
def test_create_row_returns_each_new_rows_own_key():
    # Given two rows inserted one after the other
    with connection.cursor() as cursor:
        first = create_row(cursor, RetrievalEvent, **_event_values("ret_a")).pk
        second = create_row(cursor, RetrievalEvent, **_event_values("ret_b")).pk
    # Then the keys are distinct and each names its own row
    assert first != second
    assert RetrievalEvent.objects.get(pk=first).retrieval_id == "ret_a"
    assert RetrievalEvent.objects.get(pk=second).retrieval_id == "ret_b"


@pytest.mark.django_db
def test_create_row_refuses_a_duplicate_like_the_orm():
    # Given a row already inserted
    with connection.cursor() as cursor:
        create_row(cursor, RetrievalEvent, **_event_values("ret_same"))
    # When the same unique retrieval ID is inserted again, Then the database refuses it
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        create_row(cursor, RetrievalEvent, **_event_values("ret_same"))
    assert RetrievalEvent.objects.filter(retrieval_id="ret_same").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("count", [0, 1, 3])
def test_execute_rows_writes_every_row_and_one_alone_as_a_plain_execute(count):
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE rows_probe (n integer, label text)")
    rows = [(i, f"row {i}") for i in range(count)]
    with CaptureQueriesContext(connection) as captured, connection.cursor() as cursor:
        execute_rows(cursor, "INSERT INTO rows_probe (n, label) VALUES (%s, %s)", rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT n, label FROM rows_probe ORDER BY n")
        assert [tuple(row) for row in cursor.fetchall()] == rows
    # Django logs executemany as "N times: ..."; a single row goes without it.
    logged = [query["sql"] for query in captured.captured_queries]
    if count == 0:
        assert logged == []
    elif count == 1:
        assert len(logged) == 1 and not logged[0].startswith("1 times")
    else:
        assert len(logged) == 1 and logged[0].startswith(f"{count} times")
