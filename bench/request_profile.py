"""Profile of one API request: CPU ms, wall ms and SQL statements for remember and recall.

    .venv/bin/python bench/request_profile.py [--requests 200] [--profile recall|remember] [--show-sql]

On a temporary SQLite database (``--database-url`` for another one, e.g. a
throwaway PostgreSQL database), with a token whose limit is counted but never
reached, it sends ``POST /api/v1/memory/remember`` and ``POST
/api/v1/memory/recall`` through Django's test client (the whole middleware
stack, no HTTP server) and prints, per endpoint: the mean CPU time of this
process per request (not inflated by other processes on a shared machine, unlike
wall time), the wall-clock p50/p95, the SQL statements of one request split
into reads and writes, and on SQLite how long each request held the database's
single write lock (BEGIN IMMEDIATE to COMMIT/ROLLBACK): every other writer in
every process queues for that long, so it is what bounds recall latency under
concurrent load.
``--profile`` prints the cProfile top 25 (cumulative) for that endpoint.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import secrets
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN", "SAVEPOINT", "RELEASE")


def setup(directory: Path, database_url: str | None) -> None:
    os.environ.update(
        {
            "DATABASE_URL": database_url or f"sqlite:///{directory / 'profile.sqlite3'}",
            "AETNAWEB_DATA_DIR": str(directory),
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_SETTINGS_MODULE": "aetnaweb.settings",
        }
    )
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class _WriteLockClock:
    """Wall time from each ``BEGIN IMMEDIATE`` to the COMMIT or ROLLBACK that ends it."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.spans: list[float] = []
        self.cpu_spans: list[float] = []
        self._began: float | None = None
        self._began_cpu = 0.0

    def _execute(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.startswith("BEGIN"):
            self._began = time.perf_counter()
            self._began_cpu = time.thread_time()
        return execute(sql, params, many, context)

    def _ended(self, original: Any) -> Any:
        def end() -> Any:
            try:
                return original()
            finally:
                if self._began is not None:
                    self.spans.append((time.perf_counter() - self._began) * 1000)
                    self.cpu_spans.append((time.thread_time() - self._began_cpu) * 1000)
                    self._began = None

        return end

    def __enter__(self) -> None:
        self._wrapper = self.connection.execute_wrapper(self._execute)
        self._wrapper.__enter__()
        # Django ends a transaction through these two, not through a cursor.
        self._saved = (self.connection._commit, self.connection._rollback)
        self.connection._commit = self._ended(self._saved[0])
        self.connection._rollback = self._ended(self._saved[1])

    def __exit__(self, *exc: object) -> None:
        self.connection._commit, self.connection._rollback = self._saved
        self._wrapper.__exit__(*exc)


# Requests timed per kind for --show-sql (each statement's mean over them).
SQL_SAMPLES = 50


def _statement_times(connection: Any, call: Any, samples: int) -> list[tuple[str, float]]:
    """Each statement of ``call``'s request and its mean wall time in ms over ``samples`` requests.

    Timed around the driver's execute: Django's own query log keeps each time
    to the millisecond, too coarse for statements that take a tenth of one.
    A request that runs a different sequence (a rare branch) is left out.
    """
    runs: list[list[tuple[str, float]]] = []

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            runs[-1].append((sql, (time.perf_counter() - started) * 1000))

    with connection.execute_wrapper(timed):
        for _ in range(samples):
            runs.append([])
            call()
    shape = [sql for sql, _ in runs[0]]
    same = [run for run in runs if [sql for sql, _ in run] == shape]
    return [(sql, statistics.fmean(run[i][1] for run in same)) for i, sql in enumerate(shape)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--records", type=int, default=200, help="records in the recalled scope")
    parser.add_argument("--profile", choices=["recall", "remember"])
    parser.add_argument(
        "--show-sql",
        action="store_true",
        help="print the statements of a request of each kind, each with its mean wall time",
    )
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        setup(Path(directory), args.database_url)
        from django.conf import settings
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext, setup_test_environment
        from django.utils import timezone

        from access import tokens
        from aetnaweb.access import SYSTEM
        from memory import services

        setup_test_environment()
        settings.ALLOWED_HOSTS = ["testserver"]
        issued = tokens.create_token(
            principal=SYSTEM,
            name="profile",
            scope="load:*:*",
            capabilities=["read", "write"],
            expires_at=timezone.now() + timedelta(days=1),
            rate_limit_per_minute=1_000_000,  # counted, never reached
        )
        for n in range(args.records):
            services.remember_fact(
                principal=SYSTEM,
                scope="load:u00:proj",
                key=f"seed {n}",
                value=f"deploy window {n}",
                actor="bench",
            )
        client = Client()
        auth = {"Authorization": f"Bearer {issued.secret}"}
        counter = iter(range(10**9))

        def remember() -> int:
            n = next(counter)
            body = {"scope": "load:u00:proj", "key": f"fact {n}", "value": f"value {n} of the run"}
            return client.post(
                "/api/v1/memory/remember", json.dumps(body), "application/json", headers=auth
            ).status_code

        def recall() -> int:
            body = {"scope": "load:u00:proj", "query": "deploy window", "limit": 5}
            return client.post(
                "/api/v1/memory/recall", json.dumps(body), "application/json", headers=auth
            ).status_code

        calls = {"remember": remember, "recall": recall}
        held = _WriteLockClock(connection)
        print(
            f"request profile: {connection.vendor}, {args.records} records in the scope, "
            f"{args.requests} requests each"
        )
        for name, call in calls.items():
            for _ in range(5):  # warm: model loaded, caches filled
                assert call() in (200, 201), name
            with CaptureQueriesContext(connection) as captured:
                call()
            statements = [q["sql"].lstrip().split(" ", 1)[0].upper() for q in captured]
            writes = sum(1 for verb in statements if verb.startswith(WRITE_VERBS))
            if args.show_sql:
                for sql, took in _statement_times(connection, call, SQL_SAMPLES):
                    print(f"    {name} {took:6.3f} ms  {sql[:150]}")
            walls: list[float] = []
            held.spans.clear()
            held.cpu_spans.clear()
            cpu_start = time.process_time()
            with held:
                for _ in range(args.requests):
                    start = time.perf_counter()
                    call()
                    walls.append((time.perf_counter() - start) * 1000)
            cpu_ms = (time.process_time() - cpu_start) * 1000 / args.requests
            walls.sort()
            spans = sorted(held.spans) or [0.0]
            lock = (
                f"  write lock held {sum(held.spans) / args.requests:6.2f} ms/req"
                f" ({sum(held.cpu_spans) / args.requests:5.2f} ms CPU;"
                f" longest hold p99 {spans[int(0.99 * (len(spans) - 1))]:.1f}, max {spans[-1]:.1f} ms)"
                if connection.vendor == "sqlite"
                else ""
            )
            print(
                f"  {name:<9} cpu {cpu_ms:6.2f} ms/req  wall p50 {statistics.median(walls):6.2f} ms"
                f"  p95 {walls[int(0.95 * len(walls)) - 1]:6.2f} ms{lock}  statements"
                f" {len(statements)} ({len(statements) - writes} reads,"
                f" {writes} writes/transaction control)"
            )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(50):
                calls[args.profile]()
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(
                os.environ.get("PROFILE_SORT", "cumulative")
            ).print_stats(40)
            print(out.getvalue())


if __name__ == "__main__":
    main()
