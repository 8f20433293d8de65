"""SQLite: remember's and recall's statements reach records through a selective index.

No statistics are ever gathered on a SQLite database (nothing runs ANALYZE),
so SQLite plans from the schema alone. A statement it answers by walking
every active record of the database (the ``(status, id)`` index) or the
whole table costs time in proportion to the whole store, not to what the
caller can see.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from aetnaweb.access import SYSTEM
from memory import services

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's planner"),
]

SCOPE = "acme:alice:proj"
# A walk of every active record, or a scan of the record table (aliased r in recall).
WHOLE_STORE = re.compile(r"mem_record_status_id \(status=\?\)|\bSCAN (memory_record|r)\b")


def _plans(captured: CaptureQueriesContext) -> dict[str, list[str]]:
    plans: dict[str, list[str]] = {}
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            plans[sql] = [row[3] for row in cursor.fetchall()]
    return plans


def _walks_the_store(plans: dict[str, list[str]]) -> list[str]:
    return [
        f"{sql[:120]} -> {step}"
        for sql, steps in plans.items()
        for step in steps
        if WHOLE_STORE.search(step)
    ]


def test_remember_and_recall_never_walk_every_active_record():
    # Given a few hundred records in other scopes and some in this one
    for n in range(40):
        services.remember_fact(
            principal=SYSTEM, scope=f"acme:user{n}:proj", key=f"fact {n}", value=f"value {n}"
        )
    services.remember(principal=SYSTEM, scope=SCOPE, text="I avoid beef at business dinners.")
    for n in range(20):  # a recall with many candidates checks many IDs at once
        services.remember_fact(
            principal=SYSTEM, scope=SCOPE, key=f"dinner {n}", value=f"dinners on day {n}"
        )
    # When a text and a fact are remembered and a recall runs
    with CaptureQueriesContext(connection) as captured:
        services.remember(principal=SYSTEM, scope=SCOPE, text="I commute by bicycle every day.")
        services.remember_fact(principal=SYSTEM, scope=SCOPE, key="airline", value="KLM")
        recalled = services.recall(
            principal=SYSTEM, scope=SCOPE, query="what do I eat at dinners?", limit=20
        )
    # Then every statement reaches records through a selective index
    assert len(recalled.record_ids) == 20
    plans = _plans(captured)
    assert any("content_digest" in sql for sql in plans)  # the duplicate check ran
    assert _walks_the_store(plans) == []
