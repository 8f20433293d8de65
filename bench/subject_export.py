"""Benchmark: a subject export job over one person's subtree, rows per second and file size.

    .venv/bin/python bench/subject_export.py [--records 2000] [--projects 4]

Builds a SQLite database in a temporary directory (never the development
database), stores ``--records`` facts (one stored message each) spread over
the person's scope and ``--projects`` projects below it through the engine's
write path (``memory.services.remember``), then records a subject export of
``acme:dana:*`` and runs its body in this process (what ``manage.py
db_worker`` calls): reading the rows in chunks, the audit events of the
scopes, the manifest event and the ZIP. Prints wall and CPU time, rows per
second and the ZIP's size. The machine may be shared: rows per CPU-second is
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--projects", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-") as tmp:
        configure_django(Path(tmp))
        from aetnaweb.access import SYSTEM
        from memory import services
        from memory.services.subject_export import run_subject_export, start_subject_export

        scopes = ["acme:dana:*", *(f"acme:dana:p{n}" for n in range(args.projects))]
        start = time.perf_counter()
        for n in range(args.records):
            services.remember(
                principal=SYSTEM, scope=scopes[n % len(scopes)], text=f"My note {n} is kept here."
            )
        print(
            f"{args.records:,} records in {len(scopes)} scopes (built in "
            f"{time.perf_counter() - start:.1f} s), SQLite, one process"
        )
        job = start_subject_export(
            subtree="acme:dana:*", reference="BENCH-1", principal=SYSTEM, queue=False
        )
        wall, cpu = time.perf_counter(), cpu_seconds()
        done = run_subject_export(job.pk)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        assert done.status == "done", done.error
        rows = done.result["records"] + done.result["episodes"] + done.result["audit_events"]
        print(
            f"  run_subject_export  wall {wall:6.2f} s {rows / wall:>8,.0f} rows/s"
            f"   cpu {cpu:6.2f} s {rows / cpu:>8,.0f}/cpu-s   {done.result['records']:,} records,"
            f" {done.result['episodes']:,} messages, {done.result['audit_events']:,} events,"
            f" ZIP {(done.file_bytes or 0) / 1e6:,.2f} MB"
        )


if __name__ == "__main__":
    main()
