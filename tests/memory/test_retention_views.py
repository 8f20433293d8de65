"""Memory retention on the Maintenance page (issue 32 item 3): policies, the preview, the run's
receipts; admins of the subtree only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from aetnaweb import retention
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import services
from memory.models import Record, RetentionPolicy
from memory.services.holds import set_legal_hold
from memory.services.retention import set_retention_policy
from tests.factories import login_as, make_operator

pytestmark = pytest.mark.django_db

ALICE = "acme:alice:*"
APOLLO = "acme:alice:apollo"
URL = "maintenance:memory_retention"


def old_record(scope: str = APOLLO, days: int = 10, slot: str = "role") -> str:
    result = services.remember(principal=SYSTEM, scope=scope, text=f"My {slot} is pilot.")
    Record.objects.filter(record_id__in=result.record_ids).update(
        created_at=timezone.now() - timedelta(days=days)
    )
    return result.record_ids[0]


def test_an_admin_of_the_subtree_sets_sees_and_removes_a_policy(client):
    login_as(client, make_operator("alice-admin", grants=[(ALICE, "admin")]))
    old_record()
    response = client.post(
        reverse(URL), {"scope": ALICE, "target": "records", "keep_days": "5"}, follow=True
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Keeping records at acme:alice:* and below for 5 days." in page
    # The policy row: its keep, what the next run purges, when it last ran
    assert "<code>acme:alice:*</code>" in page and "5 days" in page
    assert "1 record, 0 stored messages" in page and "never" in page
    assert RetentionPolicy.objects.get().set_by == "alice-admin"
    client.post(reverse(URL), {"scope": ALICE, "target": "records", "remove": "1"})
    assert not RetentionPolicy.objects.exists()
    assert AuditEvent.objects.filter(event_type="memory.retention_policy_removed").count() == 1


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"scope": "acme", "target": "records", "keep_days": "5"}, "three segments"),
        ({"scope": ALICE, "target": "all", "keep_days": "5"}, "Select a valid choice"),
        ({"scope": ALICE, "target": "records", "keep_days": "0"}, "greater than or equal to 1"),
        ({"scope": ALICE, "target": "records"}, "Give the number of days"),
        ({"scope": ALICE, "target": "episodes", "remove": "1"}, "no retention policy"),
        ({"scope": "acme:bob:*", "target": "records", "keep_days": "5"}, "do not administer"),
    ],
)
def test_a_bad_form_is_a_form_error_and_writes_nothing(client, body, error):
    login_as(client, make_operator("alice-admin", grants=[(ALICE, "admin")]))
    before = AuditEvent.objects.count()
    response = client.post(reverse(URL), body)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert not RetentionPolicy.objects.exists() and AuditEvent.objects.count() == before


def test_anonymous_and_non_admins_are_turned_away(client):
    response = client.post(reverse(URL), {"scope": ALICE, "target": "records", "keep_days": "5"})
    assert response.status_code == 302 and "login" in response.url
    login_as(client, make_operator("rev", grants=[(ALICE, "reviewer")]))
    response = client.post(reverse(URL), {"scope": ALICE, "target": "records", "keep_days": "5"})
    assert response.status_code == 404
    assert not RetentionPolicy.objects.exists()


def test_a_sibling_admin_does_not_see_another_subtree_s_policy(client):
    set_retention_policy(scope=ALICE, target="episodes", keep_days=30, principal=SYSTEM)
    login_as(client, make_operator("bob-admin", grants=[("acme:bob:*", "admin")]))
    page = client.get(reverse("maintenance:index")).content.decode()
    assert "<code>acme:alice:*</code>" not in page and "No retention policy in the subtrees" in page


def test_the_run_page_lists_receipts_and_the_held_scopes(client):
    login_as(client, make_operator("root", grants=[("platform:*:*", "admin")]))
    old_record()
    held = old_record("acme:bob:x")
    set_retention_policy(scope="acme:*:*", target="records", keep_days=5, principal=SYSTEM)
    hold = set_legal_hold(scope="acme:bob:*", reference="CASE-1", principal=SYSTEM)
    page = client.get(reverse("maintenance:index")).content.decode()
    assert f"Legal hold <code>{hold.hold_id}</code> keeps <code>acme:bob:x</code>" in page
    job = retention.run_retention_now(principal=SYSTEM)
    detail = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    [event_id] = job.result["memory"]["receipts"]
    assert reverse("memory:receipt", args=[event_id]) in detail
    assert "Purged 1 lapsed record" in detail and f"<code>{hold.hold_id}</code> kept" in detail
    assert Record.objects.get(record_id=held).status == "active"
    receipt = client.get(reverse("memory:receipt", args=[event_id]))
    assert receipt.status_code == 200


def test_the_page_query_count_is_bounded_with_policies(client, django_assert_max_num_queries):
    login_as(client, make_operator("root", grants=[("platform:*:*", "admin")]))
    for scope in ("acme:a:*", "acme:b:*", "acme:c:*"):
        for slot in ("role", "team", "city", "editor", "shoe size"):
            old_record(scope.replace("*", "p"), slot=slot)
        set_retention_policy(scope=scope, target="records", keep_days=5, principal=SYSTEM)
    # Not one query per lapsed record: per policy, and per scope for its holds
    with django_assert_max_num_queries(30):
        assert client.get(reverse("maintenance:index")).status_code == 200
