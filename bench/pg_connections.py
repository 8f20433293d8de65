"""Benchmark: 100 concurrent clients against PostgreSQL, with and without the connection pool.

    DATABASE_URL=postgres://aetnaweb:aetnaweb@127.0.0.1:5432/aetnaweb \\
        .venv/bin/python bench/pg_connections.py [--clients 100] [--requests 5]

Each client is a thread sending ``--requests`` requests to ``/healthz`` (a real
query) through Django's full request cycle, all at once. A watcher samples
``pg_stat_activity`` for this database and reports the most server
connections the process held, the answers by status and the wall time. Run it
once with the default pool (``AETNAWEB_DB_POOL_SIZE=10``) and once with
``AETNAWEB_DB_POOL_SIZE=0`` (a connection per thread) to compare.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--requests", type=int, default=5)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database (see the docstring)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()
    import psycopg
    from django.conf import settings
    from django.db import connections
    from django.test import Client

    config = settings.DATABASES["default"]
    pool = config["OPTIONS"].get("pool")
    watcher_dsn = (
        f"host={config['HOST'] or '127.0.0.1'} port={config['PORT'] or 5432}"
        f" dbname={config['NAME']} user={config['USER']} password={config['PASSWORD']}"
    )
    peak = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        with psycopg.connect(watcher_dsn, autocommit=True) as watcher:
            while not done.is_set():
                row = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
                peak = max(peak, int(row[0]) if row else 0)
                time.sleep(0.01)

    statuses: collections.Counter[int] = collections.Counter()
    lock = threading.Lock()
    start_line = threading.Barrier(args.clients)

    def client() -> None:
        browser = Client(raise_request_exception=False)
        start_line.wait()
        for _ in range(args.requests):
            status = browser.get("/healthz").status_code
            with lock:
                statuses[status] += 1
        connections.close_all()

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.2)
    baseline = peak
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    done.set()
    watcher.join()
    print(f"pool: {pool['max_size'] if pool else 'off'}  (CONN_MAX_AGE {config['CONN_MAX_AGE']})")
    print(f"clients: {args.clients} x {args.requests} requests in {elapsed:.2f} s")
    print(f"answers: {dict(sorted(statuses.items()))}")
    print(f"peak server connections from this run: {peak - baseline} (other sessions: {baseline})")


if __name__ == "__main__":
    main()
