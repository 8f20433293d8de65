"""The vector index's layout: a coarse binary scan re-ranked by exact cosine (SQLite), kept in step."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from aetnaweb.access import SYSTEM
from memory import embeddings, services, vectors
from memory.models import Record

ALICE = "acme:alice:*"
BEEF = "I avoid beef at business dinners."
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="sqlite-vec layout")


def _vector(text: str) -> np.ndarray:
    return np.frombuffer(embeddings.embed(text) or b"", dtype="<f4")


def _table_sql() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [vectors.TABLE])
        return str(cursor.fetchone()[0])


@pytest.mark.django_db
def test_similarity_is_the_exact_cosine_not_the_coarse_distance():
    # Given two records
    for text in (BEEF, "My sister Maria lives in Lisbon."):
        services.remember(principal=SYSTEM, scope=ALICE, text=text, force=True)
    # When searched by meaning
    query = "Am I vegetarian?"
    hits = vectors.search(visible_scopes=[ALICE], query=query, limit=5)
    # Then each hit's similarity is the float cosine of the two vectors (the re-rank),
    # best first
    assert len(hits) == 2
    for hit in hits:
        content = Record.objects.get(pk=hit.pk).content
        exact = float(_vector(query) @ _vector(vectors.embedding_text(content)))
        assert hit.similarity == pytest.approx(exact, abs=1e-5)
    assert hits[0].similarity >= hits[1].similarity


@pytest.mark.django_db
def test_a_scope_far_bigger_than_the_coarse_window_still_finds_the_meaning():
    # Given a scope holding 300 template records (more than limit x COARSE_FACTOR) and the fact
    stored = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    pk = Record.objects.get(record_id=stored).pk
    for index in range(300):
        services.remember(
            principal=SYSTEM,
            scope=ALICE,
            text=f"Remember that project {index} uses codename falcon{index} and budget {index * 7}.",
        )
    assert Record.objects.filter(scope=ALICE, status="active").count() > 5 * vectors.COARSE_FACTOR
    # When asked by meaning for five hits
    hits = vectors.search(visible_scopes=[ALICE], query="Am I vegetarian?", limit=5)
    # Then the beef record comes first
    assert hits[0].pk == pk
    assert len(hits) == 5


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_the_migration_converts_both_ways_keeping_every_vector(clean_index):
    # Given two indexed records in the coarse layout
    ids = [
        services.remember(principal=SYSTEM, scope=ALICE, text=text, force=True).record_ids[0]
        for text in (BEEF, "My sister Maria lives in Lisbon.")
    ]
    pks = [Record.objects.get(record_id=i).pk for i in ids]
    before = vectors.search(visible_scopes=[ALICE], query="Am I vegetarian?", limit=5)
    assert "coarse bit" in _table_sql()
    assert "cell integer" in _table_sql()
    # When migrations 0011 and 0009 are reversed (float-only layout of 0006) and applied again
    with connection.schema_editor() as editor:
        vectors.cell_table(editor, cells=False)
        assert "cell" not in _table_sql() and "coarse bit" in _table_sql()
        assert vectors.indexed_pks(pks) == set(pks)
        vectors.quantise_table(editor, coarse=False)
    assert "coarse" not in _table_sql() and vectors.indexed_pks(pks) == set(pks)
    with connection.schema_editor() as editor:
        vectors.quantise_table(editor, coarse=True)
        vectors.quantise_table(editor, coarse=True)  # a second run changes nothing
        vectors.cell_table(editor)
        vectors.cell_table(editor)
    # Then every vector is still there, in cell 0, and search answers exactly as before
    assert "coarse bit" in _table_sql() and "cell integer" in _table_sql()
    with connection.cursor() as cursor:  # and the rebuilt table's chunks are indexed again
        cursor.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s",
            [vectors.CHUNKS_INDEX],
        )
        assert "partition00, partition01, partition02" in cursor.fetchone()[0]
    assert vectors.indexed_pks(pks) == set(pks)
    assert vectors.search(visible_scopes=[ALICE], query="Am I vegetarian?", limit=5) == before


@sqlite_only
def test_forget_leaves_neither_the_float_nor_the_coarse_bytes_in_the_file(clean_index, checkpoint):
    # Given a committed record, its float vector and its 48-byte coarse vector
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    content = Record.objects.get(record_id=record_id).content
    vector = embeddings.embed(vectors.embedding_text(content))
    with connection.cursor() as cursor:
        cursor.execute("SELECT vec_quantize_binary(%s)", [vector])
        coarse = bytes(cursor.fetchone()[0])
    checkpoint()
    assert len(coarse) == embeddings.DIMENSIONS // 8
    path = connection.settings_dict["NAME"]
    with open(path, "rb") as handle:
        data = handle.read()
    assert vector in data and coarse in data
    # When it is forgotten
    services.forget(principal=SYSTEM, scope=ALICE, selector="beef")
    checkpoint()
    # Then neither is anywhere in the file
    with open(path, "rb") as handle:
        data = handle.read()
    assert vector not in data and coarse not in data


def _chunk_lookups_of_a_search(query: str, scopes: list[str]) -> list[str]:
    """The statements sqlite-vec runs on its chunk table while answering one search."""
    seen: list[str] = []
    connection.ensure_connection()
    connection.connection.set_trace_callback(seen.append)
    try:
        vectors.search(visible_scopes=scopes, query=query, limit=5)
    finally:
        connection.connection.set_trace_callback(None)
    # The extension's own statements are traced as comments ("-- select ...").
    return [
        statement.removeprefix("-- ")
        for statement in seen
        if statement.startswith("-- ") and f"{vectors.TABLE}_chunks" in statement
    ]


@sqlite_only
@pytest.mark.django_db
def test_a_search_finds_each_partitions_chunks_through_an_index_not_a_scan():
    # Given indexed records in two scopes
    services.remember(principal=SYSTEM, scope=ALICE, text=BEEF)
    services.remember(principal=SYSTEM, scope="acme:bob:*", text="I avoid pork.", force=True)
    # When a search reads the visible scopes' partitions
    lookups = _chunk_lookups_of_a_search("Am I vegetarian?", [ALICE, "acme:*:*"])
    # Then every lookup of a partition's chunks is answered by the partition index
    assert lookups
    with connection.cursor() as cursor:
        for statement in lookups:
            cursor.execute(f"EXPLAIN QUERY PLAN {statement}", [None] * statement.count("?"))
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
            assert f"USING INDEX {vectors.CHUNKS_INDEX}" in plan, (statement, plan)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pgvector plan")
@pytest.mark.django_db
def test_postgresql_knn_walks_the_hnsw_index_with_the_scope_filter_inside():
    # Given indexed records (a test table is tiny, so the planner is told to prefer
    # index scans, as it does by itself on a scope of 100k records)
    services.remember(principal=SYSTEM, scope=ALICE, text=BEEF)
    literal = vectors._pg_literal(embeddings.embed("Am I vegetarian?") or b"")
    scopes = [ALICE, "acme:*:*", "platform:*:*"]
    with connection.cursor() as cursor:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        cursor.execute("EXPLAIN " + vectors.PG_KNN_SQL, [literal, scopes, literal, 5, scopes])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # Then the KNN is an HNSW index scan ordered by distance, filtered by scope and
    # status in that same scan (not a sort of every row in the scope)
    assert f"Index Scan using {vectors.TABLE}_hnsw" in plan
    scan = plan.split(f"{vectors.TABLE}_hnsw", 1)[1]
    assert "Filter:" in scan and "scope" in scan.split("Filter:", 1)[1]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pgvector walk")
@pytest.mark.django_db
def test_postgresql_knn_that_stops_short_is_answered_exactly():
    # Given Alice's records among more of Bob's (which the scope filter rejects)
    for n in range(6):
        services.remember(principal=SYSTEM, scope=ALICE, text=f"I visited museum number {n}.")
    for n in range(20):
        services.remember(principal=SYSTEM, scope="acme:bob:*", text=f"I visited gallery {n}.")
    alice = list(Record.objects.filter(scope=ALICE, status="active").values_list("pk", "content"))
    query = "Which museums did I visit?"
    exact = sorted(
        alice,
        key=lambda row: -float(_vector(query) @ _vector(vectors.embedding_text(row[1]))),
    )
    sent: list[str] = []

    def starved(execute, sql, params, many, context):
        # The planner walks HNSW, and the walk stops after one row, as it does after
        # hnsw.max_scan_tuples rows on a big table (a tiny one is read whole at once)
        sent.append(sql)
        result = execute(sql, params, many, context)
        if sql.startswith("SET LOCAL hnsw.iterative_scan"):
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                execute(f"SET LOCAL {setting} = off", None, False, context)
            execute("SET LOCAL hnsw.iterative_scan = off", None, False, context)
            execute("SET LOCAL hnsw.ef_search = 1", None, False, context)
        return result

    # When a search for 5 of Alice's stops short of 5
    with connection.execute_wrapper(starved):
        hits = vectors.search(visible_scopes=[ALICE], query=query, limit=5)
        filtered = vectors.search(
            visible_scopes=[ALICE], query=query, limit=5, metadata={"nothing": 1}
        )
    # Then it is asked again exactly, and answers the 5 nearest of Alice's records
    assert sum("::vector) + 0 LIMIT" in sql for sql in sent) == 2
    assert [hit.pk for hit in hits] == [pk for pk, _ in exact[:5]]
    # (a filter nothing matches is asked exactly too, and still finds nothing)
    assert filtered == []


def test_the_postgresql_literal_gives_back_every_float32_exactly():
    # Given vectors of float32 values of every magnitude and sign
    rng = np.random.default_rng(7)
    samples = [
        rng.standard_normal(embeddings.DIMENSIONS).astype("<f4"),
        (rng.standard_normal(embeddings.DIMENSIONS) * 1e-30).astype("<f4"),
        (rng.standard_normal(embeddings.DIMENSIONS) * 1e30).astype("<f4"),
        np.zeros(embeddings.DIMENSIONS, dtype="<f4"),
    ]
    for vector in samples:
        # When it is written as pgvector's text form
        literal = vectors._pg_literal(vector.tobytes())
        # Then parsing it as float32, as pgvector does, gives the very same bits
        assert literal.startswith("[") and literal.endswith("]") and " " not in literal
        parsed = np.array([float(x) for x in literal[1:-1].split(",")], dtype="<f4")
        assert parsed.tobytes() == vector.tobytes()
