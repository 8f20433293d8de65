"""The SQLite build the project's connections use (aetnaweb/sqlite.py), and their cursor's placeholders."""

from __future__ import annotations

import sqlite3

import pytest
from django.conf import settings
from django.db import connection
from django.db.backends.sqlite3.base import SQLiteCursorWrapper

from aetnaweb import sqlite
from aetnaweb.sqlite_backend import base as backend

pytestmark = pytest.mark.skipif(
    settings.DATABASE_VENDOR != "sqlite", reason="the SQLite driver only matters on SQLite"
)


def test_connections_use_a_build_with_fts5_secure_delete(db):
    # Given the project's settings are loaded
    # When a connection asks SQLite its version
    with connection.cursor() as cursor:
        cursor.execute("SELECT sqlite_version()")
        (version,) = cursor.fetchone()
    # Then it is the current build, new enough for FTS5 secure-delete
    assert tuple(int(part) for part in version.split(".")) >= sqlite.MINIMUM_VERSION
    assert sqlite.supports_secure_delete()


def test_fts5_secure_delete_option_is_accepted(db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE VIRTUAL TABLE temp.probe USING fts5(body)")
        cursor.execute("INSERT INTO temp.probe(probe, rank) VALUES('secure-delete', 1)")
        cursor.execute("DROP TABLE temp.probe")


def test_the_shim_answers_the_limits_django_asks_for(db):
    # Django reads these two limits to size batches; the shim must answer both.
    raw = connection.connection
    assert raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) >= 999
    assert raw.getlimit(sqlite3.SQLITE_LIMIT_COLUMN) >= 100
    with pytest.raises(sqlite3.ProgrammingError):
        raw.getlimit(12345)


def test_install_is_idempotent():
    assert sqlite.install() is sqlite.install()


@pytest.mark.parametrize(
    "query",
    [
        "SELECT %s",
        "SELECT id FROM memory_record WHERE scope IN (%s, %s) AND content LIKE '10%%'",
        "SELECT '%%s is literal', %s",
    ],
)
def test_placeholders_convert_as_djangos_own_cursor_converts_them(db, query):
    with connection.cursor() as wrapper:
        cursor = wrapper.cursor
        assert isinstance(cursor, backend.QueuedCursor)
        # The cached conversion gives what Django's cursor gives, twice over
        djangos = SQLiteCursorWrapper.convert_query(cursor, query)
        assert cursor.convert_query(query) == cursor.convert_query(query) == djangos
        # Named placeholders keep Django's own conversion
        named = "SELECT %(a)s, %(b)s"
        assert cursor.convert_query(named, param_names=["a", "b"]) == "SELECT :a, :b"


def test_a_statement_run_again_is_not_converted_again(db):
    # Given a statement run once on a connection
    statement = "SELECT %s + 1 AS converted_once_probe"
    with connection.cursor() as cursor:
        cursor.execute(statement, [1])
        before = backend._qmark_style.cache_info()
        # When it runs again with other values
        cursor.execute(statement, [41])
        # Then the answer is right, and the conversion came from the cache
        assert cursor.fetchone() == (42,)
    after = backend._qmark_style.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses
