"""Record metadata through the client package and the LangGraph store, against the live server."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from aetnaweb_client import AsyncClient, BadRequest
from aetnaweb_client.langgraph_store import AetnawebStore, value_metadata

from memory.models import Record
from tests.api.conftest import issue_token
from tests.client.conftest import SCOPE

pytestmark = pytest.mark.django_db(transaction=True)

NS = ("acme", "alice", "proj")


def test_client_stores_returns_and_filters_typed_metadata(alice):
    # Given two records whose customer_id differ only in type
    number = alice.remember(
        SCOPE,
        "I reviewed the launch codename plan orion.",
        force=True,
        metadata={"customer_id": 42},
    )["records"][0]
    text = alice.remember(
        SCOPE,
        "I reviewed the launch codename plan vega.",
        force=True,
        metadata={"customer_id": "42"},
    )["records"][0]
    assert number["metadata"] == {"customer_id": 42}
    # When the client lists, iterates and recalls with a metadata filter
    listed = alice.list_records(SCOPE, metadata={"customer_id": 42})["items"]
    iterated = list(alice.iter_records(SCOPE, page_size=1, metadata={"customer_id": "42"}))
    recalled = alice.recall(SCOPE, "launch codename plan", metadata={"customer_id": 42})
    block = alice.recall_block(
        SCOPE, "launch codename plan orion", min_score=0, metadata={"customer_id": "42"}
    )
    # Then each answer holds exactly the typed match, metadata included
    assert [r["record_id"] for r in listed] == [number["record_id"]]
    assert listed[0]["metadata"] == {"customer_id": 42}
    assert [r["record_id"] for r in iterated] == [text["record_id"]]
    assert [c["record_id"] for c in recalled["candidates"]] == [number["record_id"]]
    assert recalled["candidates"][0]["metadata"] == {"customer_id": 42}
    assert block["record_ids"] == [text["record_id"]]
    assert alice.get_record(number["record_id"])["record"]["metadata"] == {"customer_id": 42}


def test_bad_metadata_is_a_typed_error_naming_the_field_and_writes_nothing(alice):
    with pytest.raises(BadRequest) as bad:
        alice.remember(SCOPE, "My car is red.", metadata={"x": {"nested": 1}})
    assert (bad.value.code, bad.value.field) == ("metadata_error", "metadata.x")
    assert not Record.objects.exists()


def test_async_client_takes_metadata(server_url):
    token = issue_token("acme:alice:*")

    async def scenario() -> list[str]:
        async with AsyncClient(server_url, token=token) as mem:
            await mem.remember(SCOPE, "My shell is fish.", metadata={"team": "ops"})
            await mem.remember(SCOPE, "My editor is helix.", metadata={"team": "dev"})
            page = await mem.list_records(SCOPE, metadata={"team": "ops"})
            return [item["content"] for item in page["items"]]

    assert asyncio.run(scenario()) == ["User's shell is fish."]


def test_langgraph_values_become_metadata_and_search_filters_on_the_server(alice):
    store = AetnawebStore(alice)
    # Given values whose scalar fields become record metadata
    store.put(NS, "plan orion", {"customer_id": 42, "stage": "launch", "notes": ["a"]})
    store.put(NS, "plan vega", {"customer_id": "42", "stage": "launch"})
    for n in range(6):
        store.put(NS, f"plan nova {n}", {"customer_id": 7, "stage": "launch"})
    orion = Record.objects.get(scope=SCOPE, content__startswith="plan orion")
    assert orion.metadata == {"customer_id": 42, "stage": "launch"}
    # When searching with a filter and a limit smaller than the crowd
    found = store.search(NS, query="plan", filter={"customer_id": 42}, limit=1)
    listed = store.search(NS, filter={"customer_id": "42"}, limit=1)
    # Then the server ran the filter before the limit: the typed match comes back
    assert [(i.key, i.value["customer_id"]) for i in found] == [("plan orion", 42)]
    assert [(i.key, i.value["customer_id"]) for i in listed] == [("plan vega", "42")]


def test_value_metadata_keeps_what_the_engine_accepts():
    value = {"ok": 1, "Bad": 2, "nested": {"x": 1}, "big": 2**60, "f": 1.5, "none": None}
    assert value_metadata(value) == {"ok": 1, "f": 1.5, "none": None}
    many = {f"k{i}": i for i in range(40)}
    assert len(value_metadata(many)) == 32
    assert value_metadata({"a": "x" * 5000, "b": 1}) == {"b": 1}


def test_client_filters_with_operators_and_created_at(alice):
    # Given three tiers stored through the client
    ids = {
        tier: alice.remember(
            SCOPE, f"Launch plan orion for {tier}.", force=True, metadata={"tier": tier, "n": n}
        )["records"][0]["record_id"]
        for tier, n in (("gold", 9), ("silver", 5), ("bronze", 1))
    }
    since = datetime.now(UTC) - timedelta(hours=1)
    # When it lists, iterates and recalls with operators and a created_at range
    listed = alice.list_records(
        SCOPE,
        metadata={"tier": {"$in": ["gold", "silver"]}, "n": {"$lt": 9}},
        created_at={"$gte": since},
    )["items"]
    iterated = list(alice.iter_records(SCOPE, page_size=1, metadata={"tier": {"$ne": "gold"}}))
    recalled = alice.recall(
        SCOPE,
        "launch plan orion",
        min_confidence=0,
        limit=10,
        metadata={"n": {"$gte": 5}},
        created_at={"$gte": since},
    )
    empty = alice.list_records(SCOPE, created_at={"$lt": since})["items"]
    # Then the server applied them
    assert [r["record_id"] for r in listed] == [ids["silver"]]
    assert {r["record_id"] for r in iterated} == {ids["silver"], ids["bronze"]}
    assert {c["record_id"] for c in recalled["candidates"]} == {ids["gold"], ids["silver"]}
    assert empty == []
    # And a bad operator is a typed error naming it
    with pytest.raises(BadRequest) as refused:
        alice.recall(SCOPE, "launch", metadata={"n": {"$between": [1, 2]}})
    assert refused.value.field == "filters.metadata.n.$between"
