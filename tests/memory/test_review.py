"""promote and reject (memory-engine.md "Promote and reject")."""

from __future__ import annotations

import json

import pytest

from aetnaweb.access import SYSTEM, AccessDenied
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from memory import search, services
from memory.errors import RecordNotFound, RecordStateError
from memory.models import Episode, Record

S = "acme:alice:proj"


def quarantined(text: str = "<webpage>My bank is Lakeside Bank.</webpage>", scope: str = S):
    result = services.remember(principal=SYSTEM, scope=scope, text=text)
    return result.record_ids[0], result.episode_id


@pytest.mark.django_db
def test_promote_activates_as_user_confirmed_and_supersedes_the_slot(principal_for):
    # Given an active fact and a quarantined claim for the same slot
    old = services.remember(principal=SYSTEM, scope=S, text="My bank is Hill Bank.").record_ids[0]
    record_id, _ = quarantined()
    reviewer = principal_for(("acme:*:*", "reviewer"))
    # When a reviewer promotes the claim
    result = services.promote(
        scope=S, record_id=record_id, reason="user confirmed", principal=reviewer
    )
    # Then it is active, user_confirmed, in the index, and supersedes the old fact
    record = Record.objects.get(record_id=record_id)
    assert (record.status, record.trust_tier) == ("active", "user_confirmed")
    assert search.indexed_pks([record.pk]) == {record.pk}
    assert result.superseded_ids == (old,)
    assert Record.objects.get(record_id=old).superseded_by_id == record_id
    event = AuditEvent.objects.get(event_id=result.audit_event_id)
    assert (event.event_type, event.actor, event.record_id) == (
        "memory.record_promoted",
        reviewer.label,
        record_id,
    )
    assert "user confirmed" not in event.payload  # the reason is kept as a digest
    # And recall scores it with trust 0.9
    candidate = services.recall(principal=SYSTEM, scope=S, query="bank").candidates[0]
    assert candidate.record_id == record_id and candidate.parts["trust"] == 0.9


@pytest.mark.django_db
def test_reject_purges_like_forget_and_returns_a_receipt():
    record_id, episode_id = quarantined()
    receipt = services.reject(
        principal=SYSTEM, scope=S, record_id=record_id, reason="phishing page"
    )
    record = Record.objects.get(record_id=record_id)
    assert (record.status, record.content, record.fact_key) == ("tombstoned", "", "")
    assert Episode.objects.get(episode_id=episode_id).text == ""
    assert receipt["purged_record_ids"] == [record_id] and receipt["purged_episode_ids"] == [
        episode_id
    ]
    event = AuditEvent.objects.get(event_id=receipt["audit_event_id"])
    assert event.event_type == "memory.record_rejected"
    assert json.loads(event.payload)["purged_record_ids"] == [record_id]
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []


@pytest.mark.django_db
@pytest.mark.parametrize("verb", ["promote", "reject"])
def test_anything_but_a_quarantined_record_is_a_clear_error_that_writes_nothing(rows, verb):
    active = services.remember(principal=SYSTEM, scope=S, text="My bank is Hill Bank.").record_ids[
        0
    ]
    promoted, _ = quarantined("<webpage>My broker is Lake Trading.</webpage>")
    services.promote(principal=SYSTEM, scope=S, record_id=promoted)
    other_scope, _ = quarantined(scope="acme:bob:*")
    act = getattr(services, verb)
    before = rows()
    with pytest.raises(RecordStateError, match="already active"):
        act(principal=SYSTEM, scope=S, record_id=active)
    with pytest.raises(RecordStateError, match="someone may have promoted it"):
        act(principal=SYSTEM, scope=S, record_id=promoted)
    with pytest.raises(RecordNotFound):
        act(principal=SYSTEM, scope=S, record_id="mem_0123456789abcdef0123456789abcdef")
    with pytest.raises(RecordNotFound):
        act(principal=SYSTEM, scope=S, record_id=other_scope)
    with pytest.raises(RecordNotFound):
        act(
            principal=SYSTEM, scope="acme:alice:*", record_id=promoted
        )  # the ancestor is not its scope
    assert rows() == before


@pytest.mark.django_db
def test_a_rejected_record_cannot_be_promoted_afterwards(rows):
    record_id, _ = quarantined()
    services.reject(principal=SYSTEM, scope=S, record_id=record_id)
    before = rows()
    with pytest.raises(RecordStateError, match="rejected or forgotten"):
        services.promote(principal=SYSTEM, scope=S, record_id=record_id)
    assert rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize("verb", ["promote", "reject"])
def test_review_needs_the_review_capability_in_the_subtree(rows, principal_for, verb):
    record_id, _ = quarantined()
    viewer = principal_for("acme:alice:*", role="viewer")
    sibling = principal_for(("acme:bob:*", "reviewer"))
    child_only = principal_for(("acme:alice:other", "reviewer"))
    twin = principal_for(("acme:alic:*", "reviewer"))
    before = rows()
    for principal in (viewer, sibling, child_only, twin):
        with pytest.raises(AccessDenied):
            getattr(services, verb)(scope=S, record_id=record_id, principal=principal)
    assert rows() == before
