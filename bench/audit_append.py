"""Benchmark: audit appends per second on SQLite, one writer and four writer processes.

    .venv/bin/python bench/audit_append.py [--appends 5000] [--writers 4]

Each append is its own transaction (``transaction.atomic()`` around
``append_event``), as a memory write is: BEGIN IMMEDIATE, read the chain head,
insert, update the subject index and the day's counter, append the event as a
leaf of the Merkle log (read the frontier, write the leaf and the nodes it
completes, write the frontier), commit. The database is a temporary file; the
chains and the Merkle log are verified at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_common import ROOT, benchmark_environment, configure_django, cpu_seconds

SUBJECTS = ["acme:alice:proj", "acme:bob:proj", "acme:*:*", "zeta:carol:x"]


def append_many(count: int, worker: int = 0) -> None:
    from django.db import transaction

    from audit.services import append_event

    for n in range(count):
        with transaction.atomic():
            append_event(
                subject=SUBJECTS[(worker + n) % len(SUBJECTS)],
                event_type="memory.record_created",
                actor="system",
                payload={
                    "record_id": f"rec_{worker:04d}{n:028d}",
                    "content_sha256": f"{n:064x}",
                    "trust_tier": "user_confirmed",
                    "fact_key": "backup email",
                },
                record_id=f"rec_{worker:04d}{n:028d}",
                session_id="ses-bench",
            )


def worker_main(directory: Path, worker: int, count: int) -> None:
    configure_django(directory, migrate=False)
    (directory / f"ready-{worker}").touch()
    while not (directory / "go").exists():
        time.sleep(0.002)
    append_many(count, worker)


def main() -> None:
    from aetnaweb.access import SYSTEM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=5000, help="appends per writer")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker_main(Path(args.directory), args.worker, args.appends)
        return

    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-") as tmp:
        directory = Path(tmp)
        configure_django(directory)
        from django.db import connection

        from audit.verification import verify_all

        print(
            f"append benchmark (SQLite, WAL, synchronous=NORMAL): {connection.settings_dict['NAME']}"
        )
        wall, cpu = time.perf_counter(), cpu_seconds()
        append_many(args.appends)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        print(
            f"  1 writer:  {args.appends:,} appends in {wall:.2f} s = {args.appends / wall:,.0f}/s"
            f"  (cpu {cpu:.2f} s = {args.appends / cpu:,.0f} per cpu-second)"
        )

        env = benchmark_environment(directory)
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    str(index),
                    "--appends",
                    str(args.appends),
                    "--directory",
                    str(directory),
                ],
                cwd=ROOT,
                env=os.environ | env,
            )
            for index in range(args.writers)
        ]
        while len(list(directory.glob("ready-*"))) < args.writers:
            if any(w.poll() not in (None, 0) for w in workers):
                sys.exit("a writer failed to start")
            time.sleep(0.01)
        wall, children_cpu = time.perf_counter(), cpu_seconds(children=True)
        (directory / "go").touch()
        for worker in workers:
            if worker.wait() != 0:
                sys.exit("a writer failed")
        wall = time.perf_counter() - wall
        total = args.writers * args.appends
        # children's CPU includes their Django start-up, so it overstates the append cost
        children_cpu = cpu_seconds(children=True) - children_cpu
        print(
            f"  {args.writers} writer processes: {total:,} appends in {wall:.2f} s = "
            f"{total / wall:,.0f}/s in total  (writers' cpu incl. start-up {children_cpu:.2f} s)"
        )
        report = verify_all(principal=SYSTEM)
        expected = total + args.appends
        status = "ok" if report.ok and report.events_checked == expected else "FAILED"
        print(f"  chains verified after the run: {status} ({report.events_checked:,} events)")
        from audit import tree

        log_failures = tree.verify_log()
        print(
            f"  Merkle log verified: {'ok' if not log_failures else 'FAILED'}"
            f" ({tree.tree_size():,} leaves)"
        )


if __name__ == "__main__":
    main()
