"""The overview's daily activity per tenant (issue 33 item 5): series, window, reach, markup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from aetnaweb.access import SYSTEM, operator_principal
from aetnaweb.overview import ACTIVITY_SERIES, tenant_activity
from audit import selectors as audit_selectors
from audit.models import AuditDailyCount, AuditEvent
from audit.services import append_event
from tests.factories import login_as, make_operator

HOME = "/"


def event(subject: str, event_type: str, *, days_ago: int = 0) -> None:
    row = append_event(subject=subject, event_type=event_type, actor="system", payload={})
    if days_ago:
        # The chain's time is text (audit-log-v1); only the day matters here.
        moment = datetime.now(UTC) - timedelta(days=days_ago)
        AuditEvent.objects.filter(sequence=row.sequence).update(created_at=moment.isoformat())


def seed() -> None:
    for _ in range(3):
        event("acme:alice:*", "memory.record_created")
    event("acme:alice:*", "memory.record_quarantined")
    event("acme:alice:*", "memory.record_quarantined", days_ago=2)
    event("acme:alice:*", "memory.record_promoted")
    event("acme:alice:*", "memory.record_rejected", days_ago=2)
    event("acme:bob:*", "action.approved", days_ago=5)
    event("acme:alice:*", "memory.recall")
    event("acme:alice:*", "memory.forget")
    event("acme:alice:*", "memory.record_created", days_ago=45)  # outside the window
    event("globex:*:*", "memory.record_created")


def totals(activity) -> dict[str, int]:
    return {item.slug: item.chart.total for item in activity.charts}


@pytest.mark.django_db
def test_each_series_counts_its_events_per_day_in_the_window():
    # Given events of every kind in acme, one 45 days old, and some in globex
    seed()
    admin = operator_principal(make_operator("ada", [("platform:*:*", "admin")]))
    # When acme's activity is built
    activity = tenant_activity(admin, ["acme", "globex"], wanted="acme")
    # Then each chart counts its own event types, inside the last 30 days only
    assert activity.tenant == "acme"
    assert totals(activity) == {
        "writes": 3,
        "quarantined": 2,
        "decisions": 2,
        "approvals": 1,
        "recalls": 1,
        "forgets": 1,
    }
    assert [slug for slug, *_ in ACTIVITY_SERIES] == [item.slug for item in activity.charts]
    decisions = next(item.chart for item in activity.charts if item.slug == "decisions")
    assert len(decisions.bars) == 30
    assert decisions.bars[-1].value == 1 and decisions.bars[-3].value == 1


@pytest.mark.django_db
def test_the_counts_cover_only_chains_the_principal_may_read():
    seed()
    alice_only = operator_principal(make_operator("vic", [("acme:alice:*", "viewer")]))
    activity = tenant_activity(alice_only, ["acme"], wanted="acme")
    # bob's approval is in a sibling chain: not counted
    assert totals(activity)["approvals"] == 0
    assert totals(activity)["writes"] == 3
    # globex is not one of this person's tenants: acme is shown instead, flagged
    other = tenant_activity(alice_only, ["acme"], wanted="globex")
    assert other.tenant == "acme" and other.unknown == "globex"
    # and asking the selector for globex directly finds nothing
    counts = audit_selectors.daily_type_counts(
        alice_only, event_types=["memory.record_created"], tenant="globex"
    )
    assert sum(n for _, n in counts["memory.record_created"]) == 0


@pytest.mark.django_db
def test_the_overview_draws_a_chart_and_a_table_per_series(client, django_assert_max_num_queries):
    seed()
    login_as(client, make_operator("vic", [("acme:*:*", "viewer"), ("globex:*:*", "viewer")]))
    with django_assert_max_num_queries(22):
        response = client.get(HOME, {"tenant": "acme"})
    body = response.content.decode()
    assert response.status_code == 200
    assert "Activity in acme" in body
    for slug, title, *_ in ACTIVITY_SERIES:
        # each series: an SVG image named by its title, and the same numbers as a table
        assert f'aria-labelledby="activity-{slug}-title activity-{slug}-desc"' in body
        assert f'<title id="activity-{slug}-title">{title} per day in acme' in body
    assert body.count('<caption class="visually-hidden">') == 1 + len(ACTIVITY_SERIES)
    # the tenant switch marks the current one and links the other
    assert '<a href="?tenant=globex#tenant-activity-heading" >globex</a>' in body
    assert 'aria-current="page">acme</a>' in body


@pytest.mark.django_db
def test_an_unknown_tenant_in_the_query_says_so_and_shows_the_first(client):
    seed()
    login_as(client, make_operator("vic", [("acme:*:*", "viewer")]))
    body = client.get(HOME, {"tenant": "globex"}).content.decode()
    assert "None of your tenants is named “globex”; showing acme." in body
    assert "per day in globex" not in body


@pytest.mark.django_db
def test_the_query_reads_only_the_newest_rows_the_window_counters_account_for():
    # Given 40 recalls the daily counters place 60 days ago, then 3 recalls today
    for _ in range(40):
        event("acme:alice:*", "memory.recall")
    today = datetime.now(UTC).date()
    AuditDailyCount.objects.filter(subject_id="acme:alice:*", day=today).update(
        day=today - timedelta(days=60)
    )
    for _ in range(3):
        event("acme:alice:*", "memory.recall")
    # When the window is counted (the old rows' text times were left at today on purpose)
    counts = audit_selectors.daily_type_counts(SYSTEM, event_types=["memory.recall"], tenant="acme")
    # Then only the newest 3 rows were read: the range stops where the counters say the
    # window starts, so the query's cost follows the window, not the whole log
    assert sum(n for _, n in counts["memory.recall"]) == 3


@pytest.mark.django_db
def test_the_platform_tenant_counts_the_root_chain_only_for_its_readers():
    event("platform:*:*", "memory.record_created")
    event("acme:alice:*", "memory.record_created")
    reader = operator_principal(make_operator("vic", [("acme:alice:*", "viewer")]))
    counts = audit_selectors.daily_type_counts(
        reader, event_types=["memory.record_created"], tenant="platform"
    )
    # the root chain is an ancestor of vic's grant: readable, and only it is counted
    assert sum(n for _, n in counts["memory.record_created"]) == 1
    no_grant = operator_principal(make_operator("nobody"))
    empty = audit_selectors.daily_type_counts(
        no_grant, event_types=["memory.record_created"], tenant="platform"
    )
    assert sum(n for _, n in empty["memory.record_created"]) == 0
