"""Fixtures for the memory engine tests: row snapshots, principals, the index."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from aetnaweb.access import operator_principal
from audit.models import AuditEvent
from memory import search, vector_cells, vectors
from memory.models import (
    DeletionReceipt,
    Episode,
    ForgetBundle,
    Record,
    RecordAuditLink,
    RetrievalEvent,
    RetrievalHit,
    ScopeStats,
)
from tests.factories import make_operator

ROW_MODELS = (
    Episode,
    Record,
    RetrievalEvent,
    RetrievalHit,
    RecordAuditLink,
    DeletionReceipt,
    ForgetBundle,
    ScopeStats,
    AuditEvent,
)


def snapshot() -> dict[str, Any]:
    """Every row the engine may write, counted, plus the full-text index and the counters."""
    counts: dict[str, Any] = {model.__name__: model.objects.count() for model in ROW_MODELS}
    counts["fts"] = search.index_size()
    counts["vectors"] = vectors.index_size()
    counts["stats"] = sorted(
        ScopeStats.objects.values_list(
            "scope", "active", "quarantined", "superseded", "tombstoned", "episodes"
        )
    )
    counts["records"] = sorted(
        Record.objects.values_list("record_id", "status", "content", "fact_key", "trust_tier")
    )
    counts["episodes"] = sorted(Episode.objects.values_list("episode_id", "text"))
    return counts


@pytest.fixture
def rows():
    return snapshot


@pytest.fixture
def principal_for(db):
    """``principal_for("acme:alice:*", "reviewer")``: an operator principal with one grant."""
    made = {"n": 0}

    def make(*grants: tuple[str, str] | str, role: str = "viewer"):
        made["n"] += 1
        pairs = [(g, role) if isinstance(g, str) else g for g in grants]
        user = make_operator(f"mem-op-{made['n']}", grants=pairs)
        return operator_principal(user)

    return make


@pytest.fixture
def clean_index(transactional_db):
    """Transactional tests commit rows; Django's flush empties model tables only."""
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_record_fts")
        cursor.execute(f"DELETE FROM {vectors.TABLE}")
        if connection.vendor == "sqlite":
            cursor.execute(f"DELETE FROM {vector_cells.CELLS_TABLE}")


@pytest.fixture
def checkpoint() -> Callable[[], None]:
    """Copy the whole WAL into the SQLite file, waiting out other connections' readers.

    ``PRAGMA wal_checkpoint(TRUNCATE)`` reports "busy" instead of failing when
    another connection (an earlier test's thread, the backend's checkpoint
    thread) still reads an older snapshot; a test that then reads the file
    would see pages the WAL has already replaced.
    """

    def run() -> None:
        deadline = time.monotonic() + 10
        while True:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                busy = cursor.fetchone()[0]
            if not busy:
                return
            if time.monotonic() > deadline:
                pytest.fail("the WAL could not be checkpointed into the file within 10 s")
            time.sleep(0.05)

    return run
