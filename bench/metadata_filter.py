"""Metadata filters: what a filter costs in recall and in listing, and that it never starves.

Usage::

    .venv/bin/python bench/metadata_filter.py [--records 2000] [--customers 100] [--samples 50]

Seeds a temporary SQLite database (deleted afterwards; ``BENCH_DATABASE_URL``
points it at another database, e.g. a scratch PostgreSQL one) with
``--records`` records at one scope through ``memory.services.remember``, every
one about the same topic ("I reviewed the launch plan for account N") and
carrying ``{"customer_id": N % customers}``, so an unfiltered recall has far
more matches than it returns and a filter keeps ``records / customers`` of
them. Times ``recall`` (limit 5) without a filter and with one customer's
filter, and ``list_records`` with the filter, printing wall-clock p50 and p95
in milliseconds, and checks every filtered answer holds only that customer's
records and is not empty (no starvation). On a shared machine the figures
are noisy; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCOPE = "bench:meta:proj"


def timed(samples: int, call: Callable[[int], Any]) -> tuple[float, float]:
    """p50 and p95 in milliseconds of ``samples`` calls of ``call(i)``."""
    seconds = []
    for i in range(samples):
        start = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - start)
    seconds.sort()
    p95 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
    return statistics.median(seconds) * 1000, p95 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--customers", type=int, default=100)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="aetnaweb-metadata-"))
    try:
        # The memory benchmarks' one set-up (bench/ is on the path when a script runs).
        from memory_scale import setup_django

        setup_django(directory, "metadata.sqlite3")
        from aetnaweb.access import SYSTEM
        from memory import selectors, services, vectors

        started = time.perf_counter()
        for n in range(args.records):
            services.remember(
                principal=SYSTEM,
                scope=SCOPE,
                text=f"I reviewed the launch plan for account {n}.",
                force=True,
                metadata={"customer_id": n % args.customers},
            )
        seeded = time.perf_counter() - started
        state = vectors.status()
        print(
            f"{args.records} records at one scope, {args.customers} customers "
            f"({args.records // args.customers} records each); seeded in {seeded:.1f} s; "
            f"recall: {state.detail}; load average {os.getloadavg()[0]:.2f}"
        )

        def customer(i: int) -> dict[str, int]:
            return {"customer_id": i % args.customers}

        def recall_filtered(i: int) -> None:
            result = services.recall(
                principal=SYSTEM, scope=SCOPE, query="launch plan", metadata=customer(i)
            )
            if not result.returned or any(c.metadata != customer(i) for c in result.candidates):
                raise SystemExit(f"filtered recall {i} starved or leaked: {result.record_ids}")

        def list_filtered(i: int) -> None:
            page = selectors.list_records(SYSTEM, scope=SCOPE, metadata=customer(i), limit=50)
            if not page.items or any(r.metadata != customer(i) for r in page.items):
                raise SystemExit(f"filtered list {i} starved or leaked")

        def recall_operators(i: int) -> None:
            wanted = [i % args.customers, (i + 1) % args.customers]
            result = services.recall(
                principal=SYSTEM,
                scope=SCOPE,
                query="launch plan",
                metadata={"customer_id": {"$in": wanted, "$gte": 0}},
                created_at={"$gte": "2000-01-01"},
            )
            if not result.returned or any(
                c.metadata["customer_id"] not in wanted for c in result.candidates
            ):
                raise SystemExit(f"operator recall {i} starved or leaked: {result.record_ids}")

        def list_range(i: int) -> None:
            low = i % args.customers
            page = selectors.list_records(
                SYSTEM,
                scope=SCOPE,
                metadata={"customer_id": {"$gte": low, "$lt": low + 2}},
                limit=50,
            )
            if not page.items or any(
                not low <= r.metadata["customer_id"] < low + 2 for r in page.items
            ):
                raise SystemExit(f"range list {i} starved or leaked")

        rows = [
            (
                "recall, no filter",
                timed(
                    args.samples,
                    lambda i: services.recall(principal=SYSTEM, scope=SCOPE, query="launch plan"),
                ),
            ),
            ("recall, metadata filter", timed(args.samples, recall_filtered)),
            ("list_records, metadata filter", timed(args.samples, list_filtered)),
            ("recall, $in + range + created_at", timed(args.samples, recall_operators)),
            ("list_records, numeric range", timed(args.samples, list_range)),
        ]
        print(f"{'call':32} {'p50 ms':>8} {'p95 ms':>8}")
        for name, (p50, p95) in rows:
            print(f"{name:32} {p50:8.1f} {p95:8.1f}")
        print(
            f"load average {os.getloadavg()[0]:.2f}; every filtered answer was non-empty and exact"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
