"""Event and daily-count visibility from the subject index, at any number of chains.

A grant on ``platform:*:*`` (or the system principal) needs no subject filter.
A narrower grant filters ``audit_subject`` by column equality: up to
``SUBJECT_LIST_MAX`` chains are then passed to the event query as a literal
list, more as a subquery (so no parameter limit is ever reached). Every
visibility test runs both ways (``path``), with the same answers.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from access.models import ScopeGrant
from aetnaweb import access
from aetnaweb.scopes import Scope
from audit import selectors
from audit.models import AuditDailyCount, AuditSubject
from tests.audit.conftest import append, tamper
from tests.factories import make_operator

pytestmark = pytest.mark.django_db

SYSTEM = access.system_principal()
TODAY = datetime.now(UTC).date()
SUBJECTS = (
    "platform:*:*",
    "acme:*:*",
    "acme:alice:*",
    "acme:alice:proj",
    "acme:bob:proj",
    "acmecorp:alice:proj",  # a prefix twin of acme
    "globex:carol:crm",
)


@pytest.fixture(autouse=True, params=["list", "subquery"])
def path(request, monkeypatch) -> str:
    """Run each test with visible chains passed as a list, then as a subquery."""
    if request.param == "subquery":
        monkeypatch.setattr(selectors, "SUBJECT_LIST_MAX", 1)
    return request.param


def principal(username: str, scope: str, role: str = "viewer") -> access.Principal:
    """An operator holding one grant, stored directly (the grant service would append an event)."""
    user = make_operator(username)
    ScopeGrant.objects.create(
        user=user,
        scope=scope,
        **{f"scope_{name}": value for name, value in Scope.parse(scope).columns().items()},
        role=role,
    )
    return access.operator_principal(user)


@pytest.fixture
def chains() -> dict[str, list[str]]:
    """Two events in each chain, appended in turn (so chains interleave)."""
    events: dict[str, list[str]] = {subject: [] for subject in SUBJECTS}
    for _ in range(2):
        for subject in SUBJECTS:
            events[subject].append(append(subject).event_id)
    return events


def all_ids(chosen: access.Principal, **filters) -> list[str]:
    """Every event a principal may list, walking the pages by key."""
    ids, before = [], None
    while True:
        page = selectors.list_events(chosen, before=before, limit=3, **filters)
        ids.extend(event.event_id for event in page.events)
        if page.next_before is None:
            return ids
        before = page.next_before


def test_a_platform_grant_sees_every_event_with_no_subject_filter(chains):
    # Given an operator granted the platform root
    root = principal("root", "platform:*:*")
    # When they list events
    with CaptureQueriesContext(connection) as queries:
        page = selectors.list_events(root, limit=500)
    # Then they see every chain's events, newest first, in one query with no subject filter
    assert {event.event_id for event in page.events} == {
        event_id for ids in chains.values() for event_id in ids
    }
    assert [e.sequence for e in page.events] == sorted(
        (e.sequence for e in page.events), reverse=True
    )
    assert len(queries) == 1
    assert "audit_subject" not in queries[0]["sql"]
    # And the same as the system principal, page by page
    assert all_ids(root) == all_ids(SYSTEM)


def test_a_tenant_grant_sees_its_tenant_and_ancestors_but_never_a_prefix_twin(chains, path):
    # Given a viewer of acme
    vera = principal("vera", "acme:*:*")
    # When they list every event
    with CaptureQueriesContext(connection) as queries:
        selectors.list_events(vera)
    seen = all_ids(vera)
    # Then they see acme's chains and the platform root (what a recall in acme reads)...
    expected = {"platform:*:*", "acme:*:*", "acme:alice:*", "acme:alice:proj", "acme:bob:proj"}
    assert sorted(seen) == sorted(event_id for s in expected for event_id in chains[s])
    # ...never acmecorp (a prefix twin) or globex
    assert not set(seen) & set(chains["acmecorp:alice:proj"] + chains["globex:carol:crm"])
    # And visibility costs one bounded look at the subject index and the page itself
    assert len(queries) == 2
    assert "LIMIT" in queries[0]["sql"] and "audit_subject" in queries[0]["sql"]
    events_sql = queries[1]["sql"]
    if path == "list":
        assert "'acme:alice:proj'" in events_sql and "audit_subject" not in events_sql
    else:
        assert "audit_subject" in events_sql and "'acme:alice:proj'" not in events_sql


def test_within_narrows_a_platform_grant_to_one_subtree_with_column_equality(chains):
    root = principal("root", "platform:*:*")
    assert sorted(all_ids(root, within="acme:alice:*")) == sorted(
        chains["acme:alice:*"] + chains["acme:alice:proj"]
    )
    # acmecorp:alice:proj shares the user and project names but not the tenant
    assert sorted(all_ids(root, within="acmecorp:*:*")) == sorted(chains["acmecorp:alice:proj"])
    # A tenant grant asking for another tenant's subtree gets nothing
    assert all_ids(principal("vera", "acme:*:*"), within="acmecorp:*:*") == []


def test_a_user_grant_sees_its_subtree_and_ancestors_only(chains):
    alice = principal("alice", "acme:alice:*")
    expected = {"platform:*:*", "acme:*:*", "acme:alice:*", "acme:alice:proj"}
    assert sorted(all_ids(alice)) == sorted(event_id for s in expected for event_id in chains[s])


def test_no_grant_sees_nothing_without_a_query(chains, django_assert_num_queries):
    nobody = access.operator_principal(make_operator("nobody"))
    with django_assert_num_queries(0):
        assert selectors.list_events(nobody).events == []
    with django_assert_num_queries(0):
        assert sum(n for _, n in selectors.daily_counts(nobody, today=TODAY)) == 0


def test_a_tampered_subject_index_row_cannot_widen_a_grant(chains):
    # Given an attacker relabels globex's index row with acme's columns
    tamper(
        "UPDATE audit_subject SET tenant = 'acme', \"user\" = 'carol' WHERE subject_id = %s",
        ["globex:carol:crm"],
    )
    vera = principal("vera", "acme:*:*")
    # Then acme's viewer still neither lists nor counts globex's events
    assert not set(all_ids(vera)) & set(chains["globex:carol:crm"])
    assert sum(n for _, n in selectors.daily_counts(vera, today=TODAY)) == 10


def test_a_malformed_subject_is_shown_only_to_those_who_see_every_chain(chains):
    # Given a row whose subject is not a valid scope (tampering)
    forged = append("acme:alice:proj")
    tamper("UPDATE audit_log SET subject_id = 'acme:*:proj' WHERE sequence = %s", [forged.sequence])
    tamper(
        'INSERT INTO audit_subject (subject_id, tenant, "user", project, event_count,'
        " head_sequence, head_hash, last_event_at) VALUES ('acme:*:proj', 'acme', '*', 'proj',"
        " 1, %s, %s, %s)",
        [forged.sequence, forged.event_hash, forged.created_at],
    )
    # Then the platform's reader and the system principal see it, acme's viewer does not
    assert forged.event_id in all_ids(principal("root", "platform:*:*"))
    assert forged.event_id in all_ids(SYSTEM)
    assert forged.event_id not in all_ids(principal("vera", "acme:*:*"))
    assert selectors.sees_every_chain(principal("otto", "platform:*:*", "auditor"), access.AUDIT)
    assert not selectors.sees_every_chain(principal("rex", "platform:*:*"), access.AUDIT)


def test_export_by_a_tenant_auditor_streams_its_chains_only(chains):
    auditor = principal("ada", "acme:*:*", "auditor")
    subjects = {line.split('"subject_id":"')[1].split('"')[0] for line in
                selectors.export_lines(auditor)}  # fmt: skip
    assert subjects == {"acme:*:*", "acme:alice:*", "acme:alice:proj", "acme:bob:proj"}


def many_chains(count: int, *, tenant: str = "big") -> list[str]:
    """``count`` chains in one tenant's subject index, each with a count today and yesterday."""
    subjects = [f"{tenant}:u{n // 100}:p{n % 100}" for n in range(count)]
    AuditSubject.objects.bulk_create(
        AuditSubject(
            subject_id=subject,
            **Scope.parse(subject).columns(),
            event_count=3,
            head_sequence=n + 1,
            head_hash="0" * 64,
            last_event_at=f"{TODAY.isoformat()}T00:00:00+00:00",
        )
        for n, subject in enumerate(subjects)
    )
    AuditDailyCount.objects.bulk_create(
        [AuditDailyCount(subject_id=s, day=TODAY, event_count=2) for s in subjects]
        + [AuditDailyCount(subject_id=s, day=TODAY - timedelta(days=1), event_count=1) for s in subjects]
    )  # fmt: skip
    return subjects


def test_daily_counts_with_many_chains_is_a_query_of_constant_size(chains):
    # Given 2,500 chains in one tenant (plus the small world of the fixture)
    many_chains(2_500)
    big = principal("bea", "big:*:*")
    # When its viewer, the platform and the system ask for the chart
    with CaptureQueriesContext(connection) as queries:
        counts = selectors.daily_counts(big, today=TODAY)
    # Then the sum is one query whose size does not grow with the chains (a subquery)
    assert len(queries) == 2 and len(queries[1]["sql"]) < 1_000
    assert "audit_subject" in queries[1]["sql"]
    # And the numbers are the tenant's (plus the platform root's two events today)
    assert counts[-1] == (TODAY, 2 * 2_500 + 2) and counts[-2][1] == 2_500
    everything = 2 * 2_500 + 2 * len(SUBJECTS)
    assert (
        selectors.daily_counts(principal("root", "platform:*:*"), today=TODAY)[-1][1] == everything
    )
    assert selectors.daily_counts(SYSTEM, today=TODAY)[-1][1] == everything


def test_daily_counts_accepts_any_number_of_named_subjects(chains):
    # Given chains and a caller naming 40,000 subjects (beyond SQLite's 32,766 parameters)
    subjects = many_chains(1_000)
    named = subjects + [f"none:u{n}:*" for n in range(39_000)]
    # When counts are asked for them
    counts = selectors.daily_counts(SYSTEM, subjects=named, today=TODAY)
    # Then every named chain is counted once (they are asked in chunks)
    assert counts[-1] == (TODAY, 2 * 1_000) and counts[-2] == (TODAY - timedelta(days=1), 1_000)
    # And visibility still applies to named subjects
    vera = principal("vera", "acme:*:*")
    assert selectors.daily_counts(vera, subjects=[*subjects, "acme:bob:proj"], today=TODAY)[-1] == (
        TODAY,
        2,
    )


def test_visible_subject_ids_is_none_only_when_nothing_needs_narrowing():
    root = principal("root", "platform:*:*")
    assert selectors.visible_subject_ids(SYSTEM) is None
    assert selectors.visible_subject_ids(root) is None
    assert selectors.visible_subject_ids(root, within="platform:*:*") is None
    assert selectors.visible_subject_ids(root, within="acme:*:*") is not None
    assert selectors.visible_subject_ids(principal("vera", "acme:*:*")) is not None
    with pytest.raises(selectors.AuditQueryError, match="scope"):
        selectors.visible_subject_ids(root, within="acme:alice")
