"""Forget matching benchmark: preview and apply time as one scope's records grow (SQLite).

Usage::

    .venv/bin/python bench/forget_match.py [--sizes 1000,10000,100000] [--samples 5]

A forget matches whole words, case-insensitively, across scripts, which SQL
``LIKE`` cannot do, so ``memory.services`` reads the scope's unforgotten
records (in chunks, content only) and compares word tokens in Python. This
measures what that costs: for each size, one scope holds that many active
records (bulk-inserted, no episodes), a needle matches 3 of them, and the
script prints the wall-clock median of ``forget_preview`` and of ``forget``
(each apply forgets 3 fresh records), and the CPU-time median of the preview.
Records at other scopes cost nothing: the scan reads one scope. The database
is a temporary file, deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from audit_common import configure_django

SCOPE = "bench:forget:p0"
WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "heron",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
]


def setup_django(directory: Path) -> None:
    # The shared set-up (audit_common): its own database and data directory, and a
    # throwaway SECRET_KEY, so the bench starts without the development key file.
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    configure_django(directory)


def seed(start: int, count: int) -> None:
    """Bulk-insert ``count`` active records at SCOPE (no episodes, not indexed)."""
    from django.db import transaction

    from memory.models import Record

    now = datetime.now(UTC)
    rows = [
        Record(
            record_id=f"mem_b{start + n:031d}",
            scope=SCOPE,
            tenant="bench",
            user="forget",
            project="p0",
            source_type="user_message",
            trust_tier="trusted_user",
            confidence=0.9,
            status="active",
            content=f"User's note {start + n} is {WORDS[n % len(WORDS)]} {WORDS[(n * 7) % 12]}.",
            content_digest=f"{start + n:064d}",
            created_at=now,
            updated_at=now,
        )
        for n in range(count)
    ]
    with transaction.atomic():
        Record.objects.bulk_create(rows, batch_size=5000)


def plant(tag: str, scope: str = SCOPE) -> None:
    """Three notes a forget of ``"<tag> code"`` matches (bench/forget_copies.py too)."""
    from aetnaweb.access import SYSTEM
    from memory import services

    for n in range(3):
        services.remember(
            principal=SYSTEM, scope=scope, text=f"Remember that the {tag} code {n} is kept."
        )


def main() -> None:
    from aetnaweb.access import SYSTEM

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    directory = Path(tempfile.mkdtemp(prefix="aetnaweb-bench-forget-"))
    try:
        setup_django(directory)
        from memory import services

        print(
            f"{'records at scope':>16} {'preview p50 ms':>15} {'preview cpu ms':>15} "
            f"{'forget p50 ms':>14}"
        )
        seeded = 0
        for size in sizes:
            seed(seeded, size - seeded)
            seeded = size
            previews, cpu, applies = [], [], []
            for sample in range(args.samples):
                tag = f"zircon{size}x{sample}"
                plant(tag)
                wall, proc = time.perf_counter(), time.process_time()
                preview = services.forget_preview(
                    principal=SYSTEM, scope=SCOPE, selector=f"{tag} code"
                )
                previews.append(time.perf_counter() - wall)
                cpu.append(time.process_time() - proc)
                assert len(preview.record_ids) == 3
                wall = time.perf_counter()
                services.forget(
                    principal=SYSTEM,
                    scope=SCOPE,
                    selector=f"{tag} code",
                    expected_record_ids=list(preview.record_ids),
                )
                applies.append(time.perf_counter() - wall)
            print(
                f"{size:>16,} {statistics.median(previews) * 1000:>15.1f} "
                f"{statistics.median(cpu) * 1000:>15.1f} "
                f"{statistics.median(applies) * 1000:>14.1f}"
            )
        print(f"load average: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
