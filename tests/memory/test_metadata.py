"""Record metadata (memory/metadata.py): bounded flat key/values, stored by every write
path, purged by forget, and a typed filter that runs inside both candidate queries."""

from __future__ import annotations

import json
import math

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from aetnaweb.access import SYSTEM
from aetnaweb.text import UnstorableText
from audit.models import AuditEvent
from memory import corrections, metadata, search, selectors, services, vectors
from memory.batch import BatchItem, BatchItemError, remember_batch
from memory.binding import salted_sha256
from memory.limits import (
    MAX_METADATA_BYTES,
    MAX_METADATA_FILTER_KEYS,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
)
from memory.metadata import MetadataError
from memory.models import Record
from tests.memory.conftest import snapshot

ALICE = "acme:alice:*"
ALICE_PROJ = "acme:alice:proj"
BOB = "acme:bob:*"
pytestmark = pytest.mark.django_db


def remember(text: str, scope: str = ALICE, **kwargs) -> str:
    result = services.remember(principal=SYSTEM, scope=scope, text=text, force=True, **kwargs)
    return result.records[0].record_id


def side_rows(record_id: str) -> list[tuple[str, str]]:
    if connection.vendor != "sqlite":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, value_json FROM memory_record_meta m JOIN memory_record r "
            "ON r.id = m.record_pk WHERE r.record_id = %s ORDER BY key",
            [record_id],
        )
        return list(cursor.fetchall())


def filler(size: int) -> dict[str, str]:
    """One key whose canonical JSON object is exactly ``size`` bytes."""
    overhead = len(json.dumps({"k": ""}, separators=(",", ":")))
    return {"k": "x" * (size - overhead)}


# -- storing ---------------------------------------------------------------------------------


def test_remember_stores_metadata_on_every_record_and_returns_it():
    # Given a message stating two facts, with metadata
    result = services.remember(
        principal=SYSTEM,
        scope=ALICE,
        text="My backup email is a@example.org. My editor is helix.",
        metadata={"customer_id": 42, "channel": "email", "vip": True, "note": None},
    )
    # Then each record holds it, and the result says so
    assert len(result.records) == 2
    for stored in result.records:
        assert stored.metadata == {"customer_id": 42, "channel": "email", "vip": True, "note": None}
        assert Record.objects.get(record_id=stored.record_id).metadata["customer_id"] == 42
    # And the selectors' representation carries it
    row = Record.objects.get(record_id=result.records[0].record_id)
    assert selectors.record_as_dict(row)["metadata"]["channel"] == "email"


def test_without_metadata_a_record_has_an_empty_object():
    record_id = remember("My editor is helix.")
    assert Record.objects.get(record_id=record_id).metadata == {}
    assert side_rows(record_id) == []


def test_remember_fact_and_quarantined_content_keep_metadata():
    # Given an explicit fact and third-party content, both with metadata
    fact = services.remember_fact(
        principal=SYSTEM, scope=ALICE, key="deploy window", value="Tue", metadata={"team": "ops"}
    ).records[0]
    quarantined = services.remember(
        principal=SYSTEM,
        scope=ALICE,
        text="<webpage>My backup email is evil@example.org</webpage>",
        metadata={"source": "crawler"},
    ).records[0]
    # Then both keep it, and promotion keeps it too
    assert Record.objects.get(record_id=fact.record_id).metadata == {"team": "ops"}
    assert quarantined.status == "quarantined"
    services.promote(
        principal=SYSTEM, scope=ALICE, record_id=quarantined.record_id, reason="checked"
    )
    promoted = Record.objects.get(record_id=quarantined.record_id)
    assert promoted.status == "active" and promoted.metadata == {"source": "crawler"}


def test_the_audit_event_holds_a_digest_of_the_metadata_never_its_values():
    # Given a record with metadata holding personal data
    record_id = remember("My editor is helix.", metadata={"email": "alice@example.org"})
    # Then its created event names a digest of the canonical metadata
    event = AuditEvent.objects.get(record_id=record_id, event_type="memory.record_created")
    payload = json.loads(event.payload)
    # salted with the record's own salt, so a forgotten value cannot be guessed back
    salt = Record.objects.get(record_id=record_id).digest_salt
    assert payload["metadata_sha256"] == salted_sha256(salt, '{"email":"alice@example.org"}')
    assert payload["metadata_sha256"] != metadata.metadata_digest({"email": "alice@example.org"})
    # And no audit row holds the value or the key's value text
    assert not AuditEvent.objects.filter(payload__contains="alice@example.org").exists()


def test_a_record_without_metadata_has_no_digest_in_its_event():
    record_id = remember("My editor is helix.")
    event = AuditEvent.objects.get(record_id=record_id, event_type="memory.record_created")
    assert "metadata_sha256" not in json.loads(event.payload)


def test_batch_items_carry_their_own_metadata():
    results = remember_batch(
        scope=ALICE,
        items=[
            BatchItem(text="My editor is helix.", metadata={"n": 1}),
            BatchItem(key="shell", value="fish", metadata={"n": 2}),
        ],
        principal=SYSTEM,
    )
    assert [r.records[0].metadata for r in results] == [{"n": 1}, {"n": 2}]


def test_a_refused_batch_item_metadata_stores_nothing_and_names_the_item():
    # Given a batch whose second item's metadata is nested
    before = snapshot()
    with pytest.raises(BatchItemError) as caught:
        remember_batch(
            scope=ALICE,
            items=[
                BatchItem(text="My editor is helix.", metadata={"n": 1}),
                BatchItem(text="My shell is fish.", metadata={"deep": {"x": 1}}),
            ],
            principal=SYSTEM,
        )
    # Then the error names the item and key, and nothing was stored
    assert caught.value.field == "items.1.metadata.deep"
    assert snapshot() == before


# -- corrections -----------------------------------------------------------------------------


def test_a_correction_carries_metadata_over_unless_it_gives_new():
    # Given a record with metadata
    old = remember("My backup email is a@example.org.", metadata={"customer_id": 42})
    # When it is corrected without metadata, the correction carries it over
    carried = corrections.correct_record(
        principal=SYSTEM, record_id=old, content="User's backup email is b@example.org"
    )
    assert carried.record.metadata == {"customer_id": 42}
    # When it is corrected again with metadata, that replaces it
    replaced = corrections.correct_record(
        principal=SYSTEM,
        record_id=carried.record.record_id,
        content="User's backup email is c@example.org",
        metadata={"customer_id": 7},
    )
    assert replaced.record.metadata == {"customer_id": 7}
    # And the history keeps each version's metadata
    lineage = corrections.record_history(SYSTEM, replaced.record.record_id)
    assert [r.metadata for r in lineage] == [
        {"customer_id": 42},
        {"customer_id": 42},
        {"customer_id": 7},
    ]


def test_a_correction_with_bad_metadata_writes_nothing():
    old = remember("My backup email is a@example.org.", metadata={"customer_id": 42})
    before = snapshot()
    with pytest.raises(MetadataError):
        corrections.correct_record(
            principal=SYSTEM,
            record_id=old,
            content="User's backup email is b@example.org",
            metadata={"Customer": 1},
        )
    assert snapshot() == before


# -- limits ----------------------------------------------------------------------------------


def test_limits_at_the_limit_are_kept():
    at_keys = {f"k{i}": i for i in range(MAX_METADATA_KEYS)}
    at_key = {"k" * MAX_METADATA_KEY_CHARS: 1}
    at_size = filler(MAX_METADATA_BYTES)
    for value in (at_keys, at_key, at_size):
        assert metadata.check_metadata(value) == value
    assert remember("My editor is helix.", metadata=at_size)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({f"k{i}": i for i in range(MAX_METADATA_KEYS + 1)}, "metadata"),
        ({"k" * (MAX_METADATA_KEY_CHARS + 1): 1}, "metadata"),
        (filler(MAX_METADATA_BYTES + 1), "metadata"),
        ({"Customer": 1}, "metadata"),
        ({"": 1}, "metadata"),
        ({"a b": 1}, "metadata"),
        ({"kéy": 1}, "metadata"),
        ({"-x": 1}, "metadata"),
        ({"x": {"nested": 1}}, "metadata.x"),
        ({"x": [1, 2]}, "metadata.x"),
        ({"x": math.nan}, "metadata.x"),
        ({"x": math.inf}, "metadata.x"),
        ({"x": 2**53}, "metadata.x"),
        ({"x": "a\x00b"}, "metadata.x"),
        ({"x": "\ud800"}, "metadata.x"),
        (["not", "an", "object"], "metadata"),
    ],
)
def test_metadata_past_a_limit_is_refused_and_writes_nothing(value, field):
    before = snapshot()
    with pytest.raises((MetadataError, UnstorableText)) as caught:
        services.remember(principal=SYSTEM, scope=ALICE, text="My editor is helix.", metadata=value)
    if isinstance(caught.value, MetadataError):
        assert caught.value.field == field
    assert snapshot() == before


def test_a_filter_naming_too_many_keys_is_refused():
    wanted = {f"k{i}": i for i in range(MAX_METADATA_FILTER_KEYS)}
    assert metadata.check_filter(wanted) == wanted
    with pytest.raises(MetadataError):
        metadata.check_filter({**wanted, "one_more": 1})


# -- forget ----------------------------------------------------------------------------------


def test_forget_purges_metadata_with_the_content():
    # Given a record with personal metadata
    record_id = remember("My backup email is a@example.org.", metadata={"email": "a@example.org"})
    assert Record.objects.get(record_id=record_id).metadata
    # When it is forgotten
    services.forget(principal=SYSTEM, scope=ALICE, record_ids=[record_id])
    # Then no metadata is left on the row nor in the SQLite side table
    row = Record.objects.get(record_id=record_id)
    assert row.status == "tombstoned" and row.metadata == {}
    assert side_rows(record_id) == []
    # And a filter on the old value finds nothing
    page = selectors.list_records(SYSTEM, scope=ALICE, metadata={"email": "a@example.org"})
    assert page.items == []
    assert selectors.record_as_dict(row)["metadata"] == {}


# -- filters ---------------------------------------------------------------------------------


def test_list_filter_is_typed_equality_and_ands_keys():
    number = remember("My editor is helix.", metadata={"customer_id": 42, "channel": "email"})
    text = remember("My shell is fish.", metadata={"customer_id": "42", "channel": "email"})
    floaty = remember("My desk is oak.", metadata={"customer_id": 42.0})
    boolean = remember("My car is red.", metadata={"customer_id": True})
    remember("My tea is green.")

    def ids(wanted):
        return {
            r.record_id for r in selectors.list_records(SYSTEM, scope=ALICE, metadata=wanted).items
        }

    # 42 and "42" are distinct; 42.0 is the number 42 (as PostgreSQL's jsonb has it); true is not 1
    assert ids({"customer_id": 42}) == {number, floaty}
    assert ids({"customer_id": "42"}) == {text}
    assert ids({"customer_id": True}) == {boolean}
    assert ids({"customer_id": 1}) == set()
    # Several keys are ANDed
    assert ids({"customer_id": 42, "channel": "email"}) == {number}
    assert ids({"channel": "email"}) == {number, text}


def test_recall_filter_runs_inside_both_candidate_queries():
    # Given the wanted record first, then a newer crowd on the same topic without its metadata
    wanted = remember(
        "I reviewed the launch codename plan orion today.", metadata={"customer_id": 42}
    )
    for n in range(12):
        remember(f"I reviewed the launch codename plan {n} today.", metadata={"customer_id": 1})
    wanted_pk = Record.objects.get(record_id=wanted).pk
    # Then each index, asked for one row, gives the filtered record, not a crowd member
    terms = search.query_terms("launch codename plan")
    one = search.search(visible_scopes=[ALICE], terms=terms, limit=1, metadata={"customer_id": 42})
    assert [h.pk for h in one] == [wanted_pk]
    if vectors.status().available:
        near = vectors.search(
            visible_scopes=[ALICE], query="launch codename", limit=1, metadata={"customer_id": 42}
        )
        assert [h.pk for h in near] == [wanted_pk]
    # When recall asks with a limit smaller than the unfiltered crowd
    result = services.recall(
        principal=SYSTEM,
        scope=ALICE,
        query="launch codename plan",
        limit=1,
        metadata={"customer_id": 42},
    )
    # Then the filtered record is returned: the filter did not starve top-k
    assert result.record_ids == [wanted]
    assert result.candidates[0].metadata == {"customer_id": 42}
    # And every candidate (lexical or semantic) holds the metadata
    assert {c.record_id for c in result.candidates} == {wanted}
    # And the retrieval's audit event keeps a digest of the filter only
    payload = json.loads(AuditEvent.objects.get(event_id=result.audit_event_id).payload)
    assert payload["metadata_filter_sha256"] == metadata.metadata_digest({"customer_id": 42})


def test_the_indexes_answer_the_filter_directly():
    # Given records with and without the metadata
    keep = remember("I reviewed the launch codename plan orion.", metadata={"customer_id": 42})
    remember("I reviewed the launch codename plan nova.", metadata={"customer_id": 7})
    keep_pk = Record.objects.get(record_id=keep).pk
    # Then the full-text query returns only the matching record
    hits = search.search(
        visible_scopes=[ALICE],
        terms=search.query_terms("launch codename"),
        limit=10,
        metadata={"customer_id": 42},
    )
    assert [h.pk for h in hits] == [keep_pk]
    # And so does the vector query (when semantic recall is available here)
    if vectors.status().available:
        near = vectors.search(
            visible_scopes=[ALICE], query="codename", limit=10, metadata={"customer_id": 42}
        )
        assert [h.pk for h in near] == [keep_pk]
        assert 0 < near[0].similarity <= 1


def test_filter_never_returns_a_siblings_record_with_the_same_metadata():
    # Given alice and bob both hold a record with the same metadata and words
    mine = remember("My favourite project codename is orion.", ALICE, metadata={"customer_id": 42})
    remember("My favourite project codename is orion.", BOB, metadata={"customer_id": 42})
    # When alice recalls and lists with the filter
    result = services.recall(
        principal=SYSTEM, scope=ALICE, query="project codename orion", metadata={"customer_id": 42}
    )
    page = selectors.list_records(
        SYSTEM, scope="acme:alice:*", include_descendants=True, metadata={"customer_id": 42}
    )
    # Then only alice's record comes back
    assert {c.record_id for c in result.candidates} == {mine}
    assert [r.record_id for r in page.items] == [mine]


def test_recall_from_a_child_scope_filters_inherited_records():
    parent = remember("I reviewed the launch codename plan orion.", ALICE, metadata={"team": "a"})
    remember("I reviewed the launch codename plan vega.", ALICE, metadata={"team": "b"})
    result = services.recall(
        principal=SYSTEM, scope=ALICE_PROJ, query="launch codename", metadata={"team": "a"}
    )
    assert result.record_ids == [parent]


def test_stale_side_rows_never_lend_metadata():
    # Given a side-table row left behind under a record's primary key (a flushed table)
    if connection.vendor != "sqlite":
        pytest.skip("the side table exists on SQLite only")
    record_id = remember("My editor is helix.")
    pk = Record.objects.get(record_id=record_id).pk
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_record_meta (record_pk, record_id, key, value_json) "
            "VALUES (%s, 'mem_gone', 'customer_id', '42')",
            [pk],
        )
    # Then the filter does not match the record, which holds no metadata
    assert selectors.list_records(SYSTEM, scope=ALICE, metadata={"customer_id": 42}).items == []


def test_query_string_filters_parse_json_values():
    assert metadata.filter_from_query([("metadata.customer_id", "42")]) == {"customer_id": 42}
    assert metadata.filter_from_query([("metadata.customer_id", '"42"')]) == {"customer_id": "42"}
    assert metadata.filter_from_query([("metadata.vip", "true"), ("scope", "x")]) == {"vip": True}
    for bad in ("alice", "NaN", "{}", "[1]", ""):
        with pytest.raises(MetadataError):
            metadata.filter_from_query([("metadata.name", bad)])
    with pytest.raises(MetadataError) as caught:
        metadata.filter_from_query([("metadata.a", "1"), ("metadata.a", "2")])
    assert caught.value.field == "metadata.a"


# -- indexes ---------------------------------------------------------------------------------


def _plan(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
        # Few rows in a test table: forbid the sequential scan so the plan shows
        # whether the index *can* answer the containment.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_filter_is_answered_by_an_index_on_this_database():
    # Given records with metadata
    for n in range(20):
        remember(f"I reviewed the launch codename plan {n}.", metadata={"customer_id": n})
    # When the list filter's condition is planned
    condition, params = metadata.sql_condition("r", {"customer_id": 4})
    plan = _plan(f"SELECT r.id FROM memory_record r WHERE {condition}", params)
    # Then it reads the metadata index: GIN jsonb_path_ops, or the side table's (key, value)
    if connection.vendor == "sqlite":
        assert "memory_record_meta_kv" in plan, plan
    else:
        assert "mem_record_metadata_gin" in plan, plan
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM memory_record r WHERE {condition}", params)
        assert cursor.fetchone()[0] == 1


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    key=st.text(max_size=80),
    raw=st.one_of(
        st.text(max_size=200),
        st.integers(min_value=1, max_value=3000).map(lambda n: "[" * n),
        st.integers(min_value=1, max_value=3000).map(lambda n: '{"a":' * n),
        st.integers().map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.from_regex(r"-?[0-9]{1,6000}(\.[0-9]{1,50})?([eE][+-]?[0-9]{1,5})?", fullmatch=True),
    ),
)
def test_any_query_string_filter_is_parsed_or_refused_never_a_crash(key, raw):
    # Whatever the key and value, the parser answers with a filter or a MetadataError.
    try:
        wanted = metadata.filter_from_query([("metadata." + key, raw)])
    except MetadataError:
        return
    assert list(wanted) == [key]
