"""Write coverage: what ``remember`` keeps from plain user messages (issue 12).

Usage::

    .venv/bin/python bench/write_coverage.py [--data bench/data/write_coverage.json] [--show]

Runs every message of the set through the real ``memory.services.remember``
on a fresh temporary SQLite database (deleted afterwards), each message at its
own scope so no two interact, and prints, per class and per category, how
many were stored (at least ``min_records`` records, default 1) and how many
were ignored. ``--show`` also prints each message with what was stored.

Targets: at least 95% of statements stored, at most 5% of non-statements.
The exit status is 1 when a target is missed, so CI can run it as a check.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from audit_common import configure_django

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "bench" / "data" / "write_coverage.json"
STATEMENT_TARGET = 0.95
NON_STATEMENT_LIMIT = 0.05


def setup_django(directory: Path) -> None:
    # The shared set-up (audit_common): its own database and data directory, and a
    # throwaway SECRET_KEY, so the bench starts without the development key file.
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    configure_django(directory)


def run(data: dict[str, list[dict[str, object]]], show: bool) -> bool:
    from aetnaweb.access import SYSTEM
    from memory import services

    ok = True
    for cls, want_stored in (("statements", True), ("non_statements", False)):
        items = data[cls]
        by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        stored_total = 0
        for number, item in enumerate(items):
            text = str(item["text"])
            needed = int(str(item.get("min_records", 1)))
            result = services.remember(
                principal=SYSTEM, scope=f"cov{cls[0]}:u{number}:*", text=text
            )
            stored = len(result.records) >= needed if want_stored else bool(result.records)
            stored_total += stored
            tally = by_category[str(item["category"])]
            tally[0 if stored else 1] += 1
            if show or stored != want_stored:
                mark = "ok  " if stored == want_stored else "MISS"
                contents = [record.content for record in result.records]
                print(f"  {mark} {cls[:-1]:<13} {text!r} -> {contents}")
        share = stored_total / len(items)
        print(
            f"{cls:<15} {len(items):4d} messages: stored {stored_total:4d} ({share:6.1%}), "
            f"ignored {len(items) - stored_total:4d}"
        )
        for category, (stored_n, ignored_n) in sorted(by_category.items()):
            print(f"    {category:<16} stored {stored_n:3d}  ignored {ignored_n:3d}")
        if want_stored and share < STATEMENT_TARGET:
            print(f"  target missed: at least {STATEMENT_TARGET:.0%} of statements stored")
            ok = False
        if not want_stored and share > NON_STATEMENT_LIMIT:
            print(f"  target missed: at most {NON_STATEMENT_LIMIT:.0%} of non-statements stored")
            ok = False
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--show", action="store_true", help="print every message and its records")
    args = parser.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    directory = Path(tempfile.mkdtemp(prefix="aetnaweb-coverage-"))
    try:
        setup_django(directory)
        return 0 if run(data, args.show) else 1
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
