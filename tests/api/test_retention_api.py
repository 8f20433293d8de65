"""Retention policies and expires_at over HTTP (issue 32 item 3)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from memory.models import Record, RetentionPolicy

ALICE = "acme:alice:*"
APOLLO = "acme:alice:apollo"


@pytest.mark.django_db
def test_remember_takes_expires_at_and_refuses_a_past_or_zoneless_one(make_api):
    api = make_api(ALICE, ["read", "write"])
    later = (timezone.now() + timedelta(days=2)).isoformat()
    stored = api.post(
        "/memory/remember", {"scope": APOLLO, "text": "My room is 101.", "expires_at": later}
    )
    assert stored.status_code == 201, stored.data
    fact = api.post(
        "/memory/remember",
        {"scope": APOLLO, "key": "door code", "value": "4711", "expires_at": later},
    )
    assert fact.status_code == 201
    assert Record.objects.filter(expires_at__isnull=False).count() == 2
    before = (Record.objects.count(), AuditEvent.objects.count())
    for value in ((timezone.now() - timedelta(days=1)).isoformat(), "2999-01-01T00:00:00"):
        refused = api.post(
            "/memory/remember", {"scope": APOLLO, "text": "My desk is 7.", "expires_at": value}
        )
        assert refused.status_code == 400, refused.data
        assert refused.data["field"] == "expires_at"
    assert (Record.objects.count(), AuditEvent.objects.count()) == before


@pytest.mark.django_db
def test_a_full_token_sets_lists_and_removes_a_policy(make_api):
    api = make_api(ALICE)
    made = api.post(
        "/memory/retention-policies", {"scope": ALICE, "target": "episodes", "keep_days": 30}
    )
    assert made.status_code == 201, made.data
    assert made.data["keep_days"] == 30 and made.data["policy_id"].startswith("ret_")
    listed = api.get("/memory/retention-policies", {"scope": APOLLO})
    assert [(p["scope"], p["target"], p["last_run_at"]) for p in listed.data["items"]] == [
        (ALICE, "episodes", None)
    ]
    removed = api.post("/memory/retention-policies/remove", {"scope": ALICE, "target": "episodes"})
    assert removed.status_code == 200 and not RetentionPolicy.objects.exists()
    missing = api.post("/memory/retention-policies/remove", {"scope": ALICE, "target": "episodes"})
    assert missing.status_code == 400
    assert missing.data["error"] == "retention_policy_refused"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {"scope": ALICE, "target": "everything", "keep_days": 30},
        {"scope": ALICE, "target": "episodes", "keep_days": 0},
        {"scope": ALICE, "target": "episodes"},
        {"scope": "acme", "target": "episodes", "keep_days": 3},
    ],
)
def test_a_bad_policy_is_a_400_and_writes_nothing(make_api, body):
    api = make_api(ALICE)
    before = AuditEvent.objects.count()
    answer = api.post("/memory/retention-policies", body)
    assert answer.status_code in (400, 422), answer.data
    assert not RetentionPolicy.objects.exists() and AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_a_read_write_token_may_not_set_a_policy_and_another_subtree_is_out_of_reach(make_api):
    agent = make_api(ALICE, ["read", "write"])
    refused = agent.post(
        "/memory/retention-policies", {"scope": ALICE, "target": "records", "keep_days": 3}
    )
    assert refused.status_code in (403, 404), refused.data
    other = make_api("acme:bob:*")
    answer = other.post(
        "/memory/retention-policies", {"scope": ALICE, "target": "records", "keep_days": 3}
    )
    assert answer.status_code in (403, 404)
    assert not RetentionPolicy.objects.exists()
    assert (
        json.dumps(other.get("/memory/retention-policies", {"scope": ALICE}).data).count("ret_")
        == 0
    )


@pytest.mark.django_db
def test_batch_items_take_expires_at(make_api):
    api = make_api(ALICE, ["read", "write"])
    later = (timezone.now() + timedelta(days=2)).isoformat()
    answer = api.post(
        "/memory/remember/batch",
        {
            "scope": APOLLO,
            "items": [
                {"text": "My room is 101.", "expires_at": later},
                {"key": "door code", "value": "4711"},
            ],
        },
    )
    assert answer.status_code == 201, answer.data
    assert sorted(str(r.expires_at is not None) for r in Record.objects.filter(scope=APOLLO)) == [
        "False",
        "True",
    ]


@pytest.mark.django_db
def test_a_batch_item_with_a_past_expiry_refuses_the_whole_batch(make_api):
    api = make_api(ALICE, ["read", "write"])
    past = (timezone.now() - timedelta(days=2)).isoformat()
    answer = api.post(
        "/memory/remember/batch",
        {
            "scope": APOLLO,
            "items": [{"text": "My room is 101."}, {"text": "My desk is 7.", "expires_at": past}],
        },
    )
    assert answer.status_code == 400, answer.data
    assert answer.data["field"] == "items.1.expires_at"
    assert not Record.objects.exists()
