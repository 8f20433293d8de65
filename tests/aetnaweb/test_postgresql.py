"""PostgreSQL prepared statements (on unless turned off): the hot statements get prepared, value-sensitive ones never."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.db import NotSupportedError, connection
from django.db.backends.postgresql.base import DatabaseWrapper
from django.test.utils import CaptureQueriesContext
from psycopg import pq

from aetnaweb.access import SYSTEM
from aetnaweb.postgresql import CUSTOM_PLAN, PREPARE_AFTER, PreparingCursor, connection_options
from memory import services, vectors
from memory.models import Record, RetrievalEvent
from memory.services import _common
from tests.aetnaweb.test_faults import database_settings

on_postgresql = pytest.mark.skipif(
    settings.DATABASE_VENDOR != "postgresql", reason="prepared statements are PostgreSQL's"
)


@contextmanager
def _session(blocker: Any, alias: str, **options: Any) -> Iterator[DatabaseWrapper]:
    """Another connection to the test database (set up by now), unpooled, with ``options`` added."""
    config = dict(settings.DATABASES["default"])
    kept = {k: v for k, v in config["OPTIONS"].items() if k != "pool"}
    config["OPTIONS"] = kept | options
    config["NAME"] = connection.settings_dict["NAME"]
    wrapper = DatabaseWrapper(config, alias=alias)
    with blocker.unblock():
        yield wrapper
        wrapper.close()


@pytest.fixture
def preparing(django_db_setup, django_db_blocker) -> Iterator[DatabaseWrapper]:
    """A connection opened with the prepared-statement options, whatever the environment says."""
    with _session(django_db_blocker, "preparing", **connection_options()) as wrapper:
        yield wrapper


@pytest.fixture
def other_session(django_db_setup, django_db_blocker) -> Iterator[DatabaseWrapper]:
    """A second connection: another process, running a migration."""
    with _session(django_db_blocker, "other_session") as wrapper:
        yield wrapper


def _prepared(wrapper: DatabaseWrapper) -> list[str]:
    """The statements this connection's server session has prepared."""
    with wrapper.cursor() as cursor:
        cursor.execute(CUSTOM_PLAN + "SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def _run(wrapper: DatabaseWrapper, sql: str, times: int) -> None:
    with wrapper.cursor() as cursor:
        for _ in range(times):
            cursor.execute(sql, [1])
            cursor.fetchall()


@on_postgresql
def test_a_statement_is_prepared_once_it_has_run_a_few_times(preparing):
    sql = "SELECT %s::int + 41 AS answer_prepared_after_a_few_runs"
    _run(preparing, sql, PREPARE_AFTER - 1)
    assert not [s for s in _prepared(preparing) if "answer_prepared_after_a_few_runs" in s]
    _run(preparing, sql, 2)
    assert [s for s in _prepared(preparing) if "answer_prepared_after_a_few_runs" in s]
    assert preparing.connection.cursor_factory is PreparingCursor


@on_postgresql
def test_a_statement_marked_custom_plan_is_never_prepared(preparing):
    _run(preparing, CUSTOM_PLAN + "SELECT %s::int + 41 AS answer_planned_every_time", 15)
    assert not [s for s in _prepared(preparing) if "answer_planned_every_time" in s]


@on_postgresql
@pytest.mark.django_db
def test_recall_candidate_searches_are_marked_to_be_planned_for_their_own_values():
    # Their best plan depends on the visible scopes' sizes (an HNSW walk, or a
    # scan and sort of a small scope): with prepared statements on, none may
    # keep a plan made for another scope.
    for n in range(3):
        services.remember_fact(
            principal=SYSTEM, scope="acme:alice:proj", key=f"fact {n}", value=f"deploy window {n}"
        )
    with CaptureQueriesContext(connection) as ran:
        services.recall(principal=SYSTEM, scope="acme:alice:proj", query="deploy window", limit=3)
    searches = [q["sql"] for q in ran.captured_queries if "<=>" in q["sql"] or "@@" in q["sql"]]
    assert len(searches) >= 2  # the vector and the full-text candidates
    assert all(sql.startswith(CUSTOM_PLAN) for sql in searches), searches
    assert vectors.PG_KNN_SQL.startswith(CUSTOM_PLAN)
    assert vectors.PG_EXACT_KNN_SQL.startswith(CUSTOM_PLAN)


def test_prepared_statements_are_on_by_default_and_can_be_turned_off(tmp_path):
    # (The settings are read in a child process, so this runs on either engine.)
    default = database_settings(tmp_path)
    assert default["OPTIONS"]["server_side_binding"] is True
    assert default["OPTIONS"]["prepare_threshold"] == PREPARE_AFTER
    assert "PreparingCursor" in default["OPTIONS"]["cursor_factory"]
    # Behind a pooler in transaction mode: Django's client-side binding, nothing prepared
    off = database_settings(tmp_path, AETNAWEB_DB_PREPARED_STATEMENTS="0")
    assert not {"server_side_binding", "prepare_threshold", "cursor_factory"} & set(off["OPTIONS"])


PROBE = "SELECT id, v FROM stale_plan_probe WHERE id = %s"


@on_postgresql
def test_a_plan_made_stale_by_another_sessions_migration_is_made_again(preparing, other_session):
    # Given a statement prepared on this connection
    with other_session.cursor() as cursor:
        cursor.execute("CREATE TABLE stale_plan_probe (id int PRIMARY KEY, v int)")
        cursor.execute("INSERT INTO stale_plan_probe VALUES (1, 2)")
    try:
        _run(preparing, PROBE, PREPARE_AFTER + 1)
        assert [s for s in _prepared(preparing) if "stale_plan_probe" in s]
        # When another session changes the type of a column it reads
        with other_session.cursor() as cursor:
            cursor.execute("ALTER TABLE stale_plan_probe ALTER COLUMN v TYPE bigint")
        # Then the statement, run on its own, is planned again and answers
        with preparing.cursor() as cursor:
            cursor.execute(PROBE, [1])
            assert cursor.fetchall() == [(1, 2)]
        # And in a transaction it fails that transaction once; after its rollback it answers
        _run(preparing, PROBE, PREPARE_AFTER + 1)
        with other_session.cursor() as cursor:
            cursor.execute("ALTER TABLE stale_plan_probe ALTER COLUMN v TYPE numeric")
        preparing.set_autocommit(False)
        with pytest.raises(NotSupportedError), preparing.cursor() as cursor:
            cursor.execute(PROBE, [1])
        preparing.rollback()
        preparing.set_autocommit(True)
        with preparing.cursor() as cursor:
            cursor.execute(PROBE, [1])
            assert cursor.fetchall() == [(1, 2)]
    finally:
        with other_session.cursor() as cursor:
            cursor.execute("DROP TABLE stale_plan_probe")


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_remember_and_recall_send_the_writes_they_do_not_read_pipelined(monkeypatch):
    # Given a watch on the write linking an audit event to the records it
    # names, which nothing reads back (remember and recall both make it)
    states: list[int] = []
    real = _common.insert_rows

    def watched(*args, **kwargs):
        states.append(connection.connection.pgconn.pipeline_status)
        return real(*args, **kwargs)

    monkeypatch.setattr(_common, "insert_rows", watched)
    scope = "acme:alice:proj"
    # When a message and an explicit fact are remembered, and recalled
    services.remember(principal=SYSTEM, scope=scope, text="My editor is helix.")
    services.remember_fact(principal=SYSTEM, scope=scope, key="shell", value="fish")
    result = services.recall(principal=SYSTEM, scope=scope, query="helix editor")
    block = services.recall_block(principal=SYSTEM, scope=scope, query="helix editor")
    # Then each wrote it in pipeline mode (the block's two events: the recall, the injection)
    assert states == [pq.PipelineStatus.ON] * 5
    # And everything written is there
    stored = Record.objects.filter(scope=scope, status="active")
    assert sorted(stored.values_list("fact_key", flat=True)) == ["editor", "shell"]
    assert [c.content for c in result.returned][:1] == ["User's editor is helix."]
    assert (
        RetrievalEvent.objects.filter(
            retrieval_id__in=[result.retrieval_id, block.retrieval_id]
        ).count()
        == 2
    )
