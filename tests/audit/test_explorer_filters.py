"""The audit explorer's filters (issue 13, loop 1): an invalid filter lists nothing,
event types are picked from counted types, actors ignore case, IDs match by prefix."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.urls import reverse

from aetnaweb.access import operator_principal as principal_for_user
from audit.models import AuditEvent, AuditTypeCount
from audit.selectors import event_type_counts, list_events
from tests.audit.conftest import append
from tests.factories import login_as, make_operator

URL = "audit:explorer"


def events_on_page(response) -> list[AuditEvent]:
    return [item["event"] for item in response.context["events"]]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params",
    [
        {"scope": "acme:alice"},
        {"event_type": "Memory Recall"},
        {"since": "2026-02-01T00:00", "until": "2026-01-01T00:00"},
        {"since": "not a date"},
    ],
)
def test_an_invalid_filter_lists_no_events(client, params):
    # Given visible events
    append("acme:alice:*", actor="rita")
    login_as(client, make_operator("vera", [("acme:alice:*", "viewer")]))
    # When the filter is invalid
    response = client.get(reverse(URL), params)
    # Then the error is shown and no row is listed (not the unfiltered list), nor a pager
    body = response.content.decode()
    assert response.status_code == 200
    assert events_on_page(response) == []
    assert "Fix the filters above to see events." in body
    assert 'class="event-seq"' not in body and "Older events" not in body


@pytest.mark.django_db
def test_the_event_type_picker_counts_visible_events_per_type(client):
    # Given events of two types in alice's chain and a third type in bob's
    for _ in range(3):
        append("acme:alice:*", event_type="memory.recall")
    append("acme:alice:web", event_type="memory.record_created")
    append("acme:bob:*", event_type="memory.forget")
    login_as(client, make_operator("vera", [("acme:alice:*", "viewer")]))
    # When alice's viewer opens the explorer
    body = client.get(reverse(URL)).content.decode()
    # Then the type is a picker of the types they may see, with their counts
    assert '<select name="event_type"' in body
    assert '<option value="memory.recall">memory.recall (3)</option>' in body
    assert '<option value="memory.record_created">memory.record_created (1)</option>' in body
    assert "memory.forget" not in body  # bob's type is not even named


@pytest.mark.django_db
def test_picking_a_type_keeps_it_selected_even_with_no_events(client):
    append("acme:alice:*", event_type="memory.recall")
    login_as(client, make_operator("vera", [("acme:alice:*", "viewer")]))
    response = client.get(reverse(URL), {"event_type": "memory.forget"})
    body = response.content.decode()
    assert '<option value="memory.forget" selected>memory.forget (0)</option>' in body
    assert events_on_page(response) == []


@pytest.mark.django_db
def test_type_counters_follow_every_append_and_the_migration_backfill_matches():
    # Given appends of several types to two chains
    for subject, event_type in [
        ("acme:alice:*", "memory.recall"),
        ("acme:alice:*", "memory.recall"),
        ("acme:alice:*", "memory.forget"),
        ("acme:bob:*", "memory.recall"),
    ]:
        append(subject, event_type=event_type)
    # Then the counters equal a GROUP BY over audit_log
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT subject_id, event_type, COUNT(*) FROM audit_log GROUP BY subject_id, event_type"
        )
        grouped = {(s, t): n for s, t, n in cursor.fetchall()}
    counters = {
        (row.subject_id, row.event_type): row.event_count for row in AuditTypeCount.objects.all()
    }
    assert (
        counters
        == grouped
        == {
            ("acme:alice:*", "memory.recall"): 2,
            ("acme:alice:*", "memory.forget"): 1,
            ("acme:bob:*", "memory.recall"): 1,
        }
    )
    # And the migration's backfill, run on a database without counters, rebuilds the same
    AuditTypeCount.objects.all().delete()
    migration = importlib.import_module("audit.migrations.0006_type_counts_and_actor_case")
    migration.count_existing_events(django_apps, None)
    rebuilt = {
        (row.subject_id, row.event_type): row.event_count for row in AuditTypeCount.objects.all()
    }
    assert rebuilt == grouped


@pytest.mark.django_db
def test_type_counts_never_include_chains_outside_the_grant(django_assert_max_num_queries):
    append("acme:alice:*", event_type="memory.recall")
    append("acme:alicex:*", event_type="memory.recall")  # prefix twin
    append("acme:bob:*", event_type="memory.forget")
    vera = principal_for_user(make_operator("vera", [("acme:alice:*", "viewer")]))
    nobody = principal_for_user(make_operator("nobody", []))
    with django_assert_max_num_queries(4):
        counts = event_type_counts(vera)
    # (making vera appended her grant's access.grant_added to alice's chain)
    assert counts == {"memory.recall": 1, "access.grant_added": 1}
    assert event_type_counts(nobody) == {}


@pytest.mark.django_db
@pytest.mark.parametrize("typed", ["rita", "Rita", "RITA", "rItA"])
def test_actor_matching_ignores_case(client, typed):
    append("acme:alice:*", actor="Rita")
    append("acme:alice:*", actor="rita")
    append("acme:alice:*", actor="ritab")
    login_as(client, make_operator("vera", [("acme:alice:*", "viewer")]))
    response = client.get(reverse(URL), {"actor": typed})
    assert sorted(e.actor for e in events_on_page(response)) == ["Rita", "rita"]


@pytest.mark.django_db
def test_record_and_session_ids_match_by_prefix_and_whole(client):
    # Given events about two records and two sessions
    first = "mem_" + "ab" * 16
    second = "mem_" + "ac" * 16
    append("acme:alice:*", record_id=first, session_id="sess-2026-alpha")
    append("acme:alice:*", record_id=second, session_id="sess-2026-beta")
    append("acme:alice:*", record_id=None, session_id=None)
    login_as(client, make_operator("vera", [("acme:alice:*", "viewer")]))

    def records(**params):
        return sorted(e.record_id for e in events_on_page(client.get(reverse(URL), params)))

    # Then a prefix finds every record starting with it, a whole ID only that one
    assert records(record_id="mem_a") == [first, second]
    assert records(record_id="mem_ab") == [first]
    assert records(record_id="MEM_AB") == [first]  # typed from a ticket in capitals
    assert records(record_id=first) == [first]
    assert records(record_id="mem_zz") == []
    sessions = events_on_page(client.get(reverse(URL), {"session_id": "sess-2026-b"}))
    assert [e.session_id for e in sessions] == ["sess-2026-beta"]


@pytest.mark.django_db
def test_a_prefix_is_not_a_pattern():
    # Given a record ID with LIKE wildcards in a value that shares no prefix with it
    append("acme:alice:*", record_id="mem_100%_sure")
    append("acme:alice:*", record_id="mem_1000")
    vera = principal_for_user(make_operator("vera", [("acme:alice:*", "viewer")]))
    # When the prefix holds % and _, they are matched literally
    page = list_events(vera, record_id="mem_100%")
    assert [e.record_id for e in page.events] == ["mem_100%_sure"]
    page = list_events(vera, record_id="mem_1_0")
    assert page.events == []


@pytest.mark.django_db
def test_filtered_explorer_query_bound(client, django_assert_max_num_queries):
    for n in range(30):
        append("acme:alice:*", actor="Rita", record_id=f"mem_{n:032x}")
    login_as(client, make_operator("vera", [("acme:alice:*", "viewer")]))
    with django_assert_max_num_queries(13):
        response = client.get(reverse(URL), {"actor": "RITA", "record_id": "mem_0"})
    assert len(events_on_page(response)) == 30
