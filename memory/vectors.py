"""The vector index over active records: sqlite-vec on SQLite, pgvector on PostgreSQL.

Like the full-text index (:mod:`memory.search`) it holds exactly the records
recall may return, and it is kept in step from the same two calls: a record
that becomes active is indexed by :func:`memory.search.index_records`, which
calls :func:`index_records` here, and a record that stops being active
(superseded, forgotten, rejected, consolidated away) is removed by
:func:`memory.search.unindex_records`, which calls :func:`unindex_records`.
Both run inside the service's transaction, so a record and its vector
appear and disappear together.

The scope and status filters run inside the index query itself, never on its
output (a post-filter could hand back fewer than ``k`` rows, or rows it should
not):

- SQLite: a ``vec0`` virtual table with ``scope``, ``cell`` and ``status``
  as partition keys; the KNN query names the visible scopes, their cells to
  read (memory/vector_cells.py: a big scope is split into cells and only the
  nearest are read) and ``status = 'active'``, so sqlite-vec only reads those
  partitions. The KNN scans binary-quantised vectors (one bit per dimension)
  and the best ``COARSE_FACTOR * k`` of them are re-ranked by exact cosine on
  the float vectors stored beside them.
- PostgreSQL: a ``vector(384)`` column with an HNSW cosine index and a
  scope index; one query has the scope and status WHERE clauses and the
  ``ORDER BY distance LIMIT k``, with pgvector's iterative index scan so a
  filtered HNSW scan keeps going until it has ``k`` rows.

Either way the hits are joined to the record row, which re-checks status and
scope. A recall metadata filter (:mod:`memory.metadata`) is a condition on
that row, so a filtered query has its own path on each engine, with the
filter inside the candidate query (:func:`_filtered_sqlite`,
:func:`_filtered_postgresql`). If the model or the database extension is unavailable, every function
here quietly does nothing and :func:`status` says why; recall stays lexical.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from aetnaweb.postgresql import CUSTOM_PLAN
from aetnaweb.sql import execute_rows
from memory import embeddings, vector_cells
from memory import metadata as record_metadata

logger = logging.getLogger(__name__)

TABLE = "memory_record_vec"
# sqlite-vec refuses k above 4096; recall asks for far fewer.
MAX_K = 4096
# SQLite: how many candidates the binary (1 bit per dimension) scan hands to
# the exact float re-rank, per requested hit. sqlite-vec 0.1 only has a
# brute-force KNN, so the scan reads every vector of the visible partitions:
# 48 bytes each instead of 1,536 is what keeps a 100k-record scope fast.
# Scopes with at most ``limit * COARSE_FACTOR`` visible records get the exact
# answer; bigger ones the exact order of the best coarse candidates.
COARSE_FACTOR = 3
# The vec0 columns on SQLite. ``coarse`` is the sign of each dimension
# (vec_quantize_binary), searched by Hamming distance; ``embedding`` is an
# auxiliary column (stored beside the row, never scanned) holding the float32
# vector for the re-rank and for rebuilding.
# ``cell`` is the inverted-file cell of big scopes (memory/vector_cells.py;
# 0 for every vector of a scope that is not split). ``status`` is a partition
# key too (every vector is 'active'): vec0 checks a partition key once per
# chunk of vectors and a metadata column once per vector, about a fifth of
# the KNN's cost.
_SQLITE_COLUMNS = (
    "record_pk integer primary key, "
    "scope text partition key, "
    "cell integer partition key, "
    "status text partition key, "
    f"coarse bit[{embeddings.DIMENSIONS}], "
    "+embedding blob, "
    # Half of vec0's default: a cell (about 1,000 vectors) or a small scope
    # wastes fewer empty slots, which the KNN still walks (a fifth faster).
    "chunk_size=512"
)
# Migration 0009's layout: coarse + re-rank, no cells.
_SQLITE_COARSE_COLUMNS = (
    "record_pk integer primary key, "
    "scope text partition key, "
    "status text, "
    f"coarse bit[{embeddings.DIMENSIONS}], "
    "+embedding blob"
)
# Migration 0006's layout: float vectors only, scanned in full.
_SQLITE_FLOAT_COLUMNS = (
    "record_pk integer primary key, "
    "scope text partition key, "
    "status text, "
    f"embedding float[{embeddings.DIMENSIONS}] distance_metric=cosine"
)


@dataclass(frozen=True)
class VectorHit:
    """One semantic candidate: the record and its cosine similarity to the query (-1 to 1)."""

    pk: int
    record_id: str
    similarity: float


@dataclass(frozen=True)
class SemanticStatus:
    """Whether recall is hybrid in this process, and if not, what is missing."""

    available: bool
    model: str
    engine: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "model": self.model,
            "engine": self.engine,
            "detail": self.detail,
        }


# -- the database side -----------------------------------------------------------


def load_sqlite_extension(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: load sqlite-vec into every new SQLite connection.

    A failure is logged and leaves the connection without vector search
    (recall stays lexical); it never stops the connection from being used.
    """
    if connection.vendor != "sqlite":
        return
    raw = connection.connection
    try:
        import sqlite_vec

        raw.enable_load_extension(True)
        try:
            sqlite_vec.load(raw)
        finally:
            # Loading stays off for everything else the connection runs.
            raw.enable_load_extension(False)
        connection.aetnaweb_vec_loaded = True
    except Exception as exc:  # a missing wheel or a build without extension loading
        logger.warning("sqlite-vec not loaded: %s", exc)
        connection.aetnaweb_vec_loaded = False


def _engine_name() -> str:
    return "sqlite-vec" if connection.vendor == "sqlite" else "pgvector"


def _table_missing_reason() -> str | None:
    """Why the vector table cannot be used on this connection, or None if it can."""
    # Only a positive answer is remembered (per connection): a table that is
    # missing now may be created by a later migrate.
    if getattr(connection, "aetnaweb_vec_table", False):
        return None
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            if not getattr(connection, "aetnaweb_vec_loaded", False):
                return "the sqlite-vec extension is not loaded"
            cursor.execute("SELECT 1 FROM sqlite_master WHERE name = %s", [TABLE])
        else:
            cursor.execute("SELECT 1 WHERE to_regclass(%s) IS NOT NULL", [TABLE])
        if cursor.fetchone() is None:
            return (
                f"no {TABLE} table (run `manage.py migrate`; on PostgreSQL the "
                "pgvector extension must be installed first)"
            )
    connection.aetnaweb_vec_table = True  # type: ignore[attr-defined]
    return None


def _sqlite_table_exists() -> bool:
    return _sqlite_table_sql(connection) is not None


CHUNKS_INDEX = f"{TABLE}_chunks_partitions"


def index_chunk_partitions(cursor: Any) -> None:
    """SQLite: index vec0's chunk table on its partition keys (nothing without a vec0 table).

    For each partition a KNN reads (one visible scope, or one cell of a split
    scope), vec0 looks up that partition's chunks with an equality on every
    partition key of its ``_chunks`` shadow table, which has no index: each
    lookup read the whole table (0.29 ms for an empty cell at a million
    vectors, 2,000 chunks; 42 cells made 12 ms of a 26 ms KNN). With this
    index it is a B-tree lookup (0.06 ms). SQLite keeps the index in step as
    vec0 adds chunks, and drops it with the table.
    """
    cursor.execute("SELECT name FROM pragma_table_info(%s)", [f"{TABLE}_chunks"])
    keys = [name for (name,) in cursor.fetchall() if str(name).startswith("partition")]
    if keys:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {CHUNKS_INDEX} ON {TABLE}_chunks ({', '.join(keys)})"
        )


def create_table(schema_editor: Any) -> bool:
    """Create the vector table if this database can hold one (used by the migration).

    Returns False, and creates nothing, when the engine lacks vector support:
    the rest of the schema still migrates and recall stays lexical.
    """
    conn = schema_editor.connection
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            if not getattr(conn, "aetnaweb_vec_loaded", False):
                logger.warning("sqlite-vec unavailable: %s not created", TABLE)
                return False
            cursor.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING vec0({_SQLITE_COLUMNS})"
            )
            index_chunk_partitions(cursor)
            vector_cells.create_table(cursor)
            return True
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            logger.warning("pgvector is not installed on this server: %s not created", TABLE)
            return False
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} ("
            "record_pk bigint PRIMARY KEY, "
            "scope varchar(200) NOT NULL, "
            "status varchar(12) NOT NULL, "
            f"embedding vector({embeddings.DIMENSIONS}) NOT NULL)"
        )
        cursor.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_scope ON {TABLE} (scope, status)")
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {TABLE}_hnsw ON {TABLE} "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        return True


def quantise_table(schema_editor: Any, *, coarse: bool = True) -> None:
    """SQLite: move the vec0 table to the coarse + re-rank layout (or back, ``coarse=False``).

    Every stored vector is kept (no re-embedding): the float vectors are
    copied and, going forward, quantised into the coarse column. A table
    already in the wanted layout, or no table at all, is left alone.
    PostgreSQL is unchanged.
    """
    conn = schema_editor.connection
    if conn.vendor != "sqlite":
        return
    table_sql = _sqlite_table_sql(conn)
    if table_sql is None or ("coarse bit" in table_sql) == coarse:
        return
    if coarse:
        _relayout(
            conn,
            _SQLITE_COARSE_COLUMNS,
            "record_pk, scope, status, coarse, embedding",
            "record_pk, scope, status, vec_quantize_binary(embedding), embedding",
        )
    else:
        _relayout(
            conn,
            _SQLITE_FLOAT_COLUMNS,
            "record_pk, scope, status, embedding",
            "record_pk, scope, status, embedding",
        )


def _sqlite_table_sql(conn: Any) -> str | None:
    """The vec0 table's CREATE statement on ``conn`` (its layout), or None without a table."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [TABLE])
        row = cursor.fetchone()
    return str(row[0]) if row is not None else None


def _relayout(conn: Any, columns: str, insert: str, select: str) -> None:
    """Rebuild the vec0 table with ``columns``, copying every vector (``select`` from the old rows).

    Through a plain staging table: vec0 does not rename its shadow tables.
    """
    if not getattr(conn, "aetnaweb_vec_loaded", False):
        raise RuntimeError(f"sqlite-vec is needed to convert {TABLE}; it is not loaded")
    staging = TABLE + "_staging"
    with conn.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {staging} AS SELECT record_pk, scope, status, embedding FROM {TABLE}"  # noqa: S608  (constant tables)
        )
        cursor.execute(f"DROP TABLE {TABLE}")
        cursor.execute(f"CREATE VIRTUAL TABLE {TABLE} USING vec0({columns})")
        index_chunk_partitions(cursor)
        cursor.execute(f"INSERT INTO {TABLE}({insert}) SELECT {select} FROM {staging}")  # noqa: S608  (constant tables)
        cursor.execute(f"DROP TABLE {staging}")


def cell_table(schema_editor: Any, *, cells: bool = True) -> None:
    """SQLite: add the ``cell`` partition key to the coarse layout (or take it away, ``cells=False``).

    Every vector is kept, filed in cell 0 (as if no scope were split yet; the
    next reindex splits the big ones). Going back drops the centroids.
    A table already in the wanted layout, or no table at all, is left alone.
    """
    conn = schema_editor.connection
    if conn.vendor != "sqlite":
        return
    table_sql = _sqlite_table_sql(conn)
    with conn.cursor() as cursor:
        if table_sql is None or ("cell integer" in table_sql) == cells:
            if cells and table_sql is not None:
                vector_cells.create_table(cursor)
            return
        cell = ("cell, ", "0, ") if cells else ("", "")
        _relayout(
            conn,
            _SQLITE_COLUMNS if cells else _SQLITE_COARSE_COLUMNS,
            f"record_pk, scope, {cell[0]}status, coarse, embedding",
            f"record_pk, scope, {cell[1]}status, vec_quantize_binary(embedding), embedding",
        )
        if cells:
            vector_cells.create_table(cursor)
        else:
            cursor.execute(f"DROP TABLE IF EXISTS {vector_cells.CELLS_TABLE}")


def drop_table(schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cursor.execute(f"DROP TABLE IF EXISTS {vector_cells.CELLS_TABLE}")


def status() -> SemanticStatus:
    """Whether semantic recall works here: the model loaded and the vector table usable."""
    engine = _engine_name()
    if not settings.AETNAWEB_SEMANTIC_RECALL:
        return SemanticStatus(
            False, embeddings.MODEL_NAME, engine, "turned off (AETNAWEB_SEMANTIC_RECALL=0)"
        )
    model = embeddings.status()
    if not model.available:
        return SemanticStatus(False, model.model, engine, f"model not loaded: {model.detail}")
    reason = _table_missing_reason()
    if reason is not None:
        return SemanticStatus(False, model.model, engine, reason)
    return SemanticStatus(True, model.model, engine, "hybrid recall (full-text + vectors)")


def _usable() -> bool:
    # Cheap enough per call: the model status is cached, the table check is
    # one catalogue lookup on a connection that is already open.
    return (
        settings.AETNAWEB_SEMANTIC_RECALL
        and embeddings.available()
        and _table_missing_reason() is None
    )


# pgvector's text form, '[x,y,...]'. Nine significant digits give back every
# float32 exactly, and one %-format of all 384 costs a third of repr() each.
_PG_LITERAL = "[" + ",".join(["%.9g"] * embeddings.DIMENSIONS) + "]"


def _pg_literal(vector: bytes) -> str:
    return _PG_LITERAL % struct.unpack(f"<{embeddings.DIMENSIONS}f", vector)


def _write(cursor: Any, rows: Sequence[tuple[int, str, bytes]]) -> None:
    if connection.vendor == "sqlite":
        # vec0 has no upsert: delete first so a re-index replaces, never duplicates.
        _sqlite_delete(cursor, [pk for pk, _, _ in rows])
        cursor.executemany(
            f"INSERT INTO {TABLE}(record_pk, scope, cell, status, coarse, embedding) "  # noqa: S608  (constant table)
            "VALUES (%s, %s, %s, 'active', vec_quantize_binary(%s), %s)",
            [
                (pk, scope, cell, vector, vector)
                for (pk, scope, vector), cell in zip(
                    rows,
                    vector_cells.cells_for(cursor, [(scope, vector) for _, scope, vector in rows]),
                    strict=True,
                )
            ],
        )
    else:
        execute_rows(
            cursor,
            f"INSERT INTO {TABLE}(record_pk, scope, status, embedding) "  # noqa: S608  (constant table)
            "VALUES (%s, %s, 'active', %s::vector) "
            "ON CONFLICT (record_pk) DO UPDATE SET scope = EXCLUDED.scope, "
            "status = EXCLUDED.status, embedding = EXCLUDED.embedding",
            [(pk, scope, _pg_literal(vector)) for pk, scope, vector in rows],
        )


_USER_POSSESSIVE = re.compile(r"\bUser's\b")
_USER = re.compile(r"\bUser\b")


def embedding_text(content: str) -> str:
    """What is embedded for a record: its content back in the first person.

    Records are stored in the third person ("User avoids beef ..."), but the
    questions asked of them are first person ("Am I vegetarian?"), and the
    model matches "I"/"my" to "I"/"my" far better than to the word "User".
    """
    return _USER.sub("I", _USER_POSSESSIVE.sub("my", content))


# Embeddings computed ahead of a write transaction, by record content, for
# the thread that computed them (see :func:`prepared`).
_ahead = threading.local()
# PostgreSQL: the threads that embed while a transaction runs its first
# statements (see :func:`prepared`). Made on first use, in the process that
# uses them: a forked child has none of its parent's threads.
EMBED_THREADS = 8
_embedders: ThreadPoolExecutor | None = None
_embedders_lock = threading.Lock()


def _embedder_pool() -> ThreadPoolExecutor:
    global _embedders
    with _embedders_lock:
        if _embedders is None:
            _embedders = ThreadPoolExecutor(EMBED_THREADS, thread_name_prefix="embed")
        return _embedders


# Texts per share: a prepared block of twice this many or more (a conversation
# import, a reindex batch) is split over AETNAWEB_EMBED_THREADS threads. The
# model releases the GIL, so each share runs on a core of its own; each text
# still runs alone through the same session, so its vector is the one a
# single embed gives, byte for byte: only the wall time changes.
SHARE_FROM = 8
_sharers: tuple[int, ThreadPoolExecutor] | None = None
_sharers_lock = threading.Lock()


def _embed_shares() -> int:
    """Threads one prepared block may use (``AETNAWEB_EMBED_THREADS``, at least 1)."""
    return max(1, int(settings.AETNAWEB_EMBED_THREADS))


def _sharer_pool(size: int) -> ThreadPoolExecutor:
    # Its own pool, not the embedders': a share never waits on a pool it runs in.
    global _sharers
    with _sharers_lock:
        if _sharers is None or _sharers[0] < size:
            _sharers = (size, ThreadPoolExecutor(size, thread_name_prefix="embed_share"))
        return _sharers[1]


def _forget_embedders() -> None:
    global _embedders, _embedders_lock, _sharers, _sharers_lock
    _embedders, _embedders_lock = None, threading.Lock()
    _sharers, _sharers_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_embedders)


def _embed_serially(texts: Sequence[str]) -> dict[str, bytes]:
    vectors: dict[str, bytes] = {}
    for text in texts:
        vector = embeddings.embed(text)
        if vector is not None:
            vectors[text] = vector
    return vectors


def _embed_each(texts: Sequence[str]) -> dict[str, bytes]:
    """Each text's vector; a large block in shares on several threads (see SHARE_FROM)."""
    shares = min(_embed_shares(), len(texts) // SHARE_FROM)
    if shares < 2:
        return _embed_serially(texts)
    size = -(-len(texts) // shares)
    parts = [texts[start : start + size] for start in range(0, len(texts), size)]
    pool = _sharer_pool(len(parts) - 1)
    futures = [pool.submit(_embed_serially, part) for part in parts[1:]]
    # The calling thread takes the first share rather than wait idle.
    vectors = _embed_serially(parts[0])
    for future in futures:
        vectors.update(future.result())
    return vectors


class _Ahead:
    """The embeddings of one :func:`prepared` block: computed already, or on their way."""

    def __init__(self, texts: Sequence[str], *, in_background: bool) -> None:
        self.texts = frozenset(texts)
        self._future: Future[dict[str, bytes]] | None = None
        self._vectors: dict[str, bytes] = {}
        if in_background:
            self._future = _embedder_pool().submit(_embed_each, texts)
        else:
            self._vectors = _embed_each(texts)

    def vector(self, text: str) -> bytes | None:
        """The text's embedding (waiting for it if it is still being computed); None if unavailable."""
        if self._future is not None:
            self._vectors, self._future = self._future.result(), None
        return self._vectors.get(text)

    def settle(self) -> None:
        """Wait until nothing is being computed for this block any more (its result may go unused)."""
        if self._future is not None:
            wait([self._future])


@contextmanager
def prepared(contents: Iterable[str], *, alongside: bool = False) -> Iterator[None]:
    """Embed record ``contents`` ahead, so the write transaction run inside does not.

    The vector is still written by :func:`index_records` in the record's own
    transaction (a record and its vector appear together); only the model's
    ~2-5 ms of work moves out of it. By default it runs now, before BEGIN,
    where it holds no lock (on SQLite, the one database-wide write lock).

    ``alongside``, on PostgreSQL only: it runs on a thread of its own while
    the block runs, and :func:`index_records` waits for it. For blocks whose
    statements before the vector's insert (each a round trip to the server)
    take about as long as the embedding (remember's episode, its audit event,
    the duplicate check, the record), so the transaction's locks are usually
    held no longer, and the caller waits for the two at once, not one after
    the other: remember's p50 at 100k records 0.5-1.5 ms lower in
    bench/memory_scale.py, and two app instances on one database served the
    same requests a second. On SQLite those statements take a fraction of
    that, and the write lock would be held while the model ran. The block
    does not end before the embedding has.

    A content the block ends up not storing costs one wasted embedding; one
    it stores without being prepared is embedded inside, as before. Nothing
    is cached beyond the block.
    """
    texts = (
        list(dict.fromkeys(embedding_text(content) for content in contents)) if _usable() else []
    )
    ahead = _Ahead(texts, in_background=alongside and bool(texts) and connection.vendor != "sqlite")
    outer: tuple[_Ahead, ...] = getattr(_ahead, "blocks", ())
    _ahead.blocks = (*outer, ahead)
    try:
        yield
    finally:
        _ahead.blocks = outer
        ahead.settle()


def _embedding_for(content: str) -> bytes | None:
    text = embedding_text(content)
    for ahead in reversed(getattr(_ahead, "blocks", ())):
        if text in ahead.texts:
            vector = ahead.vector(text)
            if vector is not None:
                return bytes(vector)
    return embeddings.embed(text)


def index_records(rows: Iterable[tuple[int, str, str, str]]) -> None:
    """Embed and add ``(pk, record_id, scope, content)`` rows that just became active.

    Contents embedded ahead by an enclosing :func:`prepared` are not embedded again.
    """
    rows = list(rows)
    if not rows or not _usable():
        return
    vectors = []
    for pk, _record_id, scope, content in rows:
        vector = _embedding_for(content)
        if vector is not None:
            vectors.append((pk, scope, vector))
    if vectors:
        with connection.cursor() as cursor:
            _write(cursor, vectors)
        if connection.vendor == "sqlite":
            for scope in {scope for _, scope, _ in vectors}:
                if vector_cells.note_write(scope):
                    transaction.on_commit(partial(_schedule_cells, scope))


def _schedule_cells(scope: str) -> None:
    # The job layer sits above this module (memory.reindexing imports it).
    from memory.reindexing import schedule_cells_if_due

    schedule_cells_if_due(scope)


def train_cells(
    scope: str | None = None,
    progress: Callable[[int], None] | None = None,
    *,
    resplit: bool = False,
) -> list[vector_cells.Training]:
    """SQLite: split every big scope (or ``scope``) that is due into cells; see memory/vector_cells.py.

    ``resplit`` (with a ``scope``): split it again now if it is split at all,
    due or not: after a large forget, new centroids no longer carry the
    forgotten records' share of their means.
    """
    if connection.vendor != "sqlite" or not status().available:
        return []
    names = vector_cells.scopes_due(scope)
    if resplit and scope is not None and not names and vector_cells.is_split(scope):
        names = [scope]
    done = []
    for name in names:
        trained = vector_cells.train(name, table=TABLE, progress=progress)
        if trained is not None:
            done.append(trained)
    return done


def unindex_records(pks: Sequence[int]) -> None:
    """Remove the vectors of records that stopped being active. No vector is left behind."""
    if not pks:
        return
    reason = _table_missing_reason()
    if reason is not None:
        if connection.vendor == "sqlite" and _sqlite_table_exists():
            # Vectors exist but this connection cannot reach them: refusing (the
            # caller's transaction rolls back) is the only way not to leave a
            # forgotten record's vector behind.
            raise RuntimeError(f"cannot remove vectors from {TABLE}: {reason}")
        return
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            _sqlite_delete(cursor, pks)
        else:
            marks = ", ".join(["%s"] * len(pks))
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE record_pk IN ({marks})",  # noqa: S608  (placeholders only)
                list(pks),
            )


def _sqlite_delete(cursor: Any, pks: Sequence[int]) -> None:
    # One rowid lookup per vector: vec0 answers ``record_pk IN (a, b, ...)``
    # by reading every row of the table (SQLite turns a one-value IN into
    # ``=``, so only deletes of several records were slow: 0.4 s per forget
    # in a million-vector table, under the write lock).
    cursor.executemany(
        f"DELETE FROM {TABLE} WHERE record_pk = %s",  # noqa: S608  (constant table)
        [(int(pk),) for pk in pks],
    )


def indexed_pks(pks: Sequence[int]) -> set[int]:
    """Which of ``pks`` have a vector (for inspection and tests)."""
    if not pks or _table_missing_reason() is not None:
        return set()
    found: set[int] = set()
    with connection.cursor() as cursor:
        for pk in pks:
            cursor.execute(f"SELECT record_pk FROM {TABLE} WHERE record_pk = %s", [pk])  # noqa: S608  (constant table)
            found.update(int(row[0]) for row in cursor.fetchall())
    return found


def index_size() -> int:
    """How many vectors the index holds (0 when there is no usable index)."""
    if _table_missing_reason() is not None:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {TABLE}")  # noqa: S608  (constant table)
        return int(cursor.fetchone()[0])


# -- asking it ------------------------------------------------------------------


# Appended to a KNN's ORDER BY distance: an order the HNSW index cannot
# serve, so the planner measures every row the filter keeps and sorts them
# (an exact answer).
_EXACT_ORDER = " + 0"
# PostgreSQL: vector, visible scopes, vector, k, visible scopes. {exact} is
# "" (the HNSW walk) or _EXACT_ORDER.
_PG_KNN_TEMPLATE = (
    CUSTOM_PLAN + "SELECT knn.record_pk, r.record_id, knn.distance FROM ("  # noqa: S608  (constant table)
    f"SELECT v.record_pk, v.embedding <=> %s::vector AS distance FROM {TABLE} v "
    "WHERE v.scope = ANY(%s) AND v.status = 'active' "
    "ORDER BY (v.embedding <=> %s::vector){exact} LIMIT %s) knn "
    "JOIN memory_record r ON r.id = knn.record_pk "
    "WHERE r.status = 'active' AND r.scope = ANY(%s) "
    "ORDER BY knn.distance, knn.record_pk DESC"
)
PG_KNN_SQL = _PG_KNN_TEMPLATE.format(exact="")
PG_EXACT_KNN_SQL = _PG_KNN_TEMPLATE.format(exact=_EXACT_ORDER)


def search(
    *,
    visible_scopes: Sequence[str],
    query: str,
    limit: int,
    metadata: Mapping[str, Any] | None = None,
) -> list[VectorHit]:
    """The ``limit`` active records in ``visible_scopes`` nearest in meaning to ``query``.

    Best first. Empty when semantic recall is unavailable. ``metadata`` keeps
    only records holding those typed values, inside the query (see
    :func:`_filtered_sqlite` and :func:`_filtered_postgresql`).
    """
    return neighbours(visible_scopes=visible_scopes, query=query, limit=limit, metadata=metadata)[0]


def neighbours(
    *,
    visible_scopes: Sequence[str],
    query: str,
    limit: int,
    metadata: Mapping[str, Any] | None = None,
    also: Sequence[int] = (),
) -> tuple[list[VectorHit], dict[int, float]]:
    """:func:`search`'s hits, and the exact cosine of each record in ``also`` that is not one.

    ``also`` names records found another way (the full-text candidates):
    recall weighs every candidate by its meaning, not only the nearest few.
    One point lookup by primary key per record; a record without a vector
    is left out. Both empty when semantic recall is unavailable.
    """
    if not visible_scopes or limit <= 0 or not query.strip() or not _usable():
        return [], {}
    vector = embeddings.embed(query)
    if vector is None:
        return [], {}
    hits = _nearest(vector, visible_scopes, limit, metadata)
    found = {hit.pk for hit in hits}
    wanted = [pk for pk in dict.fromkeys(also) if pk not in found]
    return hits, _similarities(vector, wanted)


def _similarities(vector: bytes, pks: Sequence[int]) -> dict[int, float]:
    """Exact cosine similarity of ``pks``' stored vectors with ``vector`` (one statement)."""
    if not pks:
        return {}
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # One point lookup per record, in one statement: vec0 answers
            # "record_pk = ?" from its rowid index but "IN (...)" by scanning
            # every vector of the table (105 ms against 0.7 ms for 50 records
            # at 100k vectors).
            branch = (
                f"SELECT record_pk, vec_distance_cosine(embedding, %s) FROM {TABLE} "  # noqa: S608  (placeholders only)
                "WHERE record_pk = %s"
            )
            cursor.execute(
                " UNION ALL ".join([branch] * len(pks)),
                [value for pk in pks for value in (vector, pk)],
            )
        else:
            cursor.execute(
                f"SELECT record_pk, embedding <=> %s::vector FROM {TABLE} "  # noqa: S608  (constant table)
                "WHERE record_pk = ANY(%s)",
                [_pg_literal(vector), list(pks)],
            )
        return {int(pk): 1.0 - float(distance) for pk, distance in cursor.fetchall()}


def _nearest(
    vector: bytes,
    visible_scopes: Sequence[str],
    limit: int,
    metadata: Mapping[str, Any] | None,
) -> list[VectorHit]:
    k = min(limit, MAX_K)
    literal = _pg_literal(vector) if connection.vendor != "sqlite" else ""
    condition, condition_params = record_metadata.sql_condition("r", metadata or {})
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite" and metadata:
            _filtered_sqlite(cursor, vector, k, visible_scopes, (condition, condition_params))
            rows = cursor.fetchall()
        elif connection.vendor == "sqlite":
            rows = _knn_sqlite(cursor, vector, k, visible_scopes)
        else:
            # The inner query orders by distance alone, so the planner walks
            # the HNSW index (any other ORDER BY, or a join before the LIMIT,
            # turns it into a scan and sort of the whole scope: 0.5 ms against
            # 340 ms at 100k records). The scope and status filter is inside
            # that scan; with the iterative scan, when the filter rejects rows
            # HNSW keeps walking instead of returning fewer than k (no
            # starvation). SET LOCAL needs a transaction, hence the atomic.
            # The walk still stops after hnsw.max_scan_tuples rows (dead
            # index entries of deleted vectors count too), so a walk that
            # hands back fewer than k is not trusted: the same query runs
            # exactly. That costs little when it happens, since few rows
            # pass the filter then (a small scope, a selective filter).
            with transaction.atomic():
                cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                for exact in (False, True):
                    if metadata:
                        _filtered_postgresql(
                            cursor, literal, k, visible_scopes, (condition, condition_params), exact
                        )
                    else:
                        cursor.execute(
                            PG_EXACT_KNN_SQL if exact else PG_KNN_SQL,
                            [literal, list(visible_scopes), literal, k, list(visible_scopes)],
                        )
                    rows = cursor.fetchall()
                    if len(rows) >= k:
                        break
    # Cosine distance is 1 - similarity on both engines.
    return [
        VectorHit(int(pk), record_id, 1.0 - float(distance)) for pk, record_id, distance in rows
    ]


def _coarse_knn(
    branches: Sequence[vector_cells.Branch], vector: bytes, k: int, bound: float | None
) -> tuple[str, list[Any]]:
    """One vec0 KNN per branch, as one UNION ALL: (record_pk, distance) rows, k per partition.

    ``bound`` keeps only vectors at most that coarse distance away: vec0
    drops the others before it picks a partition's best k, and stops picking
    when none is left, so a partition with few vectors under the bound costs
    few passes.
    """
    parts: list[str] = []
    params: list[Any] = []
    for branch in branches:
        parts.append(
            f"SELECT record_pk, distance FROM {TABLE} "  # noqa: S608  (placeholders only)
            "WHERE coarse MATCH vec_quantize_binary(%s) AND k = %s "
            f"AND scope IN ({', '.join(['%s'] * len(branch.scopes))}) "
            f"AND cell IN ({', '.join(['%s'] * len(branch.cells))}) AND status = 'active'"
            + (" AND distance <= %s" if bound is not None else "")
        )
        params += [vector, k, *branch.scopes, *branch.cells]
        if bound is not None:
            params.append(bound)
    return " UNION ALL ".join(parts), params


def _window(
    cursor: Any,
    branches: Sequence[vector_cells.Branch],
    vector: bytes,
    size: int,
    bound: float | None,
    found: list[tuple[int, float]],
) -> list[tuple[int, float]]:
    """The best ``size`` (record_pk, coarse distance) of ``found`` and these branches' KNN."""
    sql, params = _coarse_knn(branches, vector, size, bound)
    cursor.execute(
        f"WITH knn AS MATERIALIZED ({sql}) "  # noqa: S608  (placeholders only)
        "SELECT record_pk, distance FROM knn ORDER BY distance, record_pk DESC LIMIT %s",
        [*params, size],
    )
    rows = found + [(int(pk), float(distance)) for pk, distance in cursor.fetchall()]
    return sorted(rows, key=lambda row: (row[1], -row[0]))[:size]


def _knn_sqlite(
    cursor: Any, vector: bytes, k: int, visible_scopes: Sequence[str]
) -> list[tuple[Any, ...]]:
    """The KNN on SQLite: a coarse scan of the visible partitions, re-ranked by exact cosine.

    The coarse KNN (Hamming distance on the sign bits) runs over the visible
    scopes' partitions and active rows only; the best ``k * COARSE_FACTOR``
    candidates (the coarse window) are re-ranked by exact cosine distance on
    their float vectors, and the join re-checks status and scope on the
    record row. Big scopes are split into cells: only cell 0 and the cells
    nearest the query are read (memory/vector_cells.py), one KNN per branch
    of partitions, and vec0 answers up to the window's size per partition.

    vec0 picks a partition's best k in k passes over each chunk, so asking
    every probed cell for the whole window cost k times the vectors read.
    The near branches (cell 0 and the cells nearest the query) are therefore
    read first; once they fill the window, its worst distance bounds the far
    cells: a far vector further than that could not enter the window, so
    the far KNN drops it before picking. The candidates are exactly those of
    reading every probed cell for the whole window, for less than half the
    cost at a million vectors (docs/memory-engine-notes.md).
    """
    coarse_k = min(MAX_K, k * COARSE_FACTOR)
    branches = vector_cells.plan(cursor, visible_scopes, vector)
    near = [branch for branch in branches if branch.near]
    far = [branch for branch in branches if not branch.near]
    if far:  # a split scope: its near branch holds cell 0, so ``near`` is not empty
        found = _window(cursor, near, vector, coarse_k, None, [])
        bound = found[-1][1] if len(found) == coarse_k else None
        found = _window(cursor, far, vector, coarse_k, bound, found)
        if not found:
            return []
        knn = "VALUES " + ", ".join(["(%s, %s)"] * len(found))
        knn_params: list[Any] = [value for row in found for value in row]
    else:
        knn, knn_params = _coarse_knn(near, vector, coarse_k, None)
    scope_marks = ", ".join(["%s"] * len(visible_scopes))
    cursor.execute(
        f"WITH knn(record_pk, distance) AS MATERIALIZED ({knn}), "  # noqa: S608  (placeholders only)
        "best AS MATERIALIZED (SELECT record_pk FROM knn "
        "ORDER BY distance, record_pk DESC LIMIT %s) "
        "SELECT best.record_pk, r.record_id, "
        "vec_distance_cosine(v.embedding, %s) AS distance "
        f"FROM best JOIN {TABLE} v ON v.record_pk = best.record_pk "
        "JOIN memory_record r ON r.id = best.record_pk "
        f"WHERE r.status = 'active' AND r.scope IN ({scope_marks}) "
        "ORDER BY distance, best.record_pk DESC LIMIT %s",
        [*knn_params, coarse_k, vector, *visible_scopes, k],
    )
    return list(cursor.fetchall())


def _filtered_sqlite(
    cursor: Any,
    vector: bytes,
    k: int,
    visible_scopes: Sequence[str],
    wanted: tuple[str, list[Any]],
) -> None:
    """The KNN restricted to records holding the metadata filter (SQLite).

    vec0's KNN filters on its own partition and metadata columns only, and
    caller metadata is open-ended, so it cannot live there; asking the KNN for
    more rows and filtering after would starve top-k whenever the filter is
    selective. So the candidate set is restricted in SQL first: the side
    table's (key, value) index names the matching records, the scope and
    status are checked on their rows, and each survivor's vector is read by
    primary key and measured exactly (vec_distance_cosine). The cost follows
    how many visible active records match the filter, and the answer is the
    exact top-k among them.
    """
    condition, condition_params = wanted
    scope_marks = ", ".join(["%s"] * len(visible_scopes))
    cursor.execute(
        "SELECT r.id, r.record_id, vec_distance_cosine(v.embedding, %s) AS distance "  # noqa: S608  (placeholders only)
        f"FROM memory_record r JOIN {TABLE} v ON v.record_pk = r.id "
        f"WHERE r.status = 'active' AND r.scope IN ({scope_marks}) AND {condition} "
        "ORDER BY distance, r.id DESC LIMIT %s",
        [vector, *visible_scopes, *condition_params, k],
    )


def _filtered_postgresql(
    cursor: Any,
    literal: str,
    k: int,
    visible_scopes: Sequence[str],
    wanted: tuple[str, list[Any]],
    exact: bool = False,
) -> None:
    """The KNN restricted to records holding the metadata filter (PostgreSQL).

    The filter is on the record row (``metadata @> ...``, answered by its GIN
    index), so unlike :data:`PG_KNN_SQL` the record is joined inside the
    ``LIMIT k`` query: joining after it would filter the k nearest of the
    whole scope, handing back fewer than k (or none) whenever the filter is
    selective. The inner ORDER BY is the distance alone so the planner may
    still walk HNSW (with the caller's iterative scan) when the filter
    matches most of the scope, or read the GIN matches and sort them when it
    matches few; the outer query breaks distance ties by newest record.
    Runs inside the caller's transaction (the SET LOCAL). ``exact`` orders by
    an expression the index cannot serve (:data:`_EXACT_ORDER`).
    """
    condition, condition_params = wanted
    scopes = list(visible_scopes)
    cursor.execute(
        CUSTOM_PLAN + "SELECT knn.record_pk, knn.record_id, knn.distance FROM ("  # noqa: S608  (placeholders only)
        "SELECT v.record_pk, r.record_id, v.embedding <=> %s::vector AS distance "
        f"FROM {TABLE} v JOIN memory_record r ON r.id = v.record_pk "
        "WHERE v.scope = ANY(%s) AND v.status = 'active' "
        f"AND r.status = 'active' AND r.scope = ANY(%s) AND {condition} "
        f"ORDER BY (v.embedding <=> %s::vector){_EXACT_ORDER if exact else ''} LIMIT %s) knn "
        "ORDER BY knn.distance, knn.record_pk DESC",
        [literal, scopes, scopes, *condition_params, literal, k],
    )


# -- backfill -------------------------------------------------------------------


def missing_count(scope: str | None = None) -> int:
    """Active records (optionally at exactly ``scope``) that have no vector yet."""
    sql, params = _missing_sql(scope)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({sql}) m", params)  # noqa: S608  (built from constants)
        return int(cursor.fetchone()[0])


def _missing_sql(
    scope: str | None, after: int = 0, limit: int | None = None
) -> tuple[str, list[Any]]:
    sql = (
        "SELECT r.id, r.record_id, r.scope, r.content FROM memory_record r "  # noqa: S608  (constant table)
        f"WHERE r.status = 'active' AND r.id > %s AND NOT EXISTS "
        f"(SELECT 1 FROM {TABLE} v WHERE v.record_pk = r.id)"
    )
    params: list[Any] = [after]
    if scope is not None:
        sql += " AND r.scope = %s"
        params.append(scope)
    if limit is not None:
        sql += " ORDER BY r.id LIMIT %s"
        params.append(limit)
    return sql, params


def reindex(
    *, scope: str | None = None, batch: int = 200, progress: Callable[[int], None] | None = None
) -> int:
    """Give every active record without a vector one, ``batch`` records per transaction.

    Resumable: it only ever looks at records that still lack a vector, so an
    interrupted run picks up where it stopped. Returns how many it indexed.
    """
    reason = status()
    if not reason.available:
        raise RuntimeError(f"semantic index unavailable: {reason.detail}")
    done = 0
    after = 0
    while True:
        sql, params = _missing_sql(scope, after, batch)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not rows:
            return done
        # The batch is embedded before the write transaction (no lock held for
        # the model's ~1 s per 200 records) and read again inside it, so a
        # record forgotten or superseded meanwhile gets no vector.
        with prepared([content for _, _, _, content in rows]), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                current = cursor.fetchall()
            index_records([(int(pk), rid, sc, content) for pk, rid, sc, content in current])
        after = int(rows[-1][0])
        done += len(current)
        if progress is not None:
            progress(len(rows))
