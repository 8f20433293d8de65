"""Memory engine scale benchmark: remember and recall latency as the store grows (SQLite).

Usage::

    .venv/bin/python bench/memory_scale.py [--sizes 10000,100000,1000000] [--samples 300]

Seeds a temporary SQLite file (deleted afterwards) to each size in turn,
spread over 10,000 scopes, and times ``memory.services.remember`` and
``memory.services.recall`` at one hot user's project, printing wall-clock p50
and p95 and the CPU-time p50 per size (on a shared machine, load inflates wall
time but not CPU time; the load average is printed with each row).
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


def setup_django(directory: Path) -> None:
    os.environ["AETNAWEB_DATA_DIR"] = str(directory)
    os.environ["DATABASE_URL"] = f"sqlite:///{directory / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
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
                "content, content_digest, evidence, created_at, updated_at) "
                "VALUES (" + ", ".join(["%s"] * 19) + ")",
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
        cursor.execute("ANALYZE")


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(samples: int, corpus: Corpus) -> dict[str, float]:
    """Wall-clock and CPU milliseconds per call (CPU time is what load on a shared box cannot inflate)."""
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
        timed("remember", lambda text=text: services.remember(scope=scope, text=text), keep)
        result = timed(
            "recall", lambda query=query: services.recall(scope=scope, query=query, limit=5), keep
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


def main() -> None:
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
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))

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
