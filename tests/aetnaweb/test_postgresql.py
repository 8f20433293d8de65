"""PostgreSQL connections prepare the hot statements and leave the value-sensitive ones unprepared."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from aetnaweb.access import SYSTEM
from aetnaweb.postgresql import CUSTOM_PLAN, PREPARE_AFTER, PreparingCursor
from memory import services
from tests.aetnaweb.test_faults import database_settings

on_postgresql = pytest.mark.skipif(
    settings.DATABASE_VENDOR != "postgresql", reason="prepared statements are PostgreSQL's"
)


def _prepared() -> list[str]:
    """The statements this connection's server session has prepared."""
    with connection.cursor() as cursor:
        cursor.execute(CUSTOM_PLAN + "SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def _run(sql: str, times: int) -> None:
    with connection.cursor() as cursor:
        for _ in range(times):
            cursor.execute(sql, [1])
            cursor.fetchall()


@on_postgresql
@pytest.mark.django_db
def test_a_statement_is_prepared_once_it_has_run_a_few_times():
    sql = "SELECT %s::int + 41 AS answer_prepared_after_a_few_runs"
    _run(sql, PREPARE_AFTER - 1)
    assert not [s for s in _prepared() if "answer_prepared_after_a_few_runs" in s]
    _run(sql, 2)
    assert [s for s in _prepared() if "answer_prepared_after_a_few_runs" in s]


@on_postgresql
@pytest.mark.django_db
def test_a_statement_marked_custom_plan_is_never_prepared():
    _run(CUSTOM_PLAN + "SELECT %s::int + 41 AS answer_planned_every_time", 3 * PREPARE_AFTER)
    assert not [s for s in _prepared() if "answer_planned_every_time" in s]


@on_postgresql
@pytest.mark.django_db
def test_recall_candidate_searches_are_planned_for_their_own_values_every_time():
    # Given a remember path that runs often enough to be prepared
    for n in range(3 * PREPARE_AFTER):
        services.remember_fact(
            principal=SYSTEM, scope="acme:alice:proj", key=f"fact {n}", value=f"deploy window {n}"
        )
    # When recall runs as often
    for _ in range(3 * PREPARE_AFTER):
        services.recall(principal=SYSTEM, scope="acme:alice:proj", query="deploy window", limit=3)
    prepared = _prepared()
    # Then the write path's statements are prepared (the audit append among them)
    assert any("INSERT INTO audit_log" in statement for statement in prepared)
    # And neither candidate search is: their plans depend on the scopes' sizes
    assert not [s for s in prepared if "<=>" in s or "@@" in s]
    assert connection.connection.cursor_factory is PreparingCursor


def test_prepared_statements_are_on_by_default_and_can_be_turned_off(tmp_path):
    # (The settings are read in a child process, so this runs on either engine.)
    default = database_settings(tmp_path)
    assert default["OPTIONS"]["server_side_binding"] is True
    assert default["OPTIONS"]["prepare_threshold"] == PREPARE_AFTER
    assert "PreparingCursor" in default["OPTIONS"]["cursor_factory"]
    # A pooler in transaction mode: Django's own client-side binding, nothing prepared
    off = database_settings(tmp_path, AETNAWEB_DB_PREPARED_STATEMENTS="0")
    assert not {"server_side_binding", "prepare_threshold", "cursor_factory"} & set(off["OPTIONS"])
