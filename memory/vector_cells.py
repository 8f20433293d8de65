"""SQLite: the vector index of a big scope is split into cells, and a search reads only the nearest.

sqlite-vec 0.1 has no sub-linear index: its KNN reads every vector of the
partitions a query names, about 50 ns each, so a scope of a million records
costs about 100 ms per recall. The vec0 table therefore has a second
partition key, ``cell`` (an inverted file, as in IVF indexes): once a scope
holds :data:`TRAIN_AT` vectors, its vectors are clustered (spherical k-means
on a sample) into about one cell per :data:`VECTORS_PER_CELL` vectors, each
vector is filed under its nearest centroid, and a search reads the cells whose
centroids are nearest the query (:func:`plan`): :data:`PROBE_FACTOR` times
the square root of their number, never fewer than :data:`MIN_PROBE`. Everything else is as before: the scope
partition and ``status`` are still inside the KNN query, the KNN still scans
the 1-bit vectors, and the best of them are still re-ranked by exact cosine.

Cell 0 holds every vector of a scope that has no centroids yet (all small
scopes) and the vectors of a scope that is being filed; every search reads
cell 0, so a vector is found whichever cell it is in. Centroids belong to a
generation: training again (when a scope has grown :data:`RETRAIN_GROWTH`
times since) writes a new generation, refiles every vector into it in short
transactions, and only then drops the old one; until then searches probe
both. The work runs in the semantic reindex (``manage.py memory reindex``,
the Maintenance page, or a job queued by itself when a scope crosses a
threshold: :func:`schedule_if_due`).

A centroid is the mean of at least :data:`MIN_MEMBERS` records' vectors of
the training sample (smaller clusters are dropped and their members filed
under the next nearest), so no centroid is one record's vector; forgetting a
record removes its own vector as before, and the next training recomputes the
means without it. PostgreSQL does not use any of this: HNSW is sub-linear.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

logger = logging.getLogger(__name__)

CELLS_TABLE = "memory_record_vec_cells"
# A scope is split once it holds this many vectors; smaller scopes stay in cell 0.
TRAIN_AT = 20_000
# Train again when a scope has grown this many times since its last training.
RETRAIN_GROWTH = 4
VECTORS_PER_CELL = 1_000
MIN_CELLS, MAX_CELLS = 16, 1_024
# A search reads the nearest PROBE_FACTOR * sqrt(cells) of a scope's cells,
# at least MIN_PROBE: a sixth of 100 cells (a scope of 100k), a twentieth of
# 1,000 (a million). bench/memory_scale.py --dense prints how many of the top
# five hits this finds against reading every cell.
PROBE_FACTOR = 1.6
MIN_PROBE = 8
# Of the cells probed in a split scope, the NEAR_SHARE nearest (at least one)
# are read first, with cell 0; the others, further from the query, only for
# vectors no further than the worst of the window the near ones filled
# (memory.vectors._knn_sqlite). vec0 picks a partition's k best by k passes
# over each chunk, so reading every cell for the whole window cost k times
# the vectors read (at a million, 42 cells: 5.3 ms at k = 1, 15.8 at 36).
NEAR_SHARE = 0.1
# Training vectors: SAMPLE_PER_CELL per wanted cell (so a cell is not dropped
# for want of sample members), from SAMPLE up to MAX_SAMPLE.
SAMPLE = 25_000
SAMPLE_PER_CELL = 50
MAX_SAMPLE = 60_000
ITERATIONS = 8
MIN_MEMBERS = 20
# Cell numbers: generation g uses g * CELL_SPAN + 1 ... g * CELL_SPAN + MAX_CELLS.
CELL_SPAN = 100_000
REFILE_BATCH = 2_000


@dataclass(frozen=True)
class Training:
    """What one training of a scope did."""

    scope: str
    generation: int
    cells: int
    vectors: int
    refiled: int


def create_table(cursor: Any) -> None:
    # ``token`` is random per training: a process caches a generation's
    # centroids under it, so a cache can never outlive what it copied.
    cursor.execute(
        f"CREATE TABLE IF NOT EXISTS {CELLS_TABLE} ("
        "scope TEXT NOT NULL, cell INTEGER NOT NULL, generation INTEGER NOT NULL, "
        "token TEXT NOT NULL, trained_size INTEGER NOT NULL, centroid BLOB NOT NULL, "
        "PRIMARY KEY (scope, cell)) WITHOUT ROWID"
    )
    cursor.execute(
        f"CREATE INDEX IF NOT EXISTS {CELLS_TABLE}_generation "
        f"ON {CELLS_TABLE} (scope, generation, token)"
    )


def _active() -> bool:
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = %s", [CELLS_TABLE])
        return cursor.fetchone() is not None


def probe_count(cells: int) -> int:
    return min(cells, max(MIN_PROBE, math.ceil(PROBE_FACTOR * math.sqrt(cells))))


# -- asking ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Generation:
    """One generation of a scope's centroids, as read once per process."""

    scope: str
    generation: int
    cells: Any  # int64 array, ascending
    matrix: Any  # float32, one unit centroid per row, in ``cells`` order


_cache_lock = threading.Lock()
_cache: OrderedDict[str, _Generation] = OrderedDict()
CACHED_GENERATIONS = 32


def _generations(cursor: Any, scopes: Sequence[str]) -> list[_Generation]:
    """The centroid generations of ``scopes``, oldest first per scope (read from the cache).

    One small index-only query per call; a generation's centroids are read
    from the table only the first time this process meets its token (they
    never change once written: a new training writes a new generation).
    """
    import numpy as np

    marks = ", ".join(["%s"] * len(scopes))
    cursor.execute(
        f"SELECT scope, generation, token, COUNT(*) FROM {CELLS_TABLE} "  # noqa: S608  (placeholders only)
        f"WHERE scope IN ({marks}) GROUP BY scope, generation, token ORDER BY scope, generation",
        list(scopes),
    )
    found = []
    for scope, generation, token, count in cursor.fetchall():
        with _cache_lock:
            cached = _cache.get(str(token))
            if cached is not None:
                _cache.move_to_end(str(token))
        if cached is None or len(cached.cells) != int(count):
            cursor.execute(
                f"SELECT cell, centroid FROM {CELLS_TABLE} "  # noqa: S608  (constant table)
                "WHERE scope = %s AND generation = %s ORDER BY cell",
                [scope, generation],
            )
            rows = cursor.fetchall()
            cached = _Generation(
                str(scope),
                int(generation),
                np.array([int(r[0]) for r in rows], dtype=np.int64),
                np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype="<f4").reshape(
                    len(rows), -1
                ),
            )
            if len(rows) == int(count):  # a complete generation (its training committed)
                with _cache_lock:
                    _cache[str(token)] = cached
                    while len(_cache) > CACHED_GENERATIONS:
                        _cache.popitem(last=False)
        found.append(cached)
    return found


def forget_cached() -> None:
    """Drop this process's centroid cache and write counts (tests: rows rolled back)."""
    with _cache_lock:
        _cache.clear()
    _writes.clear()


def _similarities(generation: _Generation, vector: bytes) -> Any:
    import numpy as np

    # Unit vectors: the dot product orders as the cosine distance does.
    return generation.matrix @ np.frombuffer(vector, dtype="<f4")


@dataclass(frozen=True)
class Branch:
    """One KNN of a search: these scopes' partitions in these cells, near the query or further."""

    scopes: list[str]
    cells: list[int]
    near: bool


def plan(cursor: Any, visible_scopes: Sequence[str], vector: bytes) -> list[Branch]:
    """Which (scopes, cells) partitions a search of ``visible_scopes`` reads, as KNN branches.

    A scope without centroids is read in cell 0 (one near branch for all of
    them); a split scope in cell 0 and, per generation, its
    :func:`probe_count` cells nearest ``vector`` (ties: the lower cell): cell
    0 and the :data:`NEAR_SHARE` nearest of those in a near branch, the rest
    in a far one. Grouping keeps vec0 from visiting every (scope, cell) pair
    of the cross product of the two lists.
    """
    import numpy as np

    near: dict[str, list[int]] = {}
    far: dict[str, list[int]] = {}
    for generation in _generations(cursor, visible_scopes):
        nearest = np.argsort(-_similarities(generation, vector), kind="stable")
        probed = probe_count(len(generation.cells))
        chosen = [int(cell) for cell in generation.cells[nearest[:probed]]]
        split = max(1, math.ceil(NEAR_SHARE * probed))
        near.setdefault(generation.scope, [0]).extend(chosen[:split])
        far.setdefault(generation.scope, []).extend(chosen[split:])
    whole = [scope for scope in visible_scopes if scope not in near]
    branches = [Branch(whole, [0], near=True)] if whole else []
    for scope, cells in near.items():
        branches.append(Branch([scope], cells, near=True))
        if far[scope]:
            branches.append(Branch([scope], far[scope], near=False))
    return branches


def cells_for(cursor: Any, rows: Sequence[tuple[str, bytes]]) -> list[int]:
    """The cell each new ``(scope, vector)`` is filed in: nearest of its scope's newest generation, or 0.

    The generations are asked for once per scope of the batch, not once per vector.
    """
    import numpy as np

    newest: dict[str, _Generation | None] = {}
    for scope in dict.fromkeys(scope for scope, _ in rows):
        generations = _generations(cursor, [scope])
        newest[scope] = generations[-1] if generations else None
    cells = []
    for scope, vector in rows:
        generation = newest[scope]
        cells.append(
            0
            if generation is None
            else int(generation.cells[int(np.argmax(_similarities(generation, vector)))])
        )
    return cells


# -- when to train ----------------------------------------------------------------

# Writes per scope seen by this process; every CHECK_EVERY-th one (and the
# first) looks whether the scope is due, after its transaction commits.
CHECK_EVERY = 256
_writes: dict[str, int] = {}


def note_write(scope: str) -> bool:
    """Count a vector written into ``scope``; True when this write should check :func:`due`."""
    count = _writes.get(scope, 0)
    _writes[scope] = count + 1
    if len(_writes) > 10_000:  # bounded: a process serving many scopes forgets old counts
        _writes.clear()
    return count % CHECK_EVERY == 0


# -- training -------------------------------------------------------------------


def _scope_size(cursor: Any, scope: str) -> int:
    """Active records stored at exactly ``scope`` (the services' counter: no count of rows)."""
    cursor.execute("SELECT active FROM memory_scopestats WHERE scope = %s", [scope])
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def _trained_size(cursor: Any, scope: str) -> int | None:
    cursor.execute(
        f"SELECT MAX(trained_size) FROM {CELLS_TABLE} WHERE scope = %s "  # noqa: S608  (constant table)
        f"AND generation = (SELECT MAX(generation) FROM {CELLS_TABLE} WHERE scope = %s)",
        [scope, scope],
    )
    row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None


def due(scope: str) -> bool:
    """Whether ``scope`` should be (re)trained now."""
    if not _active():
        return False
    with connection.cursor() as cursor:
        size = _scope_size(cursor, scope)
        trained = _trained_size(cursor, scope)
    if trained is None:
        return size >= TRAIN_AT
    return size >= trained * RETRAIN_GROWTH


def is_split(scope: str) -> bool:
    """Whether ``scope`` has centroids (SQLite)."""
    if not _active():
        return False
    with connection.cursor() as cursor:
        return _trained_size(cursor, scope) is not None


def scopes_due(scope: str | None = None) -> list[str]:
    """Scopes (``scope`` alone, or every scope) that are due for a training."""
    if not _active():
        return []
    if scope is not None:
        return [scope] if due(scope) else []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT scope FROM memory_scopestats WHERE active >= %s ORDER BY scope", [TRAIN_AT]
        )
        big = [str(row[0]) for row in cursor.fetchall()]
    return [name for name in big if due(name)]


def _seed(scope: str) -> int:
    """The scope's fixed random seed (its sample and initial centroids are reproducible)."""
    return int.from_bytes(hashlib.sha256(scope.encode()).digest()[:8], "big")


def _sample(cursor: Any, scope: str, table: str, cells: int) -> Any:
    import numpy as np

    cursor.execute("SELECT id FROM memory_record WHERE scope = %s AND status = 'active'", [scope])
    pks = [int(row[0]) for row in cursor.fetchall()]
    seed = _seed(scope)
    wanted = min(MAX_SAMPLE, max(SAMPLE, SAMPLE_PER_CELL * cells))
    chosen = random.Random(seed).sample(pks, min(wanted, len(pks)))
    rows = [row for row in _vector_rows(cursor, table, chosen) if row is not None]
    return np.frombuffer(b"".join(bytes(r[3]) for r in rows), dtype="<f4").reshape(len(rows), -1)


def _vector_rows(cursor: Any, table: str, pks: Sequence[int]) -> list[tuple[Any, ...] | None]:
    """``(record_pk, cell, status, embedding)`` of each pk (None if it has no vector).

    One rowid lookup per pk: vec0 answers ``record_pk IN (...)`` by reading
    the whole table, which at a million vectors costs half a second a batch.
    """
    found = []
    for pk in pks:
        cursor.execute(
            f"SELECT record_pk, cell, status, embedding FROM {table} WHERE record_pk = %s",  # noqa: S608  (constant table)
            [pk],
        )
        found.append(cursor.fetchone())
    return found


def _means(data: Any, nearest: Any) -> Any:
    """Unit centroids of the clusters of at least MIN_MEMBERS vectors (``nearest``: each row's cluster)."""
    import numpy as np

    order = np.argsort(nearest, kind="stable")
    labels = nearest[order]
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    sizes = np.diff(np.r_[starts, len(labels)])
    sums = np.add.reduceat(data[order], starts, axis=0)
    kept = sizes >= MIN_MEMBERS
    if not kept.any():
        kept = sizes == sizes.max()
    sums = sums[kept]
    return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)


def kmeans(vectors: Any, cells: int, seed: int) -> Any:
    """Spherical k-means: unit centroids, each the normalised mean of at least MIN_MEMBERS vectors.

    Clusters that end up smaller are dropped (their vectors go to the next
    nearest centroid), so a centroid never stands for a handful of records.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    data = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    data = data.astype(np.float32)
    centroids = data[rng.choice(len(data), size=min(cells, len(data)), replace=False)]
    for _ in range(ITERATIONS):
        centroids = _means(data, np.argmax(data @ centroids.T, axis=1))
    # One last assignment, so every stored centroid is the mean of its final members.
    return _means(data, np.argmax(data @ centroids.T, axis=1)).astype("<f4")


def train(
    scope: str, *, table: str, progress: Callable[[int], None] | None = None
) -> Training | None:
    """Cluster ``scope``'s vectors into a new generation of cells and refile every vector.

    Returns None when the scope has too few vectors to train.
    """

    with connection.cursor() as cursor:
        size = _scope_size(cursor, scope)
        wanted = min(MAX_CELLS, max(MIN_CELLS, size // VECTORS_PER_CELL))
        sample = _sample(cursor, scope, table, wanted)
    if len(sample) < max(TRAIN_AT // 2, MIN_MEMBERS * MIN_CELLS):
        return None
    seed = _seed(scope)
    centroids = kmeans(sample, wanted, seed)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COALESCE(MAX(generation), 0) FROM {CELLS_TABLE} WHERE scope = %s",  # noqa: S608  (constant table)
            [scope],
        )
        generation = int(cursor.fetchone()[0]) + 1
        first = generation * CELL_SPAN + 1
        token = secrets.token_hex(16)
        cursor.executemany(
            f"INSERT INTO {CELLS_TABLE} (scope, cell, generation, token, trained_size, centroid) "  # noqa: S608  (constant table)
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (scope, first + index, generation, token, size, centroid.tobytes())
                for index, centroid in enumerate(centroids)
            ],
        )
    refiled = _refile(scope, table, generation, centroids, progress)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {CELLS_TABLE} WHERE scope = %s AND generation < %s",  # noqa: S608  (constant table)
            [scope, generation],
        )
    logger.info(
        "vector cells: %s trained, %d cells, %d vectors refiled", scope, len(centroids), refiled
    )
    return Training(scope, generation, len(centroids), len(sample), refiled)


def _refile(
    scope: str,
    table: str,
    generation: int,
    centroids: Any,
    progress: Callable[[int], None] | None,
) -> int:
    """Move every vector of ``scope`` not yet in ``generation`` to its nearest cell, in batches."""
    import numpy as np

    first = generation * CELL_SPAN + 1
    last = first + len(centroids) - 1
    after, refiled = 0, 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM memory_record WHERE scope = %s AND status = 'active' AND id > %s "
                "ORDER BY id LIMIT %s",
                [scope, after, REFILE_BATCH],
            )
            pks = [int(row[0]) for row in cursor.fetchall()]
        if not pks:
            return refiled
        after = pks[-1]
        # Read and rewritten in one transaction: a vector removed meanwhile
        # (forget, supersede) is not read, so it cannot come back.
        with transaction.atomic(), connection.cursor() as cursor:
            rows = [
                r
                for r in _vector_rows(cursor, table, pks)
                if r is not None and not first <= int(r[1]) <= last
            ]
            if rows:
                data = np.frombuffer(b"".join(bytes(r[3]) for r in rows), dtype="<f4")
                nearest = np.argmax(data.reshape(len(rows), -1) @ centroids.T, axis=1)
                cursor.executemany(
                    f"DELETE FROM {table} WHERE record_pk = %s",  # noqa: S608  (constant table)
                    [(int(r[0]),) for r in rows],
                )
                cursor.executemany(
                    f"INSERT INTO {table}(record_pk, scope, cell, status, coarse, embedding) "  # noqa: S608  (constant table)
                    "VALUES (%s, %s, %s, %s, vec_quantize_binary(%s), %s)",
                    [
                        (int(r[0]), scope, first + int(cell), r[2], bytes(r[3]), bytes(r[3]))
                        for r, cell in zip(rows, nearest, strict=True)
                    ],
                )
                refiled += len(rows)
        if progress is not None:
            progress(len(pks))
