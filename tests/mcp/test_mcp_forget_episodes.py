"""MCP forget of stored messages: words reach an ignored statement, then by ID and session
(a real ``manage.py mcp`` subprocess over stdio; issue 29, item 5)."""

from __future__ import annotations

import tempfile
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Episode
from tests.mcp.test_mcp_server import SCOPE, call, server_parameters

pytestmark = pytest.mark.django_db(transaction=True)

WIFI = "The wifi password at the office is tulip-42."


async def conversation(python: str, errlog, others: dict[str, str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        stdio_client(server_parameters(python, "--scope", SCOPE), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listing = await session.list_tools()
        seen["schemas"] = {tool.name: tool.input_schema for tool in listing.tools}
        seen["said"] = await call(session, "remember", text=WIFI)
        seen["scenes_before"] = await call(session, "scenes")
        seen["preview"] = await call(
            session, "forget_preview", utterance="forget the wifi password"
        )
        seen["receipt"] = await call(
            session,
            "forget",
            utterance="forget the wifi password",
            expected_record_ids=seen["preview"]["record_ids"],
            expected_episode_ids=seen["preview"]["episode_ids"],
        )
        seen["scenes_after"] = await call(session, "scenes")
        seen["by_id"] = await call(session, "forget", episode_ids=[others["by_id"]])
        seen["by_session"] = await call(session, "forget", session_id="s-2")
        unknown = await session.call_tool("forget", {"episode_ids": ["ep_" + "0" * 32]})
        seen["unknown"] = (unknown.is_error, unknown.content[0].text if unknown.content else "")
    return seen


def texts(scenes: dict[str, Any]) -> str:
    return " ".join(e["text"] for scene in scenes["scenes"] for e in scene["episodes"])


def test_mcp_forgets_messages_by_words_id_and_session(python):
    # Given two more messages of this scope: one to forget by ID, one in session s-2
    by_id = services.remember(principal=SYSTEM, scope=SCOPE, text="The gate code is 9911.")
    services.remember(principal=SYSTEM, scope=SCOPE, text="The alarm is 4455.", session_id="s-2")
    # When an MCP client forgets an ignored statement by the user's words, then the others
    with tempfile.TemporaryFile(mode="w+") as errlog:
        seen: dict[str, Any] = {}

        async def run() -> None:
            seen.update(await conversation(python, errlog, {"by_id": by_id.episode_id}))

        anyio.run(run)
    # Then the tools take the new arguments
    assert {"episode_ids", "session_id"} <= set(seen["schemas"]["forget_preview"]["properties"])
    assert "expected_episode_ids" in seen["schemas"]["forget"]["properties"]
    # And the statement was served, previewed, purged, listed in the receipt, served no more
    episode_id = seen["said"]["episode_id"]
    assert WIFI in texts(seen["scenes_before"])
    assert seen["preview"]["episodes"][0]["text"] == WIFI
    assert seen["receipt"]["purged_episode_ids"] == [episode_id]
    assert "tulip" not in texts(seen["scenes_after"])
    # And the other two went by ID and by session; an unknown ID is a readable tool error
    assert seen["by_id"]["purged_episode_ids"] == [by_id.episode_id]
    assert len(seen["by_session"]["purged_episode_ids"]) == 1
    assert seen["unknown"][0] and "no episode" in seen["unknown"][1]
    assert set(Episode.objects.filter(scope=SCOPE).values_list("text", flat=True)) == {""}
