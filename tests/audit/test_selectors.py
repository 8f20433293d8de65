"""Selectors: visibility by grant, key pagination, daily counts, streaming export."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from access.models import Role, ScopeGrant
from aetnaweb import access
from audit import selectors
from audit.canonical import canonical_json
from audit.models import AuditDailyCount, AuditEvent, Checkpoint, VerificationRun
from audit.selectors import AuditQueryError
from audit.services import create_checkpoint, start_verification_run
from audit.verification import COLUMNS
from tests.audit.conftest import append

pytestmark = pytest.mark.django_db

SYSTEM = access.system_principal()


def grant(user, scope, role):
    tenant, who, project = scope.split(":")
    ScopeGrant.objects.create(
        user=user,
        scope=scope,
        scope_tenant=tenant,
        scope_user=who,
        scope_project=project,
        role=role,
    )
    return access.operator_principal(user)


@pytest.fixture
def world():
    """Chains in two tenants, a prefix twin, and the root."""
    events = {}
    for subject in (
        "platform:*:*",
        "acme:*:*",
        "acme:alice:*",
        "acme:alice:proj",
        "acme:bob:proj",
        "acmecorp:alice:proj",
    ):
        events[subject] = append(subject, record_id=f"rec-{subject.split(':')[0]}")
    return events


def test_pages_newest_first_by_key_without_offset_or_count():
    events = [append("acme:alice:proj", payload={"n": n}) for n in range(7)]
    with CaptureQueriesContext(connection) as queries:
        first = selectors.list_events(SYSTEM, limit=3)
    assert [e.sequence for e in first.events] == [e.sequence for e in events[6:3:-1]]
    assert first.next_before == events[4].sequence and first.has_next
    second = selectors.list_events(SYSTEM, limit=3, before=first.next_before)
    assert [e.sequence for e in second.events] == [e.sequence for e in events[3:0:-1]]
    last = selectors.list_events(SYSTEM, limit=3, before=second.next_before)
    assert [e.sequence for e in last.events] == [events[0].sequence]
    assert last.next_before is None and not last.has_next
    sql = " ".join(q["sql"].upper() for q in queries.captured_queries)
    assert "OFFSET" not in sql and "COUNT(" not in sql
    assert len(queries.captured_queries) == 1


def test_filters_combine():
    append("acme:alice:proj", event_type="memory.recall", actor="alice", session_id="s1")
    target = append(
        "acme:alice:proj",
        event_type="memory.forget",
        actor="alice",
        session_id="s1",
        record_id="r1",
    )
    append("acme:alice:proj", event_type="memory.forget", actor="bob", session_id="s2")
    append(
        "acme:bob:proj", event_type="memory.forget", actor="alice", session_id="s1", record_id="r1"
    )
    page = selectors.list_events(
        SYSTEM,
        subject="acme:alice:proj",
        event_type="memory.forget",
        actor="alice",
        session_id="s1",
        record_id="r1",
    )
    assert [e.event_id for e in page.events] == [target.event_id]
    within = selectors.list_events(
        SYSTEM, within="acme:*:*", actor="alice", event_type="memory.forget"
    )
    assert {e.subject_id for e in within.events} == {"acme:alice:proj", "acme:bob:proj"}


def test_created_at_range_is_inclusive_then_exclusive():
    events = [append("acme:alice:proj") for _ in range(3)]
    middle = datetime.fromisoformat(events[1].created_at)
    page = selectors.list_events(
        SYSTEM, created_from=middle, created_before=middle + timedelta(microseconds=1)
    )
    assert [e.event_id for e in page.events] == [events[1].event_id]
    naive = middle.astimezone(UTC).replace(tzinfo=None).isoformat()
    assert (
        selectors.list_events(SYSTEM, created_from=naive).events[-1].event_id == events[1].event_id
    )
    future = datetime.now(UTC) + timedelta(days=1)
    assert selectors.list_events(SYSTEM, created_from=future).events == []
    with pytest.raises(AuditQueryError, match="created_from is not an ISO-8601"):
        selectors.list_events(SYSTEM, created_from="yesterday")


def test_bad_arguments_are_query_errors():
    with pytest.raises(AuditQueryError, match="subject"):
        selectors.list_events(SYSTEM, subject="acme:alice")
    with pytest.raises(AuditQueryError, match="limit"):
        selectors.list_events(SYSTEM, limit=0)


def test_an_operator_sees_their_subtree_and_its_ancestors_only(
    operator, world, django_assert_max_num_queries
):
    principal = grant(operator, "acme:alice:*", Role.VIEWER)
    expected = {"platform:*:*", "acme:*:*", "acme:alice:*", "acme:alice:proj"}
    assert set(selectors.subjects_visible(principal)) == expected
    with django_assert_max_num_queries(2):
        page = selectors.list_events(principal)
    assert {e.subject_id for e in page.events} == expected
    # siblings and prefix twins are out of reach (404 upstream)
    with pytest.raises(access.AccessDenied):
        selectors.list_events(principal, subject="acme:bob:proj")
    with pytest.raises(AuditEvent.DoesNotExist):
        selectors.get_event(principal, world["acmecorp:alice:proj"].event_id)
    assert (
        selectors.get_event(principal, world["acme:alice:proj"].event_id).subject_id
        == "acme:alice:proj"
    )
    assert selectors.list_events(principal, within="acme:bob:*").events == []
    assert [e.subject_id for e in selectors.events_for_record(principal, "rec-acme")] == [
        "acme:*:*",
        "acme:alice:*",
        "acme:alice:proj",
    ]
    assert selectors.events_for_record(principal, "rec-acmecorp") == []


def test_an_operator_without_grants_sees_nothing(operator, world):
    principal = access.operator_principal(operator)
    assert selectors.subjects_visible(principal) == []
    assert selectors.list_events(principal).events == []


def test_chain_events_reads_one_chain_in_order(world):
    more = append("acme:alice:proj")
    events = selectors.chain_events(SYSTEM, "acme:alice:proj")
    assert [e.sequence for e in events] == [world["acme:alice:proj"].sequence, more.sequence]
    assert selectors.chain_events(SYSTEM, "acme:alice:proj", after=more.sequence) == []


def test_daily_counts_cover_the_window_with_zeros(operator):
    for _ in range(3):
        append("acme:alice:proj")
    append("zeta:*:*")
    today = datetime.now(UTC).date()
    AuditDailyCount.objects.create(
        subject_id="acme:alice:proj", day=today - timedelta(days=2), event_count=5
    )
    AuditDailyCount.objects.create(
        subject_id="acme:alice:proj", day=today - timedelta(days=40), event_count=9
    )
    counts = selectors.daily_counts(SYSTEM, days=30, today=today)
    assert len(counts) == 30 and counts[0][0] == today - timedelta(days=29)
    assert counts[-1] == (today, 4) and counts[-3] == (today - timedelta(days=2), 5)
    assert sum(n for _, n in counts) == 9
    assert selectors.daily_counts(SYSTEM, subjects=["zeta:*:*"], today=today)[-1] == (today, 1)
    principal = grant(operator, "acme:*:*", Role.VIEWER)
    assert selectors.daily_counts(principal, today=today)[-1] == (today, 3)
    assert selectors.daily_counts(principal, subjects=["zeta:*:*"], today=today)[-1] == (today, 0)
    assert isinstance(counts[0][0], date)


def test_export_streams_every_column_as_canonical_json_lines(monkeypatch):
    monkeypatch.setattr(selectors, "EXPORT_CHUNK", 2)
    events = [append("acme:alice:proj", payload={"n": n, "é": "x"}) for n in range(5)]
    append("zeta:*:*")
    lines = list(selectors.export_lines(SYSTEM, subject="acme:alice:proj"))
    assert len(lines) == 5 and all(line.endswith("\n") for line in lines)
    rows = [json.loads(line) for line in lines]
    assert [r["sequence"] for r in rows] == [e.sequence for e in events]
    assert list(rows[0]) == sorted(COLUMNS)
    stored = AuditEvent.objects.get(pk=events[0].pk)
    assert rows[0] == {c: getattr(stored, c) for c in COLUMNS}
    assert lines[0] == canonical_json(rows[0]) + "\n"
    assert len(list(selectors.export_lines(SYSTEM))) == 6


def test_export_checks_access_before_streaming(operator, world):
    principal = grant(operator, "acme:alice:*", Role.AUDITOR)
    with pytest.raises(access.AccessDenied):
        selectors.export_lines(principal, subject="acme:*:*")  # readable, not auditable
    subjects = {json.loads(line)["subject_id"] for line in selectors.export_lines(principal)}
    assert subjects == {"acme:alice:*", "acme:alice:proj"}
    viewer = grant(operator.__class__.objects.create_user("v"), "acme:*:*", Role.VIEWER)
    assert list(selectors.export_lines(viewer)) == []


def test_runs_and_checkpoints_are_visible_to_auditors_of_their_scope(operator, world):
    principal = grant(operator, "acme:*:*", Role.AUDITOR)
    mine = start_verification_run(principal=SYSTEM, subject="acme:alice:*", started_by="a")
    everything = start_verification_run(principal=SYSTEM, started_by="a")
    theirs = start_verification_run(principal=SYSTEM, subject="acmecorp:*:*", started_by="a")
    assert selectors.get_verification_run(principal, mine.pk) == mine
    for hidden in (everything, theirs):
        with pytest.raises(VerificationRun.DoesNotExist):
            selectors.get_verification_run(principal, hidden.pk)
    assert selectors.recent_verification_runs(principal) == [mine]
    assert len(selectors.recent_verification_runs(SYSTEM)) == 3
    full = create_checkpoint(principal=SYSTEM, actor="system")
    assert selectors.latest_checkpoint(principal) is None
    own = create_checkpoint(actor="auditor", principal=principal)
    found = selectors.latest_checkpoint(principal)
    assert found is not None and found.checkpoint_sha256 == own["checkpoint_sha256"]
    full_row = Checkpoint.objects.get(checkpoint_sha256=full["checkpoint_sha256"])
    with pytest.raises(Checkpoint.DoesNotExist):
        selectors.get_checkpoint(principal, full_row.pk)
    assert set(selectors.checkpoint_subjects(full_row)) == set(world)
