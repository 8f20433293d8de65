"""PostgreSQL: the full-text and metadata GIN indexes update in place, so no search reads a pending list."""

from __future__ import annotations

import pytest
from django.db import connection

from aetnaweb.access import SYSTEM
from memory import services

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="GIN is PostgreSQL's"),
    pytest.mark.django_db,
]


def _options(index: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [index])
        row = cursor.fetchone()
    assert row is not None, f"no index {index}"
    return list(row[0] or [])


@pytest.mark.parametrize("index", ["memory_record_fts_document", "mem_record_metadata_gin"])
def test_the_gin_indexes_have_fast_update_off(index):
    assert "fastupdate=off" in _options(index)


def test_a_remembered_record_leaves_no_pending_gin_entries():
    # Given a few records written one by one
    for index in range(5):
        services.remember(
            principal=SYSTEM, scope="acme:alice:*", text=f"I keep bees number {index}."
        )
    # Then the full-text index has no pending list: the entries went into the index itself
    # (gin_clean_pending_list returns how many pending pages it had to merge)
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('memory_record_fts_document'::regclass)")
        assert cursor.fetchone()[0] == 0
