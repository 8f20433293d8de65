"""Memory engine scale benchmark: remember and recall latency as the store grows (SQLite).

Usage::

    .venv/bin/python bench/memory_scale.py [--sizes 10000,100000,1000000] [--samples 300]

Seeds a temporary SQLite file (deleted afterwards) to each size in turn,
spread over 10,000 scopes, and times ``memory.services.remember`` and
``memory.services.recall`` at one hot user's project, printing wall-clock p50
and p95 and the CPU-time p50 per size (on a shared machine, load inflates wall
time but not CPU time; the load average is printed with each row).
``--dense`` runs the dense-scope case instead: one agent scope holding N
records of one template ("Remember that project {i} uses codename falcon{i}
and budget {i*7}."), where every record matches the common query words, on
SQLite or (with ``--postgres URL``, a server URL whose role may create
databases) on a fresh PostgreSQL database dropped afterwards. Seeded records
get real full-text rows and real embeddings: 1,000 distinct template texts are
embedded and their vectors reused cyclically (a KNN scan costs the same
whatever the vectors hold); every timed remember and recall embeds for real.
``--distinct N`` embeds N distinct texts instead (``--distinct 100000 --sizes
100000``: every vector its own, about 3 ms each to embed); then, once the
scope is split into cells, it also prints the search's recall@5 against an
exact search of every vector, the figure to read when tuning the cells.
It also prints the embedding cost per text on its own, and the recall p50 of
questions about a project no record holds (only the template's common words
match, so recall ranks the window of the newest matches). The issue's runs::

    .venv/bin/python bench/memory_scale.py --dense --sizes 10000,100000,1000000
    .venv/bin/python bench/memory_scale.py --dense --sizes 100000 \
        --postgres postgres://aetnaweb:aetnaweb@127.0.0.1:5432/aetnaweb

Seeding is raw SQL in batches of 20,000 (about 10 minutes for 1M on a
shared 2-core machine; PostgreSQL copies the vectors with COPY and builds
the HNSW index once at the end).

``--hot-visible N`` holds the hot user's visible records at N for every size
instead, to show that the cost follows what a scope can see, not the store. The hot user's visible scopes (its project, the user, the tenant
and the platform) hold a tenth of the store: 100,000 records at 1,000,000.

Seeding is bulk: raw ``executemany`` of records, their full-text index rows
and the per-scope counters inside transactions. Seeded rows get no episode
and no audit events (the audit chains are not part of what recall reads);
every *timed* call runs the real service, with its episode, supersession
check, index update, retrieval log and audit events, in its own transaction.

Content is made of synthetic words (two or three syllables, ~65,000 of them)
drawn with a skew towards the front of the vocabulary: the commonest word is
in about 3% of records, a typical one in far fewer. Queries are drawn the same
way, so some hit many records and most hit a few.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from audit_common import drop_database

ROOT = Path(__file__).resolve().parents[1]
SCOPE_COUNT = 10_000
HOT_SHARE = 0.10
HOT_SPLIT = (
    ("bench:hot:p0", 0.70),
    ("bench:hot:*", 0.20),
    ("bench:*:*", 0.08),
    ("platform:*:*", 0.02),
)
BATCH = 20_000

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"][:40]


def vocabulary() -> list[str]:
    rng = random.Random(7)
    words = [a + b for a in SYLLABLES for b in SYLLABLES]
    words += [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]
    rng.shuffle(words)
    return words


def scope_list() -> list[str]:
    """10,000 scopes: the platform, tenants, users and projects, the hot user among them."""
    scopes = ["platform:*:*", "bench:*:*", "bench:hot:*"] + [f"bench:hot:p{n}" for n in range(10)]
    tenant = 0
    while len(scopes) < SCOPE_COUNT:
        name = f"t{tenant:03d}"
        scopes.append(f"{name}:*:*")
        for user in range(10):
            scopes.append(f"{name}:u{user}:*")
            scopes.extend(f"{name}:u{user}:p{project}" for project in range(17))
        tenant += 1
    return scopes[:SCOPE_COUNT]


class Corpus:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary()

    def word(self) -> str:
        return self.words[int(len(self.words) * self.rng.random() ** 2)]

    def fact(self) -> tuple[str, str]:
        key = f"{self.word()} {self.word()}"
        value = " ".join(self.word() for _ in range(self.rng.randint(2, 5)))
        return key, f"User's {key} is {value}."


def use_fresh_postgres(server_url: str):
    """Create a throwaway database on the server; returns the function that drops it."""
    import psycopg

    name = f"aetnaweb_bench_{os.getpid()}"
    base = server_url.rsplit("/", 1)[0]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["BENCH_DATABASE_URL"] = f"{base}/{name}"

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        drop_database(server_url, name)

    return drop


def setup_django(directory: Path, database_file: str = "bench.sqlite3") -> None:
    """Django on a throwaway database in ``directory`` (or BENCH_DATABASE_URL), migrated.

    Shared by the memory benchmarks (metadata_filter, recall_quality, dashboard).
    """
    os.environ["AETNAWEB_DATA_DIR"] = str(directory)
    # Never the caller's DATABASE_URL: a benchmark writes only to its own throwaway database.
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or (
        f"sqlite:///{directory / database_file}"
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    # A throwaway data directory gets its own development keys (settings refuse to start without).
    from aetnaweb import instance

    instance.ensure_development_files()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seed(count: int, *, hot_count: int, start_id: int, corpus: Corpus, scopes: list[str]) -> None:
    """Insert ``count`` active records (ids from ``start_id``) with index rows and counters."""
    from django.db import connection, transaction

    from aetnaweb.scopes import Scope
    from memory.extraction import content_digest
    from memory.search import scoped_terms

    hot_scopes = [name for name, _ in HOT_SPLIT]
    hot_weights = [share for _, share in HOT_SPLIT]
    cold = [s for s in scopes if s not in hot_scopes]
    stamp = datetime.now(UTC).isoformat()
    added: dict[str, int] = {}
    next_id = start_id
    remaining = count
    remaining_total = count
    while remaining:
        size = min(BATCH, remaining)
        records, index_rows = [], []
        for _ in range(size):
            if corpus.rng.random() < hot_count / remaining_total:
                hot_count -= 1
                scope = corpus.rng.choices(hot_scopes, hot_weights)[0]
            else:
                scope = cold[corpus.rng.randrange(len(cold))]
            parsed = Scope.parse(scope)
            key, content = corpus.fact()
            record_id = "mem_" + uuid.UUID(int=corpus.rng.getrandbits(128)).hex
            records.append(
                (
                    next_id, scope, parsed.tenant, parsed.user, parsed.project, record_id,
                    "", "", "user_message", "trusted_user", 0.9, "active", key, "", content,
                    content_digest(content), "[]", stamp, stamp,
                )
            )  # fmt: skip
            index_rows.append((next_id, scoped_terms(scope, content), record_id))
            added[scope] = added.get(scope, 0) + 1
            next_id += 1
            remaining_total -= 1
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_record (id, scope, tenant, user, project, record_id, "
                "session_id, turn_id, source_type, trust_tier, confidence, status, fact_key, kind, "
                "content, content_digest, evidence, created_at, updated_at, metadata) "
                "VALUES (" + ", ".join(["%s"] * 19) + ", '{}')",
                records,
            )
            cursor.executemany(
                "INSERT INTO memory_record_fts(rowid, terms, record_id) VALUES (%s, %s, %s)",
                index_rows,
            )
        remaining -= size
    with transaction.atomic(), connection.cursor() as cursor:
        for scope, n in added.items():
            parsed = Scope.parse(scope)
            cursor.execute(
                "UPDATE memory_scopestats SET active = active + %s WHERE scope = %s", [n, scope]
            )
            if cursor.rowcount == 0:
                cursor.execute(
                    "INSERT INTO memory_scopestats (scope, tenant, user, project, depth, active, "
                    "quarantined, superseded, tombstoned, episodes, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, 0, 0, 0, 0, %s)",
                    [scope, parsed.tenant, parsed.user, parsed.project, parsed.depth, n, stamp],
                )
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO memory_record_fts(memory_record_fts) VALUES('optimize')")
        # No ANALYZE: nothing gathers statistics on a production SQLite
        # database, so the bench plans as production does (with them, two
        # statements that walked every active record without them went unseen).


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(samples: int, corpus: Corpus) -> dict[str, float]:
    """Wall-clock and CPU milliseconds per call (CPU time is what load on a shared box cannot inflate)."""
    from aetnaweb.access import SYSTEM
    from memory import services

    scope = "bench:hot:p0"
    wall: dict[str, list[float]] = {"remember": [], "recall": []}
    cpu: dict[str, list[float]] = {"remember": [], "recall": []}
    candidates = []

    def timed(kind: str, call, keep: bool):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = call()
        if keep:
            wall[kind].append((time.perf_counter() - started) * 1000)
            cpu[kind].append((time.process_time() - started_cpu) * 1000)
        return result

    for n in range(samples + 20):  # the first 20 warm caches and are not counted
        key, content = corpus.fact()
        text = f"My {key} is {content.split(' is ', 1)[1]}"
        query = f"what is my {corpus.word()} {corpus.word()}?"
        keep = n >= 20
        timed(
            "remember",
            lambda text=text: services.remember(principal=SYSTEM, scope=scope, text=text),
            keep,
        )
        result = timed(
            "recall",
            lambda query=query: services.recall(
                principal=SYSTEM, scope=scope, query=query, limit=5
            ),
            keep,
        )
        if keep:
            candidates.append(len(result.candidates))
    figures = {"candidates": statistics.mean(candidates)}
    for kind in ("remember", "recall"):
        figures[f"{kind}_p50"] = statistics.median(wall[kind])
        figures[f"{kind}_p95"] = percentile(wall[kind], 0.95)
        figures[f"{kind}_cpu_p50"] = statistics.median(cpu[kind])
    return figures


def hot_visible_records() -> int:
    from memory.models import ScopeStats

    return sum(
        ScopeStats.objects.filter(scope__in=[name for name, _ in HOT_SPLIT]).values_list(
            "active", flat=True
        )
    )


DENSE_SCOPE = "bench:dense:p0"
DENSE_TEMPLATE = "Remember that project {i} uses codename falcon{i} and budget {i7}."
DENSE_DISTINCT_VECTORS = 1000


def dense_text(i: int) -> str:
    return DENSE_TEMPLATE.format(i=i, i7=i * 7)


def seed_dense(start: int, stop: int) -> None:
    """Records ``start`` .. ``stop - 1`` of the template at DENSE_SCOPE, with both index rows.

    Bulk, in raw SQL (the ORM's per-field preparation would dominate at 1M):
    the records, their full-text rows (the engine's own ``scoped_terms`` /
    ``to_tsvector``) and their vectors, BATCH records per transaction. The
    vectors are real embeddings of the first DENSE_DISTINCT_VECTORS texts,
    reused cyclically: a scan costs the same whatever the vectors hold, and
    embedding a million texts would measure the encoder, not recall. On
    PostgreSQL the HNSW index is dropped while seeding and built again after
    (one build is far faster than a million inserts into the graph).
    """
    from django.db import connection, transaction
    from django.db.models import F
    from django.utils import timezone

    from aetnaweb.access import SYSTEM
    from aetnaweb.scopes import Scope
    from memory import embeddings, services, vectors
    from memory.extraction import content_digest
    from memory.models import Record, ScopeStats
    from memory.search import scoped_terms

    if start == 0:
        # The first record goes through the real service, so the stored wording is the engine's.
        services.remember(principal=SYSTEM, scope=DENSE_SCOPE, text=dense_text(0))
        start = 1
    if start >= stop:
        return
    sample = Record.objects.filter(scope=DENSE_SCOPE).order_by("id").first()
    assert sample is not None
    wording = sample.content.replace("0", "{i}", 1)
    parsed = Scope.parse(DENSE_SCOPE)
    columns = parsed.columns()
    sqlite = connection.vendor == "sqlite"
    cache: dict[int, tuple[bytes, str]] = {}
    now = timezone.now()
    next_pk = (Record.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
    hnsw = f"{vectors.TABLE}_hnsw"
    if not sqlite:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {hnsw}")
    for low in range(start, stop, BATCH):
        high = min(stop, low + BATCH)
        records, fts_rows, vec_rows = [], [], []
        for i in range(low, high):
            content = (
                wording.replace("{i}", str(i), 1)
                .replace("falcon0", f"falcon{i}")
                .replace("budget 0", f"budget {i * 7}")
            )
            record_id = "mem_" + uuid.uuid4().hex
            pk = next_pk
            next_pk += 1
            records.append(
                (
                    pk, DENSE_SCOPE, columns["tenant"], columns["user"], columns["project"],
                    record_id, "", "", "user_message", "trusted_user", 0.9, "active", "", "", content,
                    content_digest(content), "[]", now, now,
                )
            )  # fmt: skip
            fts_rows.append(
                (pk, scoped_terms(DENSE_SCOPE, content), record_id)
                if sqlite
                else (pk, record_id, DENSE_SCOPE, content)
            )
            slot = i % DENSE_DISTINCT_VECTORS
            if slot not in cache:
                vector = embeddings.embed(vectors.embedding_text(content))
                assert vector is not None
                cache[slot] = (vector, vectors._pg_literal(vector))
            vector, literal = cache[slot]
            vec_rows.append((pk, DENSE_SCOPE, vector, vector) if sqlite else (pk, literal))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(
                'INSERT INTO memory_record (id, scope, tenant, "user", project, record_id, '
                "session_id, turn_id, source_type, trust_tier, confidence, status, fact_key, "
                "kind, content, content_digest, evidence, created_at, updated_at, metadata) "
                "VALUES (" + ", ".join(["%s"] * 19) + ", '{}')",
                records,
            )
            if sqlite:
                cursor.executemany(
                    "INSERT INTO memory_record_fts(rowid, terms, record_id) VALUES (%s, %s, %s)",
                    fts_rows,
                )
                cursor.executemany(
                    f"INSERT INTO {vectors.TABLE}(record_pk, scope, cell, status, coarse, embedding) "
                    "VALUES (%s, %s, 0, 'active', vec_quantize_binary(%s), %s)",
                    vec_rows,
                )
            else:
                cursor.executemany(
                    "INSERT INTO memory_record_fts(record_pk, record_id, scope, document) "
                    "VALUES (%s, %s, %s, to_tsvector('english', %s))",
                    fts_rows,
                )
                # COPY, in text form: pgvector parses the '[...]' literal.
                with cursor.cursor.copy(
                    f"COPY {vectors.TABLE} (record_pk, scope, status, embedding) FROM STDIN"
                ) as copy:
                    for pk, literal in vec_rows:
                        copy.write_row((pk, DENSE_SCOPE, "active", literal))
            ScopeStats.objects.filter(scope=DENSE_SCOPE).update(active=F("active") + len(records))
    with connection.cursor() as cursor:
        if sqlite:
            cursor.execute("INSERT INTO memory_record_fts(memory_record_fts) VALUES('optimize')")
        else:
            # Explicit ids bypassed the sequence; the timed remembers draw from it.
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence('memory_record', 'id'), MAX(id)) "
                "FROM memory_record"
            )
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {hnsw} ON {vectors.TABLE} "
                "USING hnsw (embedding vector_cosine_ops)"
            )
            # What autovacuum would soon do after a bulk load. SQLite gets no
            # statistics, as in production (see seed()).
            cursor.execute("ANALYZE")


def measure_dense(samples: int, next_i: int, seeded: int) -> dict[str, float]:
    from aetnaweb.access import SYSTEM
    from memory import services

    rng = random.Random(5)
    wall: dict[str, list[float]] = {"remember": [], "recall": []}
    cpu: dict[str, list[float]] = {"remember": [], "recall": []}
    queries = [
        "what codename does project {j} use?",
        "what is the budget of project {j}?",
        "which project is called falcon{j}?",
        "how much money does project {j} have?",
    ]
    for n in range(samples + 10):
        keep = n >= 10
        started, started_cpu = time.perf_counter(), time.process_time()
        services.remember(principal=SYSTEM, scope=DENSE_SCOPE, text=dense_text(next_i + n))
        if keep:
            wall["remember"].append((time.perf_counter() - started) * 1000)
            cpu["remember"].append((time.process_time() - started_cpu) * 1000)
        query = queries[n % len(queries)].format(j=rng.randrange(seeded))
        started, started_cpu = time.perf_counter(), time.process_time()
        services.recall(principal=SYSTEM, scope=DENSE_SCOPE, query=query, limit=5)
        if keep:
            wall["recall"].append((time.perf_counter() - started) * 1000)
            cpu["recall"].append((time.process_time() - started_cpu) * 1000)
    # Questions about projects no record holds: the number is in no record,
    # so only the template's common words match, and recall ranks the
    # window of the newest matches (memory/search.py, COMMON_POSTINGS).
    absent: list[float] = []
    for n in range(30):
        query = queries[n % len(queries)].format(j=10**9 + n)
        started = time.perf_counter()
        services.recall(principal=SYSTEM, scope=DENSE_SCOPE, query=query, limit=5)
        if n >= 5:
            absent.append((time.perf_counter() - started) * 1000)
    figures = {"recall_absent_p50": statistics.median(absent)}
    for kind in ("remember", "recall"):
        figures[f"{kind}_p50"] = statistics.median(wall[kind])
        figures[f"{kind}_p95"] = percentile(wall[kind], 0.95)
        figures[f"{kind}_cpu_p50"] = statistics.median(cpu[kind])
    return figures


def dense_questions(seeded: int, count: int, seed: int) -> list[str]:
    """``count`` questions about random seeded projects, by budget and by codename in turn."""
    rng = random.Random(seed)
    return [
        f"what is the budget of project {rng.randrange(seeded)}?"
        if n % 2
        else f"which project is called falcon{rng.randrange(seeded)}?"
        for n in range(count)
    ]


def cell_overlap(seeded: int, queries: int = 40) -> float:
    """Share of the top 5 semantic hits found when only the probed cells are read.

    Against the same search reading every cell of the scope (exhaustive).
    """
    from memory import vector_cells, vectors

    found = total = 0
    for query in dense_questions(seeded, queries, seed=11):
        probed = {
            hit.pk for hit in vectors.search(visible_scopes=[DENSE_SCOPE], query=query, limit=5)
        }
        factor, vector_cells.PROBE_FACTOR = vector_cells.PROBE_FACTOR, float(10**6)
        try:
            every = {
                hit.pk for hit in vectors.search(visible_scopes=[DENSE_SCOPE], query=query, limit=5)
            }
        finally:
            vector_cells.PROBE_FACTOR = factor
        found += len(probed & every)
        total += len(every)
    return found / total if total else 1.0


def exact_recall_at_5(seeded: int, queries: int = 40) -> float:
    """Share of the true 5 nearest records (exact cosine over every vector of the scope) a search finds.

    The ground truth reads every float vector of the scope into NumPy: a
    benchmark's yardstick, not a search path. Meaningful only when the
    scope's vectors are distinct (``--distinct`` at least the size): with
    repeated vectors the true top five is a tie among copies.
    """
    import numpy as np
    from django.db import connection

    from memory import embeddings, vectors
    from memory.services import scoring

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT record_pk, embedding FROM {vectors.TABLE} WHERE scope = %s",
            [DENSE_SCOPE],
        )
        rows = cursor.fetchall()
    pks = np.array([pk for pk, _ in rows])
    matrix = np.frombuffer(b"".join(bytes(blob) for _, blob in rows), dtype="<f4").reshape(
        len(rows), -1
    )
    found = 0
    for query in dense_questions(seeded, queries, seed=13):
        vector = np.frombuffer(embeddings.embed(query) or b"", dtype="<f4")
        truth = set(pks[np.argsort(-(matrix @ vector), kind="stable")[:5]].tolist())
        # As recall asks: SEMANTIC_CANDIDATES candidates, of which the best five count here.
        hits = vectors.search(
            visible_scopes=[DENSE_SCOPE], query=query, limit=scoring.SEMANTIC_CANDIDATES
        )
        found += len(truth & {hit.pk for hit in hits[:5]})
    return found / (5 * queries)


def embedding_cost(samples: int = 200) -> tuple[float, float]:
    from memory import embeddings

    embeddings.embed("warm up")
    wall, cpu = [], []
    for i in range(samples):
        started, started_cpu = time.perf_counter(), time.process_time()
        embeddings.embed(dense_text(10_000_000 + i))
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def run_dense(sizes: list[int], samples: int) -> None:
    from django.db import connection

    from memory import vectors
    from memory.models import Record

    state = vectors.status()
    print(
        f"dense-scope benchmark on {connection.vendor} ({state.engine}, {state.model}, "
        f"semantic {'on' if state.available else 'OFF: ' + state.detail}), one scope {DENSE_SCOPE}"
    )
    wall, cpu = embedding_cost()
    print(f"embedding cost per text alone: p50 {wall:.2f} ms wall, {cpu:.2f} ms CPU")
    header = (
        f"{'records':>9} {'seed s':>7} | {'remember p50':>12} {'p95':>8} {'cpu p50':>8} | "
        f"{'recall p50':>10} {'p95':>8} {'cpu p50':>8}"
    )
    print(header)
    print("-" * len(header))
    for size in sizes:
        current = Record.objects.filter(scope=DENSE_SCOPE).count()
        started = time.perf_counter()
        seed_dense(current, size)
        seeded = time.perf_counter() - started
        # What the reindex job a scope queues for itself at that size does
        # (seeding bypasses the services, so it is run here).
        started = time.perf_counter()
        trained = vectors.train_cells(DENSE_SCOPE)
        if trained:
            overlap = cell_overlap(size)
            exact = (
                f"; recall@5 against an exact search: {exact_recall_at_5(size):.3f}"
                if size <= DENSE_DISTINCT_VECTORS
                else ""
            )
            print(
                f"   split into {trained[0].cells} cells in {time.perf_counter() - started:.1f} s "
                f"({trained[0].refiled:,} vectors refiled); top-5 overlap with reading "
                f"every cell: {overlap:.3f}{exact}",
                flush=True,
            )
        figures = measure_dense(samples, 20_000_000 + size, size)
        print(
            f"{size:>9,} {seeded:>7.1f} | "
            f"{figures['remember_p50']:>9.2f} ms {figures['remember_p95']:>5.2f} ms "
            f"{figures['remember_cpu_p50']:>5.2f} ms | "
            f"{figures['recall_p50']:>7.2f} ms {figures['recall_p95']:>5.2f} ms "
            f"{figures['recall_cpu_p50']:>5.2f} ms   (load average {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        print(
            f"   recall of a project no record holds (common words only): "
            f"p50 {figures['recall_absent_p50']:.2f} ms",
            flush=True,
        )


def main() -> None:
    global DENSE_DISTINCT_VECTORS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument(
        "--hot-visible",
        type=int,
        default=0,
        help="records in the hot user's visible scopes at every size (default: a tenth of the size)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database (prints its path)")
    parser.add_argument("--dense", action="store_true", help="the dense-scope case (see above)")
    parser.add_argument(
        "--distinct",
        type=int,
        default=DENSE_DISTINCT_VECTORS,
        help="dense case: distinct texts embedded for the seeded vectors (see above)",
    )
    parser.add_argument(
        "--postgres", help="dense case on PostgreSQL: a server URL (postgres://...)"
    )
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))
    if args.dense:
        DENSE_DISTINCT_VECTORS = max(1, args.distinct)
        directory = Path(tempfile.mkdtemp(prefix="aetnaweb-dense-bench-"))
        dropper = None
        try:
            if args.postgres:
                dropper = use_fresh_postgres(args.postgres)
            setup_django(directory)
            run_dense(sizes, args.samples)
        finally:
            if args.keep:
                print(f"kept: {os.environ.get('BENCH_DATABASE_URL') or directory}")
            else:
                if dropper is not None:
                    dropper()
                shutil.rmtree(directory, ignore_errors=True)
        return

    directory = Path(tempfile.mkdtemp(prefix="aetnaweb-memory-bench-"))
    try:
        setup_django(directory)
        scopes = scope_list()
        corpus = Corpus(seed=1)
        print(f"memory scale benchmark, SQLite {sqlite3.sqlite_version}, {len(scopes)} scopes")
        header = (
            f"{'records':>9} {'hot-visible':>11} {'seed s':>7} | {'remember p50':>12} {'p95':>8} "
            f"{'cpu p50':>8} | {'recall p50':>10} {'p95':>8} {'cpu p50':>8} | {'cand.':>5}"
        )
        print(header)
        print("-" * len(header))
        from memory.models import Record

        for size in sizes:
            current = Record.objects.count()
            last_id = Record.objects.order_by("-id").values_list("id", flat=True).first() or 0
            started = time.perf_counter()
            hot_target = min(size, args.hot_visible or int(size * HOT_SHARE))
            seed(
                max(0, size - current),
                hot_count=max(0, hot_target - hot_visible_records()),
                start_id=last_id + 1,
                corpus=corpus,
                scopes=scopes,
            )
            seeded = time.perf_counter() - started
            figures = measure(args.samples, corpus)
            print(
                f"{size:>9,} {hot_visible_records():>11,} {seeded:>7.1f} | "
                f"{figures['remember_p50']:>9.2f} ms {figures['remember_p95']:>5.2f} ms "
                f"{figures['remember_cpu_p50']:>5.2f} ms | "
                f"{figures['recall_p50']:>7.2f} ms {figures['recall_p95']:>5.2f} ms "
                f"{figures['recall_cpu_p50']:>5.2f} ms | {figures['candidates']:>5.1f}"
                f"   (load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
        size_mb = (directory / "bench.sqlite3").stat().st_size / 1e6
        print(f"database file: {size_mb:,.0f} MB")
        if args.keep:
            print(f"kept: {directory}")
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
