"""Benchmark: an audit export job writing every chain to a file, events per second.

    .venv/bin/python bench/export_job.py [--sizes 100000 1000000] [--subjects 1000]

Builds each database in a temporary directory (never the development
database) with bench/audit_verify.py's valid chains, then records an export
of every chain (``audit.exports.start_export`` as the system) and runs its
body in this process (``audit.exports.run_export``, what ``manage.py
db_worker`` calls), which streams the rows by sequence into a file under the
temporary data directory and hashes it. Prints wall and CPU time, events per
second and the file size. The machine may be shared: events per CPU-second is
the steadier figure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_common import configure_django, cpu_seconds
from audit_verify import fill


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--subjects", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-") as tmp:
        directory = Path(tmp)
        configure_django(directory)
        from django.db import connection

        from aetnaweb.access import SYSTEM
        from audit.exports import run_export, start_export
        from jobs.selectors import file_path

        database = Path(connection.settings_dict["NAME"])
        print(f"export job benchmark ({args.subjects} subjects, SQLite, one process)")
        for size in args.sizes:
            start = time.perf_counter()
            fill(database, size, args.subjects)
            print(f"{size:,} events (built in {time.perf_counter() - start:.1f} s)")
            # Recorded (and queued, but no worker runs here): the body runs in this
            # process, as a worker would run it.
            job = start_export(principal=SYSTEM, scope=None)
            wall, cpu = time.perf_counter(), cpu_seconds()
            done = run_export(job.pk)
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            assert done.status == "done" and done.result["events"] == size, done.error
            size_mb = (done.file_bytes or 0) / 1e6
            print(
                f"  run_export (every chain)  wall {wall:6.2f} s {size / wall:>9,.0f} events/s"
                f"   cpu {cpu:6.2f} s {size / cpu:>9,.0f}/cpu-s   file {size_mb:,.1f} MB"
                f"   sha256 {done.file_sha256[:12]}…"
            )
            file_path(done).unlink()


if __name__ == "__main__":
    main()
