"""A forget leaves no copy of the content: not in any table, not in the database's bytes.

The copies include the API answers kept for ``Idempotency-Key`` replays and
the stored messages (episodes) of statements that produced no record of their
own: one ignored, one a duplicate of an ancestor's fact (issue 29, items 3, 5).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from access.models import IdempotencyKey
from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record
from tests.api.conftest import issue_token

S = "acme:carol:audit2"
PARENT = "acme:carol:*"


def unique_token() -> str:
    # Letters and digits only (one word token) ending in a consonant the
    # porter stemmer leaves alone, so the index stores it whole.
    return "zq" + uuid.uuid4().hex + "zq"


def post_with_key(path: str, key: str, body: dict[str, object]) -> dict[str, object]:
    """An API write sent with an Idempotency-Key, so its answer is kept for replays."""
    response = Client().post(
        f"/api/v1/memory/{path}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {issue_token(PARENT)}", "Idempotency-Key": key},
    )
    assert response.status_code in (200, 201), response.content
    return response.json()  # type: ignore[no-any-return]


def remember_then_forget(settings) -> tuple[str, ...]:
    """Old and new values of one fact, recalled (through the API with keys too), then forgotten
    by the user's words; and two messages with no record of their own, forgotten the same way."""
    settings.AETNAWEB_STORE_RECALL_QUERIES = True
    old, new, ignored, repeated = (unique_token() for _ in range(4))
    post_with_key(
        "remember", "k-old", {"scope": S, "text": f"My backup email is {old}@example.com."}
    )
    services.remember(
        principal=SYSTEM, scope=S, text=f"Use {new}@example.com as my backup email from now on."
    )
    kept = post_with_key("recall", "k-recall", {"scope": S, "query": "my backup email"})
    assert new in json.dumps(kept)
    services.recall(principal=SYSTEM, scope=S, query=f"is {new} my backup email")
    services.recall(principal=SYSTEM, scope=S, query=f"what about {old}")
    # A statement the extractor ignores, and one that repeats the parent scope's fact
    statement = services.remember(
        principal=SYSTEM, scope=S, text=f"The wifi password at the office is {ignored}."
    )
    services.remember(principal=SYSTEM, scope=PARENT, text=f"My shoe size is {repeated}.")
    duplicate = services.remember(principal=SYSTEM, scope=S, text=f"My shoe size is {repeated}.")
    assert statement.records == () and duplicate.records == () and duplicate.duplicate_of
    # A long note spills into overflow pages, which the forget frees whole.
    long_note = services.remember(
        principal=SYSTEM,
        scope=S,
        text="Remember that the code is " + "long and dull " * 400 + f"then {new}",
    )
    receipt = services.forget(principal=SYSTEM, scope=S, utterance="forget my backup email")
    assert len(receipt["purged_record_ids"]) == 2
    services.forget(principal=SYSTEM, scope=S, record_ids=long_note.record_ids)
    for utterance, message in (
        ("forget the wifi password", statement),
        ("forget my shoe size", duplicate),
    ):
        receipt = services.forget(principal=SYSTEM, scope=S, utterance=utterance)
        assert receipt["purged_record_ids"] == []
        assert receipt["purged_episode_ids"] == [message.episode_id]
    # The parent's own record is a forget at the parent (a forget never cascades)
    services.forget(principal=SYSTEM, scope=PARENT, utterance="forget my shoe size")
    return old, new, ignored, repeated


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
    # Given two values of a fact, recalled with their words in the (stored) queries and in
    # kept API answers, and two messages with no record, all forgotten
    tokens = remember_then_forget(settings)
    # Then no table on this database, the index and its shadow tables, the kept API
    # answers and the stored messages included, holds any value any more (only the
    # digests of the audit chain remain)
    assert {token: rows_holding(token) for token in tokens} == {token: [] for token in tokens}
    # And both kept answers still exist (so the scan read them), now saying "forgotten"
    assert IdempotencyKey.objects.filter(response_status=410).count() == 2
    assert set(Record.objects.values_list("status", "content")) == {("tombstoned", "")}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_the_sqlite_files_hold_no_byte_of_a_forgotten_value(settings):
    if connection.vendor != "sqlite":
        pytest.skip("a byte scan of the database files is a SQLite check; see docs/operators.md")
    # Given a committed forget of a fact with a unique word in each value
    tokens = remember_then_forget(settings)
    # When the database file, its write-ahead log and shared memory are read raw
    database = Path(connection.settings_dict["NAME"])
    files = [Path(f"{database}{suffix}") for suffix in ("", "-wal", "-shm")]
    assert files[0].stat().st_size > 0
    hits = {
        f"{path.name}:{token[:10]}": path.read_bytes().count(token.encode())
        for path in files
        if path.exists()
        for token in tokens
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
