"""The SQLite build the project's connections use (aetnaweb/sqlite.py)."""

from __future__ import annotations

import sqlite3

import pytest
from django.conf import settings
from django.db import connection

from aetnaweb import sqlite

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
