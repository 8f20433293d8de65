"""Benchmark: the cost of checking record content against its bound content_sha256.

    .venv/bin/python bench/content_binding.py [--sizes 100000] [--subjects 1000]

Builds a temporary database (never the development one) holding, per record,
a ``memory_record`` row and its ``memory.record_created`` event whose payload
binds ``content_sha256``, chained and hashed by the reference code. Then
times, on one core: the chain walk alone (``verify_all`` with the content
check unregistered), the content check alone (service and the standalone
tool), and ``verify_all`` as it runs in production (both).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_common import configure_django, cpu_seconds
from audit_verify import load_tool

CREATED = "2026-11-29T12:00:00.123456+00:00"


def fill(path: Path, records: int, subjects: int) -> None:
    from audit.chain import compute_event_hash

    names = [f"tenant{n % 10}:user{n}:project" for n in range(subjects)]
    heads: dict[str, str | None] = dict.fromkeys(names)
    conn = sqlite3.connect(path)
    events, rows = [], []
    for number in range(1, records + 1):
        subject = names[number % subjects]
        tenant, user, project = subject.split(":")
        record_id = "mem_" + uuid.uuid4().hex
        content = f"User's setting {number} is value {number * 7}."
        payload = {
            "record_id": record_id,
            "content_sha256": hashlib.sha256(content.encode()).hexdigest(),
            "status": "active",
            "trust_tier": "trusted_user",
        }
        fields = {
            "event_id": "aud_" + uuid.uuid4().hex,
            "subject_id": subject,
            "event_type": "memory.record_created",
            "created_at": CREATED,
            "actor": "user",
            "session_id": None,
            "turn_id": None,
            "record_id": record_id,
            "payload": payload,
            "prev_hash": heads[subject],
        }
        event_hash = compute_event_hash(**fields)
        heads[subject] = event_hash
        fields["payload"] = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        events.append((number, *fields.values(), event_hash))
        rows.append((number, record_id, subject, tenant, user, project, content, CREATED, CREATED))
    conn.executemany("INSERT INTO audit_log VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", events)
    conn.executemany(
        "INSERT INTO memory_record (id, record_id, scope, tenant, user, project, session_id,"
        " turn_id, source_type, trust_tier, confidence, status, fact_key, kind, content,"
        " content_digest, evidence, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?,"
        " '', '', 'user_message', 'trusted_user', 0.9, 'active', '', '', ?, '', '[]', '{}', ?, ?)",
        rows,
    )
    conn.commit()
    conn.close()


def timed(label: str, count: int, action) -> None:
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = action()
    wall = time.perf_counter() - wall
    used = cpu_seconds() - cpu
    print(
        f"  {label:44s} wall {wall:6.2f} s {count / wall:>9,.0f}/s"
        f"   cpu {used:6.2f} s {count / used:>9,.0f}/cpu-s   {result}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--subjects", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-") as tmp:
        configure_django(Path(tmp))
        from django.db import connection

        from audit import verification
        from memory.selectors import content_failures

        database = Path(connection.settings_dict["NAME"])
        tool = load_tool()
        print(f"content binding benchmark ({args.subjects} subjects)")
        for size in args.sizes:
            start = time.perf_counter()
            fill(database, size, args.subjects)
            print(f"{size:,} records and events (built in {time.perf_counter() - start:.1f} s)")

            def chain_only(size=size):
                from aetnaweb.access import SYSTEM

                checks = list(verification._subject_checks)
                verification._subject_checks.clear()
                try:
                    report = verification.verify_all(principal=SYSTEM)
                finally:
                    verification._subject_checks.extend(checks)
                assert report.ok and report.events_checked == size
                return "ok"

            def content_only():
                failures = list(content_failures(None))
                assert not failures, failures[:3]
                return "ok"

            def both(size=size):
                from aetnaweb.access import SYSTEM

                report = verification.verify_all(principal=SYSTEM)
                assert report.ok and report.events_checked == size
                return "ok"

            def tool_content_only():
                conn = tool.open_readonly(str(database))
                failures = list(tool.content_failures(conn, None))
                conn.close()
                assert not failures, failures[:3]
                return "ok"

            timed("service: chain walk only", size, chain_only)
            timed("service: content check only", size, content_only)
            timed("service: verify_all() (chain + content)", size, both)
            timed("tools/verify_audit.py: content check only", size, tool_content_only)


if __name__ == "__main__":
    main()
