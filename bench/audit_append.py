"""Benchmark: audit appends per second on SQLite, with and without the Merkle log.

    .venv/bin/python bench/audit_append.py [--appends 5000] [--writers 4] [--rounds 3]

Each append is its own transaction (``transaction.atomic()`` around
``append_event``), as a memory write is: BEGIN IMMEDIATE, read the chain head
(and the newest leaf's sequence), insert, update the subject index and the
day's and type's counters, commit; every ``tree.INTEGRATE_EVERY`` events the
append also integrates the waiting events into the Merkle log (leaves and
nodes in bulk, the frontier once).

One writer runs ``--rounds`` rounds alternating two modes on fresh databases:
*with the tree* (the code as shipped) and *without* (``--no-tree`` baseline:
the Merkle log step of the append is skipped, which is today's linear-chain
append), and prints appends per CPU-second for each and the ratio of the
medians (issue 14's target: with >= 80% of without). Alternating rounds keeps
a shared machine's noise from favouring one mode. Then ``--writers`` processes
append concurrently (with the tree). The databases are temporary files; the
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


def one_writer_round(appends: int, *, tree_on: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for ``appends`` appends on a fresh database."""
    from audit import services

    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-round-") as tmp:
        _switch_database(Path(tmp))
        original = services.after_append
        if not tree_on:
            services.after_append = lambda cursor, **kwargs: 0  # type: ignore[assignment]
        try:
            wall, cpu = time.perf_counter(), cpu_seconds()
            append_many(appends)
            return time.perf_counter() - wall, cpu_seconds() - cpu
        finally:
            services.after_append = original  # type: ignore[assignment]


def _switch_database(directory: Path) -> None:
    """Point the default connection at a fresh, migrated database in ``directory``."""
    from django.core.management import call_command
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = str(directory / "bench.sqlite3")
    call_command("migrate", verbosity=0)


def compare_modes(appends: int, rounds: int) -> None:
    """One writer, with and without the tree, alternating; medians and their ratio."""
    import statistics

    rates: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for tree_on in (False, True):
            wall, cpu = one_writer_round(appends, tree_on=tree_on)
            rates[tree_on].append(appends / cpu)
            label = "with the tree   " if tree_on else "without (--no-tree)"
            print(
                f"  1 writer, {label}: {appends:,} appends in {wall:.2f} s = "
                f"{appends / wall:,.0f}/s  (cpu {cpu:.2f} s = {appends / cpu:,.0f} per cpu-second)"
            )
    with_tree, without = statistics.median(rates[True]), statistics.median(rates[False])
    print(
        f"  median per cpu-second: with the tree {with_tree:,.0f}, without {without:,.0f}:"
        f" ratio {with_tree / without:.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=5000, help="appends per writer")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per mode")
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

        from aetnaweb.access import SYSTEM
        from audit import tree
        from audit.verification import verify_all

        print(
            "append benchmark (SQLite, WAL, synchronous=NORMAL,"
            f" a batch every {tree.INTEGRATE_EVERY} events)"
        )
        compare_modes(args.appends, args.rounds)
        _switch_database(directory)
        print(f"  concurrent writers on {connection.settings_dict['NAME']}")
        append_many(args.appends)

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
        log_failures = tree.verify_log()
        print(
            f"  Merkle log verified: {'ok' if not log_failures else 'FAILED'}"
            f" ({tree.tree_size():,} leaves)"
        )


if __name__ == "__main__":
    main()
