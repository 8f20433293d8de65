"""The framework adapters end to end against the live server (no network, no API keys)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from aetnaweb_client import Client
from aetnaweb_client.langgraph_store import AetnawebStore
from aetnaweb_client.openai_agents import memory_tools
from agents import FunctionTool
from agents.tool_context import ToolContext
from django.utils import timezone

from memory.models import Record
from tests.api.conftest import issue_token
from tests.client.conftest import SCOPE

pytestmark = pytest.mark.django_db(transaction=True)

NS = ("acme", "alice", "proj")


# -- LangGraph BaseStore ------------------------------------------------------------------


def test_langgraph_put_get_search_and_delete(alice):
    store = AetnawebStore(alice)
    # Given two values written through the store
    store.put(NS, "favourite editor", {"name": "helix", "since": 2024})
    store.put(NS, "favourite editor", {"name": "zed"})  # supersedes, history kept
    # When read back
    item = store.get(NS, "favourite editor")
    # Then the newest value comes back, stored at exactly that scope
    assert item is not None and item.value == {"name": "zed"} and item.namespace == NS
    statuses = sorted(Record.objects.filter(scope=SCOPE).values_list("status", flat=True))
    assert statuses == ["active", "superseded"]
    # search is recall: ranked and scored
    [hit] = store.search(NS, query="favourite editor")
    assert (hit.key, hit.value, hit.namespace) == ("favourite editor", {"name": "zed"}, NS)
    assert hit.score is not None and hit.score > 0
    # delete forgets the whole lineage
    store.delete(NS, "favourite editor")
    assert store.get(NS, "favourite editor") is None
    assert store.search(NS, query="favourite editor") == []


def test_langgraph_search_sees_ancestors_and_never_siblings(make_client):
    tenant = AetnawebStore(make_client("acme:*:*"))
    tenant.put(("acme", "*", "*"), "house style", {"tabs": False})
    tenant.put(("acme", "bob", "proj"), "bob secret", {"pin": 1234})
    alice = AetnawebStore(make_client("acme:alice:*"))
    found = alice.search(NS, query="house style")
    assert [(i.namespace, i.key) for i in found] == [(("acme", "*", "*"), "house style")]
    assert alice.search(NS, query="bob secret pin") == []


def test_langgraph_refusals_write_nothing(alice):
    store = AetnawebStore(alice)
    with pytest.raises(ValueError, match="exactly three parts"):
        store.put(("acme", "alice"), "k", {"v": 1})
    with pytest.raises(ValueError, match="may not contain ':'"):
        store.put(("acme", "alice", "p:x"), "k", {"v": 1})
    assert not Record.objects.exists()


def test_langgraph_async_and_list_namespaces(make_client):
    store = AetnawebStore(make_client("acme:alice:proj"))
    asyncio.run(store.aput(NS, "shell", {"name": "zsh"}))
    item = asyncio.run(store.aget(NS, "shell"))
    assert item is not None and item.value == {"name": "zsh"}
    assert store.list_namespaces() == [NS]


# -- OpenAI Agents SDK tools ---------------------------------------------------------------


def _invoke(tool: FunctionTool, **arguments: object) -> dict:
    raw = json.dumps(arguments)
    context = ToolContext(
        context=None, tool_name=tool.name, tool_call_id="call_1", tool_arguments=raw
    )
    return json.loads(asyncio.run(tool.on_invoke_tool(context, raw)))


def test_openai_agents_tools_have_schemas_the_model_can_follow(alice):
    tools = {tool.name: tool for tool in memory_tools(alice, SCOPE)}
    assert sorted(tools) == ["forget", "forget_preview", "recall", "remember"]
    remember = tools["remember"].params_json_schema
    assert remember["required"] == ["text"]
    assert "scope" not in remember["properties"]  # the application fixes the scope
    # count: the preview's, passed back (null allowed at 10 or fewer)
    assert tools["forget"].params_json_schema["required"] == ["selector", "record_ids", "count"]
    assert "preview" in tools["forget"].description.lower()


def test_openai_agents_remember_recall_forget_with_preview(alice):
    tools = {tool.name: tool for tool in memory_tools(alice, SCOPE, session_id="chat-1")}
    stored = _invoke(tools["remember"], text="My backup email is alice@example.org")
    [record] = stored["stored"]
    recalled = _invoke(tools["recall"], query="backup email")
    assert recalled["memories"][0]["record_id"] == record["record_id"]
    preview = _invoke(tools["forget_preview"], selector="backup email")
    assert preview["record_ids"] == [record["record_id"]]
    # A forget naming other IDs than the preview's is refused and purges nothing
    refused = _invoke(tools["forget"], selector="backup email", record_ids=["mem_other"])
    assert refused["error"] == "forget_preview_stale"
    assert Record.objects.get(record_id=record["record_id"]).status == "active"
    done = _invoke(tools["forget"], selector="backup email", record_ids=preview["record_ids"])
    assert done["purged_record_ids"] == [record["record_id"]]
    assert _invoke(tools["recall"], query="backup email")["memories"] == []


def test_openai_agents_forget_many_passes_the_previewed_count(alice):
    tools = {tool.name: tool for tool in memory_tools(alice, SCOPE, session_id="chat-1")}
    for n in range(11):
        _invoke(tools["remember"], text=f"Remember that ticket {n} is about the printer.")
    preview = _invoke(tools["forget_preview"], selector="printer")
    assert preview["count"] == 11
    # Without the count the agent is told why (a JSON refusal) and nothing is purged
    refused = _invoke(tools["forget"], selector="printer", record_ids=preview["record_ids"])
    assert refused["error"] == "forget_count_not_confirmed"
    assert not Record.objects.filter(status="tombstoned").exists()
    done = _invoke(tools["forget"], selector="printer", record_ids=preview["record_ids"], count=11)
    assert len(done["purged_record_ids"]) == 11


def test_openai_agents_tool_refusals_come_back_as_json(server_url):
    reader = Client(server_url, token=issue_token("acme:alice:*", ["read"]))
    tools = {tool.name: tool for tool in memory_tools(reader, SCOPE)}
    answer = _invoke(tools["remember"], text="My shell is zsh")
    assert answer["error"] == "capability_missing"
    assert not Record.objects.exists()
    reader.close()


def test_langgraph_put_with_ttl_sets_expires_at_and_a_lapsed_item_is_gone(alice):
    # Given an item put with a ttl of 90 minutes and one without
    store = AetnawebStore(alice)
    store.put(NS, "parking spot", {"level": 3}, ttl=90)
    store.put(NS, "home city", {"name": "Lyon"})
    # Then the first record lapses 90 minutes from now; the other is kept until forgotten
    spot = Record.objects.get(scope=SCOPE, content__startswith="parking spot")
    left = spot.expires_at - timezone.now()
    assert timedelta(minutes=89) < left <= timedelta(minutes=90)
    assert Record.objects.get(scope=SCOPE, content__startswith="home city").expires_at is None
    assert store.get(NS, "parking spot").value == {"level": 3}
    # When the time has passed (before any retention run)
    Record.objects.filter(pk=spot.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    # Then get, search and listing no longer return it
    assert store.get(NS, "parking spot") is None
    assert [i.key for i in store.search(NS, query="parking spot")] == []
    assert [i.key for i in store.search(NS)] == ["home city"]
    # And a ttl the server cannot honour is refused before anything is sent
    for bad in (0, -5, float("nan")):
        with pytest.raises(ValueError, match="ttl"):
            store.put(NS, "desk", {"n": 1}, ttl=bad)
    assert not Record.objects.filter(content__startswith="desk").exists()


def test_langgraph_default_ttl_from_ttl_config(alice):
    store = AetnawebStore(alice, ttl_config={"default_ttl": 60})
    store.put(NS, "lunch order", {"dish": "ramen"})
    record = Record.objects.get(scope=SCOPE)
    assert record.expires_at is not None
    assert record.expires_at - timezone.now() <= timedelta(minutes=60)
