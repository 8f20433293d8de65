"""Dashboard benchmark: server time of every list page at 1,000,000 records and audit events.

Usage::

    .venv/bin/python bench/dashboard.py [--records 1000000] [--events 1000000]
                                        [--samples 30] [--dir DIR] [--keep]

Seeds a temporary SQLite database (deleted afterwards unless ``--keep``), or
the one in ``--dir DIR``: the first run there seeds it and keeps it, later runs
migrate and reuse it (seeding takes minutes; timing takes seconds). It holds
the memory records of ``bench/memory_scale.py``'s bulk seeding (10,000 scopes,
a tenth of the store in one hot user's visible scopes), then ``--events`` audit events spread over
the same scopes and the last 30 days, with real hash chains and the subject
index and daily counters ``append_event`` keeps, inserted in bulk. A
checkpoint of every chain and a verification run are made through the real
services.

Then it times each page with Django's test client, in process (so "server
time": URL routing, middleware, views, selectors, queries and templates; no
network), as three people: ``admin`` (the platform), an auditor of the hot
tenant ``bench:*:*`` and a viewer of one cold user ``t005:u3:*``. The audit
explorer is timed on its first page and deep in its pages (``?before=`` a
sequence near the oldest event), with and without filters. Pages another
engineer has not built yet are skipped with a note. Prints p50 and p95 in ms
per page; the target is p95 under 150 ms.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import memory_scale  # noqa: E402  (a sibling script: its bulk seeding of records)

EVENT_TYPES = (
    "episode.ingested",
    "memory.record_created",
    "memory.recall",
    "memory.context_injected",
    "memory.record_promoted",
)
ACTORS = ("user", "agent", "system", "rita")
BATCH = 20_000


def seed_events(count: int, scopes: list[str], *, rng: random.Random) -> None:
    """``count`` audit events with valid chains, plus the subject index and daily counters."""
    from django.db import connection, transaction

    from aetnaweb.scopes import Scope
    from audit.canonical import canonical_json
    from audit.chain import compute_event_hash

    hot = [name for name, _ in memory_scale.HOT_SPLIT]
    hot_weights = [share for _, share in memory_scale.HOT_SPLIT]
    cold = [s for s in scopes if s not in hot]
    heads: dict[str, str] = {}
    counts: dict[str, int] = defaultdict(int)
    last_at: dict[str, tuple[int, str]] = {}
    daily: dict[tuple[str, str], int] = defaultdict(int)
    start = datetime.now(UTC) - timedelta(days=29, hours=12)
    step = timedelta(days=29) / max(1, count)
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(sequence), 0) FROM audit_log")
        sequence = cursor.fetchone()[0]
    remaining = count
    index = 0
    while remaining:
        size = min(BATCH, remaining)
        rows = []
        for _ in range(size):
            if rng.random() < memory_scale.HOT_SHARE:
                subject = rng.choices(hot, hot_weights)[0]
            else:
                subject = cold[rng.randrange(len(cold))]
            sequence += 1
            created = (start + step * index).isoformat()
            payload = {"query_sha256": hashlib.sha256(str(index).encode()).hexdigest()}
            fields = {
                "event_id": "aud_" + uuid.UUID(int=rng.getrandbits(128)).hex,
                "subject_id": subject,
                "event_type": EVENT_TYPES[index % len(EVENT_TYPES)],
                "created_at": created,
                "actor": ACTORS[index % len(ACTORS)],
                "session_id": f"ses-{index // 40}" if index % 3 else None,
                "turn_id": None,
                "record_id": f"mem_{index:032x}" if index % 2 else None,
                "payload": payload,
                "prev_hash": heads.get(subject),
            }
            event_hash = compute_event_hash(**fields)
            heads[subject] = event_hash
            counts[subject] += 1
            last_at[subject] = (sequence, created)
            daily[(subject, created[:10])] += 1
            rows.append(
                (
                    sequence, fields["event_id"], subject, fields["event_type"], created,
                    fields["actor"], fields["session_id"], None, fields["record_id"],
                    canonical_json(payload), fields["prev_hash"], event_hash,
                )
            )  # fmt: skip
            index += 1
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO audit_log (sequence, event_id, subject_id, event_type, created_at,"
                " actor, session_id, turn_id, record_id, payload, prev_hash, event_hash)"
                " VALUES (" + ", ".join(["%s"] * 12) + ")",
                rows,
            )
        remaining -= size
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(
            'INSERT INTO audit_subject (subject_id, tenant, "user", project, event_count,'
            " head_sequence, head_hash, last_event_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    subject,
                    *Scope.parse(subject).segments,
                    counts[subject],
                    last_at[subject][0],
                    heads[subject],
                    last_at[subject][1],
                )
                for subject in heads
            ],
        )
        cursor.executemany(
            "INSERT INTO audit_daily_count (subject_id, day, event_count) VALUES (%s, %s, %s)",
            [(subject, day, n) for (subject, day), n in daily.items()],
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def people() -> dict[str, object]:
    """The three signed-in people pages are timed as (created once, through the grant service)."""
    from django.contrib.auth import get_user_model

    from access.grants import grant_role
    from aetnaweb.access import SYSTEM

    wanted = {
        "admin": ("platform:*:*", "admin"),
        "hot-auditor": ("bench:*:*", "auditor"),
        "cold-viewer": ("t005:u3:*", "viewer"),
    }
    users = {}
    for username, (scope, role) in wanted.items():
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            user = get_user_model().objects.create_user(username=username, password=None)
            grant_role(principal=SYSTEM, user=user, scope=scope, role=role)
        users[username] = user
    return users


def evidence() -> None:
    """A checkpoint of every chain and a finished verification run, through the services."""
    from django.db import transaction

    from aetnaweb.access import SYSTEM
    from audit.models import Checkpoint, VerificationRun
    from audit.services import create_checkpoint, start_verification_run

    if not Checkpoint.objects.exists():
        create_checkpoint(principal=SYSTEM, actor="bench")
    if not VerificationRun.objects.exists():
        with transaction.atomic():
            run = start_verification_run(principal=SYSTEM, subject="t005:u3:*", started_by="bench")
        # It runs in a background thread after commit, as from the dashboard.
        deadline = time.monotonic() + 120
        while VerificationRun.objects.get(pk=run.pk).is_running and time.monotonic() < deadline:
            time.sleep(0.2)


def pages(deep_before: int) -> list[tuple[str, str, str]]:
    """(label, user, url) for every list page that exists, the audit explorer deep in its pages."""
    from django.urls import NoReverseMatch, reverse

    def url(name: str, *args: str) -> str | None:
        try:
            return reverse(name, args=args)
        except NoReverseMatch:
            print(f"  (skipped: no page named {name!r} yet)")
            return None

    deep = f"before={deep_before}"
    wanted = [
        ("overview", "admin", url("home")),
        ("overview", "hot-auditor", url("home")),
        ("overview", "cold-viewer", url("home")),
        ("audit explorer, page 1", "admin", url("audit:explorer")),
        ("audit explorer, deep", "admin", _q(url("audit:explorer"), deep)),
        ("audit explorer, type filter, deep", "admin",
         _q(url("audit:explorer"), f"event_type=memory.recall&{deep}")),
        ("audit explorer, tenant, page 1", "hot-auditor", _q(url("audit:explorer"), "scope=bench:*:*")),
        ("audit explorer, tenant, deep", "hot-auditor",
         _q(url("audit:explorer"), f"scope=bench:*:*&{deep}")),
        ("audit explorer, page 1", "cold-viewer", url("audit:explorer")),
        ("audit explorer, deep", "cold-viewer", _q(url("audit:explorer"), deep)),
        ("checkpoints", "admin", url("audit:checkpoints")),
        ("checkpoints", "hot-auditor", url("audit:checkpoints")),
        ("memory scopes", "admin", url("memory:scopes")),
        ("memory scope (platform)", "admin", url("memory:scope", "platform:*:*")),
        ("memory scope (hot tenant)", "hot-auditor", url("memory:scope", "bench:*:*")),
        ("memory scope (hot project)", "hot-auditor", url("memory:scope", "bench:hot:p0")),
        ("memory scope, status filter", "hot-auditor",
         _q(url("memory:scope", "bench:hot:p0"), "status=quarantined")),
        ("memory scope chain (hot project)", "hot-auditor", url("memory:chain", "bench:hot:p0")),
        ("review queue", "admin", url("memory:review")),
        ("review queue, warning filter", "admin", _q(url("memory:review"), "warning=warned")),
        # The top-bar search over memory: a word in many records, an absent one (the scan
        # reads every visible row), and as a viewer of one cold user.
        ("search, common word", "hot-auditor", _q(url("search"), "q=project")),
        ("search, absent word", "hot-auditor", _q(url("search"), "q=zzqx-none")),
        ("search, absent word", "admin", _q(url("search"), "q=zzqx-none")),
        ("search, common word", "cold-viewer", _q(url("search"), "q=project")),
        ("actions queue", "admin", url("actions:index")),
        ("actions attention", "admin", url("actions:attention")),
        ("actions history", "admin", url("actions:history")),
        ("API tokens", "admin", url("tokens:list")),
    ]  # fmt: skip
    return [(label, user, link) for label, user, link in wanted if link is not None]


def _q(url: str | None, query: str) -> str | None:
    return None if url is None else f"{url}?{query}"


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def time_pages(samples: int, deep_before: int) -> list[tuple[str, str, str, float, float, int]]:
    from django.test import Client

    users = people()
    clients = {}
    for name, user in users.items():
        clients[name] = Client()
        clients[name].force_login(user)
    results = []
    for label, user, url in pages(deep_before):
        client = clients[user]
        timings = []
        status = 0
        for n in range(samples + 3):  # three warm-up requests are not counted
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            status = response.status_code
            if n >= 3:
                timings.append(elapsed)
        results.append(
            (label, user, url, statistics.median(timings), percentile(timings, 0.95), status)
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument(
        "--dir", help="keep the database in this directory: seeded on first use, then reused"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database (prints its path)")
    args = parser.parse_args()

    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="aetnaweb-dash-"))
    directory.mkdir(parents=True, exist_ok=True)
    keep = args.keep or bool(args.dir)
    try:
        memory_scale.setup_django(directory)
        from django.db import connection

        from audit.models import AuditEvent
        from memory.models import Record

        scopes = memory_scale.scope_list()
        started = time.perf_counter()
        have_records = Record.objects.count()
        if have_records < args.records:
            last = Record.objects.order_by("-id").values_list("id", flat=True).first() or 0
            memory_scale.seed(
                args.records - have_records,
                hot_count=max(
                    0,
                    min(args.records, int(args.records * memory_scale.HOT_SHARE))
                    - memory_scale.hot_visible_records(),
                ),
                start_id=last + 1,
                corpus=memory_scale.Corpus(seed=1),
                scopes=scopes,
            )
        if not AuditEvent.objects.exists():
            seed_events(args.events, scopes, rng=random.Random(11))
        evidence()
        seeded = time.perf_counter() - started
        with connection.cursor() as cursor:
            cursor.execute("SELECT MIN(sequence), MAX(sequence), COUNT(*) FROM audit_log")
            first, last, total = cursor.fetchone()
        print(
            f"dashboard benchmark, SQLite {sqlite3.sqlite_version}: {Record.objects.count():,} "
            f"records, {total:,} audit events in {len(scopes):,} scopes (seeded in {seeded:.0f} s)"
        )
        deep_before = first + 500  # ~99.95% of the way down the explorer's pages
        results = time_pages(args.samples, deep_before)
        width = max(len(label) for label, *_ in results)
        header = f"{'page':<{width}}  {'as':<11} {'p50 ms':>7} {'p95 ms':>7}  status"
        print(header)
        print("-" * len(header))
        for label, user, _url, p50, p95, status in results:
            flag = "" if p95 < 150 else "  over target"
            print(f"{label:<{width}}  {user:<11} {p50:>7.1f} {p95:>7.1f}  {status}{flag}")
        worst = max(p95 for *_, p95, _status in results)
        print(f"worst p95: {worst:.1f} ms (target: under 150 ms); {args.samples} samples per page")
        if keep:
            print(f"kept: {directory}")
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
