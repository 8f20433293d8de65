"""The raw SQL helpers of the hot paths write what the ORM would have written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from aetnaweb.sql import create_row, execute_rows, pipelined
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


def _pipeline_on() -> bool:
    """Whether this connection's statements are being sent without waiting (PostgreSQL only)."""
    return settings.DATABASE_VENDOR == "postgresql" and bool(
        connection.connection.pgconn.pipeline_status
    )


_RENAME = "UPDATE memory_retrievalevent SET actor = %s WHERE retrieval_id = %s"


@pytest.mark.django_db(transaction=True)
def test_pipelined_writes_land_with_their_transaction_and_a_read_inside_sees_them():
    with transaction.atomic(), pipelined(), connection.cursor() as cursor:
        # A write whose answer is read (RETURNING), then one whose answer is not
        create_row(cursor, RetrievalEvent, **_event_values("ret_piped"))
        cursor.execute(_RENAME, ["renamed", "ret_piped"])
        # On PostgreSQL the second went without waiting: the pipeline is on
        assert _pipeline_on() == (settings.DATABASE_VENDOR == "postgresql")
        # A read inside the block gets its answer, after every write sent before it
        cursor.execute(
            "SELECT actor FROM memory_retrievalevent WHERE retrieval_id = %s", ["ret_piped"]
        )
        assert tuple(cursor.fetchone()) == ("renamed",)
    # After the block every answer has been waited for, and the transaction committed
    assert not _pipeline_on()
    assert RetrievalEvent.objects.get(retrieval_id="ret_piped").actor == "renamed"


@pytest.mark.django_db(transaction=True)
def test_a_statement_failing_in_a_pipelined_block_fails_its_transaction_with_djangos_error():
    # Given two rows committed
    with connection.cursor() as cursor:
        create_row(cursor, RetrievalEvent, **_event_values("ret_kept"))
        create_row(cursor, RetrievalEvent, **_event_values("ret_other"))
    # When a pipelined block changes one, then sends a statement the database
    # refuses (a duplicate unique ID) and another after it, none of them read
    with (
        pytest.raises(IntegrityError),
        transaction.atomic(),
        pipelined(),
        connection.cursor() as cursor,
    ):
        cursor.execute(_RENAME, ["changed", "ret_kept"])
        cursor.execute(
            "UPDATE memory_retrievalevent SET retrieval_id = %s WHERE retrieval_id = %s",
            ["ret_kept", "ret_other"],
        )
        cursor.execute(_RENAME, ["changed too", "ret_other"])
    # Then the refusal surfaced as Django's IntegrityError, and nothing of the
    # transaction was kept, before the failure or after it
    assert not _pipeline_on()
    rows = dict(RetrievalEvent.objects.values_list("retrieval_id", "actor"))
    assert rows == {"ret_kept": "agent", "ret_other": "agent"}
    # And the connection serves the next transaction
    with transaction.atomic(), pipelined(), connection.cursor() as cursor:
        cursor.execute(_RENAME, ["after", "ret_kept"])
    assert RetrievalEvent.objects.get(retrieval_id="ret_kept").actor == "after"


@pytest.mark.django_db(transaction=True)
def test_a_nested_pipelined_block_joins_the_outer_one():
    with transaction.atomic(), pipelined(), connection.cursor() as cursor:
        with pipelined():
            create_row(cursor, RetrievalEvent, **_event_values("ret_nested"))
            cursor.execute(_RENAME, ["inner", "ret_nested"])
        # After the inner block ends, the outer one still pipelines
        assert _pipeline_on() == (settings.DATABASE_VENDOR == "postgresql")
        cursor.execute(_RENAME, ["outer", "ret_nested"])
    assert RetrievalEvent.objects.get(retrieval_id="ret_nested").actor == "outer"
