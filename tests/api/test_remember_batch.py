"""Batch remember (memory/batch.py, POST /api/v1/memory/remember/batch): all or nothing."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import batch
from memory.models import Episode, Record

S = "acme:alice:proj"

pytestmark = pytest.mark.django_db
URL = "/memory/remember/batch"


def counts() -> tuple[int, int, int]:
    return Record.objects.count(), Episode.objects.count(), AuditEvent.objects.count()


def test_a_batch_stores_every_item_in_order_with_one_result_each(alice_api):
    # Given three items: two messages and an explicit fact
    body = {
        "scope": S,
        "items": [
            {"text": "My backup email is a@example.com.", "session_id": "s1"},
            {"text": "<webpage>The user's car is red.</webpage>"},
            {"key": "deploy window", "value": "Tuesdays 9-11"},
        ],
    }
    # When they are sent in one call
    response = alice_api.post(URL, body)
    # Then it is 201 (something was stored), one result per item, in order, each as
    # /remember would answer
    assert response.status_code == 201, response.data
    results = response.data["results"]
    assert len(results) == 3
    assert results[0]["trust_tier"] == "trusted_user"
    assert results[1]["trust_tier"] == "untrusted_content"
    assert all(r["status"] == "quarantined" for r in results[1]["records"])
    assert results[2]["records"][0]["fact_key"] == "deploy window"
    assert Record.objects.filter(record_id=results[0]["records"][0]["record_id"]).exists()


def test_a_bad_item_refuses_the_batch_naming_it_and_stores_nothing(alice_api):
    before = counts()
    body = {"scope": S, "items": [{"text": "My car is red."}, {"key": "k"}]}
    response = alice_api.post(URL, body)
    assert response.status_code == 400
    assert response.data["field"].startswith("items.1")
    assert counts() == before


def test_an_item_the_engine_refuses_rolls_back_the_items_before_it(alice_api, monkeypatch):
    # Given a second item the engine refuses after the first was stored
    real = batch.services.remember_fact

    def refuse(**kwargs):
        raise batch.MemoryEngineError("that key is not allowed")

    monkeypatch.setattr(batch.services, "remember_fact", refuse)
    before = counts()
    body = {"scope": S, "items": [{"text": "My car is red."}, {"key": "k", "value": "v"}]}
    # When the batch is sent
    response = alice_api.post(URL, body)
    # Then it is 400 naming the item, and the first item's record, episode and events are gone
    assert response.status_code == 400
    assert response.data["field"] == "items.1.value"
    assert "item 1" in response.data["detail"]
    assert counts() == before
    assert real is not None


def test_the_item_count_is_bounded(alice_api):
    before = counts()
    too_many = {"scope": S, "items": [{"text": f"note {i}"} for i in range(101)]}
    response = alice_api.post(URL, too_many)
    assert response.status_code == 400
    assert response.data["field"] == "items"
    assert alice_api.post(URL, {"scope": S, "items": []}).status_code == 400
    assert counts() == before


def test_a_batch_outside_the_token_is_404_and_without_write_is_403(make_api):
    reader = make_api("acme:alice:*", ["read"])
    body = {"scope": S, "items": [{"text": "My car is red."}]}
    assert reader.post(URL, body).status_code == 403
    writer = make_api("acme:alice:*", ["write"])
    assert writer.post(URL, {**body, "scope": "acme:bob:proj"}).status_code == 404
    assert Record.objects.count() == 0


@pytest.mark.django_db
def test_the_service_refuses_an_empty_or_oversized_batch():
    with pytest.raises(batch.MemoryEngineError):
        batch.remember_batch(principal=SYSTEM, scope=S, items=[])
    with pytest.raises(batch.MemoryEngineError):
        batch.remember_batch(principal=SYSTEM, scope=S, items=[batch.BatchItem(text="x")] * 101)
    assert counts() == (0, 0, 0)


def test_a_batch_that_stores_nothing_new_answers_200(alice_api):
    # Given a fact already stored
    item = {"key": "deploy window", "value": "Tuesdays 9-11"}
    assert alice_api.post(URL, {"scope": S, "items": [item]}).status_code == 201
    before = counts()
    # When a batch holds only that duplicate
    response = alice_api.post(URL, {"scope": S, "items": [item]})
    # Then it is 200 (nothing new stored), with its result saying so
    assert response.status_code == 200, response.data
    assert response.data["results"][0]["records"] == []
    assert counts()[0] == before[0]
