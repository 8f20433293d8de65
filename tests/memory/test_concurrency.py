"""Concurrent writers to one scope never fork its chain (audit-log-v1 "Appends ... serialized")."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.verification import verify_subject
from memory import services
from memory.models import Record, ScopeStats

S = "acme:alice:proj"
WRITERS = 4
PER_WRITER = 8


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_concurrent_remembers_in_one_scope_never_fork_the_chain():
    # Given several writers remembering into one scope at once, all on one slot
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def writer(n: int) -> None:
        try:
            start.wait()
            for i in range(PER_WRITER):
                services.remember(principal=SYSTEM, scope=S, text=f"My shift is number {n}-{i}.")
                services.recall(principal=SYSTEM, scope=S, query="shift")
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    # Then the chain is one line: no two events share a predecessor, and it verifies
    events = list(AuditEvent.objects.filter(subject_id=S).order_by("sequence"))
    prevs = [e.prev_hash for e in events]
    assert len(prevs) == len(set(prevs))
    assert prevs[0] is None and all(p is not None for p in prevs[1:])
    report = verify_subject(S, principal=SYSTEM)
    assert report.ok and report.events_checked == len(events)
    # And supersession was serialized too: exactly one active value for the slot
    total = WRITERS * PER_WRITER
    assert Record.objects.filter(fact_key="shift", status="active").count() == 1
    assert Record.objects.filter(fact_key="shift", status="superseded").count() == total - 1
    stats = ScopeStats.objects.get(scope=S)
    assert (stats.active, stats.superseded, stats.episodes) == (1, total - 1, total)
