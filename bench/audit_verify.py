"""Benchmark: events verified per second, service verifier and tools/verify_audit.py.

    .venv/bin/python bench/audit_verify.py [--sizes 100000 1000000] [--subjects 1000]

Builds each database in a temporary directory (never the development
database): valid chains with memory-engine-like payloads, hashed with the
reference implementation (audit.chain.compute_event_hash), inserted in bulk.
Then times ``audit.verification.verify_all`` through Django's connection, and
``tools/verify_audit.py`` both in-process and as a subprocess (the way an
auditor runs it). Everything runs on one core: the verifiers are single-threaded.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_common import ROOT, configure_django, cpu_seconds

TOOL = ROOT / "tools" / "verify_audit.py"


def fill(path: Path, events: int, subjects: int) -> None:
    """Valid chains, interleaved across subjects, hashed by the reference code."""
    import json

    from audit.chain import compute_event_hash

    names = [f"tenant{n % 10}:user{n}:project" for n in range(subjects)]
    heads: dict[str, str | None] = dict.fromkeys(names)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM audit_log")
    batch = []
    for sequence in range(1, events + 1):
        subject = names[sequence % subjects]
        payload = {
            "record_id": "rec_" + uuid.uuid4().hex,
            "content_sha256": hashlib.sha256(str(sequence).encode()).hexdigest(),
            "trust_tier": "user_confirmed",
            "fact_key": "backup email",
            "count": sequence,
        }
        fields = {
            "event_id": "aud_" + uuid.uuid4().hex,
            "subject_id": subject,
            "event_type": "memory.record_created",
            "created_at": "2026-11-29T12:00:00.123456+00:00",
            "actor": "system",
            "session_id": "ses-1" if sequence % 3 == 0 else None,
            "turn_id": None,
            "record_id": payload["record_id"],
            "payload": payload,
            "prev_hash": heads[subject],
        }
        event_hash = compute_event_hash(**fields)
        heads[subject] = event_hash
        fields["payload"] = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        batch.append((sequence, *fields.values(), event_hash))
        if len(batch) == 50_000:
            conn.executemany("INSERT INTO audit_log VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", batch)
            batch.clear()
    if batch:
        conn.executemany("INSERT INTO audit_log VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", batch)
    conn.commit()
    conn.close()


def load_tool():
    spec = importlib.util.spec_from_file_location("verify_audit", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def timed(label: str, events: int, action, *, children: bool = False) -> None:
    """Wall time, and CPU time (this process, or its children for a subprocess).

    The machine may be shared: events per CPU-second is the one-core figure.
    """
    wall, cpu = time.perf_counter(), cpu_seconds(children=children)
    result = action()
    wall = time.perf_counter() - wall
    used = cpu_seconds(children=children) - cpu
    print(
        f"  {label:44s} wall {wall:6.2f} s {events / wall:>9,.0f}/s"
        f"   cpu {used:6.2f} s {events / used:>9,.0f}/cpu-s   {result}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--subjects", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-") as tmp:
        directory = Path(tmp)
        configure_django(directory)
        from django.db import connection

        from audit.verification import verify_all

        database = Path(connection.settings_dict["NAME"])
        tool = load_tool()
        print(f"verification benchmark ({args.subjects} subjects, SQLite {sqlite3.sqlite_version})")
        for size in args.sizes:
            start = time.perf_counter()
            fill(database, size, args.subjects)
            print(f"{size:,} events (built in {time.perf_counter() - start:.1f} s)")

            def service(size=size):
                from aetnaweb.access import SYSTEM

                report = verify_all(principal=SYSTEM)
                assert report.ok and report.events_checked == size
                return "ok"

            def tool_in_process():
                conn = tool.open_readonly(str(database))
                results = tool.verify_all_chains(conn)
                conn.close()
                assert all(r.ok for r in results)
                return "ok"

            def tool_subprocess():
                done = subprocess.run(
                    [sys.executable, str(TOOL), str(database)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                assert done.returncode == 0, done.stderr
                return done.stdout.splitlines()[-1]

            timed("service verify_all()", size, service)
            timed("tools/verify_audit.py (imported)", size, tool_in_process)
            timed(
                "tools/verify_audit.py (subprocess, whole run)",
                size,
                tool_subprocess,
                children=True,
            )


if __name__ == "__main__":
    main()
