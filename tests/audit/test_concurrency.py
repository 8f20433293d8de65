"""Several OS processes append to the same chains at once: no fork, exact counts.

Each worker is a separate Python process running Django against the test
database (``DATABASE_URL`` pointing at it), so the serialization under test is
the database's (SQLite's ``BEGIN IMMEDIATE`` write lock, PostgreSQL's
tree and per-subject advisory locks), not anything in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection
from django.db.models import Sum

from aetnaweb.access import SYSTEM
from audit.models import AuditDailyCount, AuditEvent, AuditSubject
from audit.verification import verify_all

ROOT = Path(__file__).resolve().parents[2]
SUBJECTS = ["acme:alice:proj", "acme:*:*", "zeta:bob:x"]
WORKERS = 4
APPENDS = 40

WORKER = """
import os, sys, time
from pathlib import Path
import django
django.setup()
from django.db import transaction
from audit.models import AuditEvent
from audit.services import append_event

index, appends, directory = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
subjects = sys.argv[4:]
(directory / f"ready-{index}").touch()
while not (directory / "go").exists():
    time.sleep(0.005)
for n in range(appends):
    with transaction.atomic():
        # like a service: read something first, then append in the same transaction
        AuditEvent.objects.filter(subject_id=subjects[0]).exists()
        append_event(
            subject=subjects[(index + n) % len(subjects)],
            event_type="agent.concurrent_append",
            actor=f"worker-{index}",
            payload={"worker": index, "n": n},
        )
"""


def database_url() -> str:
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    auth = f"{quote(settings['USER'])}:{quote(settings['PASSWORD'])}@" if settings["USER"] else ""
    return f"postgres://{auth}{settings['HOST'] or 'localhost'}:{settings['PORT'] or 5432}/{settings['NAME']}"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_writer_processes_never_fork_a_chain(tmp_path):
    # Given worker processes started against the test database, waiting at a barrier
    env = os.environ | {
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "aetnaweb.settings",
        "PYTHONPATH": str(ROOT),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(i), str(APPENDS), str(tmp_path), *SUBJECTS],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WORKERS)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < WORKERS:
        assert time.monotonic() < deadline, "workers did not start"
        assert all(w.poll() is None for w in workers), [w.communicate() for w in workers]
        time.sleep(0.05)
    # When they are released together
    (tmp_path / "go").touch()
    for worker in workers:
        _, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr
    # Then every chain verifies and nothing was lost or duplicated
    total = WORKERS * APPENDS
    report = verify_all(principal=SYSTEM)
    assert report.ok, [r.failure_lines() for r in report.failed]
    assert report.events_checked == AuditEvent.objects.count() == total
    per_subject = {r.subject_id: r.events_checked for r in report.subjects}
    assert sum(per_subject.values()) == total and set(per_subject) == set(SUBJECTS)
    for worker_index in range(WORKERS):
        mine = AuditEvent.objects.filter(actor=f"worker-{worker_index}")
        assert mine.count() == APPENDS
    # And the bookkeeping kept in the same transactions is exact too
    for subject in AuditSubject.objects.all():
        head = (
            AuditEvent.objects.filter(subject_id=subject.subject_id).order_by("-sequence").first()
        )
        assert subject.event_count == per_subject[subject.subject_id]
        assert (subject.head_sequence, subject.head_hash) == (head.sequence, head.event_hash)
    assert AuditDailyCount.objects.aggregate(n=Sum("event_count"))["n"] == total
    # And the global Merkle log took every event once, in sequence order (the tree
    # lock is taken before the row gets its sequence), and verifies against audit_log
    from audit import merkle, tree
    from audit.models import AuditTreeLeaf

    tree.integrate()  # the last partial batch

    leaf_sequences = list(
        AuditTreeLeaf.objects.order_by("leaf_index").values_list("sequence", flat=True)
    )
    assert leaf_sequences == list(
        AuditEvent.objects.order_by("sequence").values_list("sequence", flat=True)
    )
    assert tree.verify_log() == []
    hashes = AuditEvent.objects.order_by("sequence").values_list("event_hash", flat=True)
    assert tree.root_at(total) == merkle.root_of_leaves([merkle.event_leaf_hash(h) for h in hashes])
