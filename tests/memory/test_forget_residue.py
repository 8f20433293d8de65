"""A forget leaves no copy of the content: not in any table, not in the database's bytes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.db import connection

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record

S = "acme:carol:audit2"


def unique_token() -> str:
    # Letters and digits only (one word token) ending in a consonant the
    # porter stemmer leaves alone, so the index stores it whole.
    return "zq" + uuid.uuid4().hex + "zq"


def remember_then_forget(settings) -> tuple[str, str]:
    """Old and new values of one fact, recalled, then forgotten by the user's words."""
    settings.AETNAWEB_STORE_RECALL_QUERIES = True
    old, new = unique_token(), unique_token()
    services.remember(principal=SYSTEM, scope=S, text=f"My backup email is {old}@example.com.")
    services.remember(
        principal=SYSTEM, scope=S, text=f"Use {new}@example.com as my backup email from now on."
    )
    services.recall(principal=SYSTEM, scope=S, query=f"is {new} my backup email")
    services.recall(principal=SYSTEM, scope=S, query=f"what about {old}")
    # A long note spills into overflow pages, which the forget frees whole.
    long_note = services.remember(
        principal=SYSTEM,
        scope=S,
        text="Remember that the code is " + "long and dull " * 400 + f"then {new}",
    )
    receipt = services.forget(principal=SYSTEM, scope=S, utterance="forget my backup email")
    assert len(receipt["purged_record_ids"]) == 2
    services.forget(principal=SYSTEM, scope=S, record_ids=long_note.record_ids)
    return old, new


def rows_holding(token: str) -> list[str]:
    """Every table and row (as text or bytes) that still contains ``token``."""
    needle = token.encode()
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor, include_views=False):
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                for value in row:
                    raw = value if isinstance(value, bytes | memoryview) else str(value).encode()
                    if needle in bytes(raw):
                        found.append(table)
    return found


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_no_table_holds_a_forgotten_value_on_either_database(settings):
    # Given two values of a fact, recalled with their words in the (stored) queries
    old, new = remember_then_forget(settings)
    # Then no table on this database, the index and its shadow tables included,
    # holds either value any more (only the digests of the audit chain remain)
    assert rows_holding(old) == [] and rows_holding(new) == []
    assert set(Record.objects.values_list("status", "content")) == {("tombstoned", "")}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_the_sqlite_files_hold_no_byte_of_a_forgotten_value(settings):
    if connection.vendor != "sqlite":
        pytest.skip("a byte scan of the database files is a SQLite check; see docs/operators.md")
    # Given a committed forget of a fact with a unique word in each value
    old, new = remember_then_forget(settings)
    # When the database file, its write-ahead log and shared memory are read raw
    database = Path(connection.settings_dict["NAME"])
    files = [Path(f"{database}{suffix}") for suffix in ("", "-wal", "-shm")]
    assert files[0].stat().st_size > 0
    hits = {
        f"{path.name}:{token[:10]}": path.read_bytes().count(token.encode())
        for path in files
        if path.exists()
        for token in (old, new)
    }
    # Then neither value appears anywhere in them
    assert set(hits.values()) == {0}, hits


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_the_fulltext_index_keeps_secure_delete_on():
    if connection.vendor != "sqlite":
        pytest.skip("FTS5 option")
    with connection.cursor() as cursor:
        cursor.execute("SELECT v FROM memory_record_fts_config WHERE k = 'secure-delete'")
        assert cursor.fetchone() == (1,)
        cursor.execute("PRAGMA secure_delete")
        assert cursor.fetchone() == (1,)
