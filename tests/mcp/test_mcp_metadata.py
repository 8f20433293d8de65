"""MCP round trip of record metadata: remember with metadata, recall and list_records
filtered by it (a real ``manage.py mcp`` subprocess over stdio), bad metadata refused."""

from __future__ import annotations

import tempfile
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record
from tests.mcp.test_mcp_server import SCOPE, call, server_parameters

pytestmark = pytest.mark.django_db(transaction=True)


async def metadata_conversation(python: str, errlog) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        stdio_client(server_parameters(python, "--scope", SCOPE), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listing = await session.list_tools()
        seen["schemas"] = {tool.name: tool.input_schema for tool in listing.tools}
        seen["mine"] = await call(
            session,
            "remember",
            text="I reviewed the launch codename plan orion.",
            metadata={"customer_id": 42},
        )
        seen["other"] = await call(
            session,
            "remember_fact",
            key="launch codename plan",
            value="vega",
            metadata={"customer_id": "42"},
        )
        seen["recalled"] = await call(
            session,
            "recall",
            query="launch codename plan",
            filters={"metadata": {"customer_id": 42}},
        )
        seen["listed"] = await call(
            session, "list_records", filters={"metadata": {"customer_id": "42"}}
        )
        seen["operators"] = await call(
            session,
            "recall",
            query="launch codename plan",
            filters={
                "metadata": {"customer_id": {"$in": [42, 7], "$ne": "42"}},
                "created_at": {"$gte": "2000-01-01"},
            },
        )
        seen["later"] = await call(
            session,
            "list_records",
            filters={"created_at": {"$gte": "2999-01-01T00:00:00Z"}},
        )
        operator = await session.call_tool(
            "recall", {"query": "x", "filters": {"metadata": {"customer_id": {"$regex": "4"}}}}
        )
        seen["operator"] = (operator.is_error, operator.content[0].text if operator.content else "")
        bad = await session.call_tool(
            "remember", {"text": "My car is red.", "metadata": {"x": {"nested": 1}}}
        )
        seen["bad"] = (bad.is_error, bad.content[0].text if bad.content else "")
        unknown = await session.call_tool("recall", {"query": "x", "filters": {"status": "active"}})
        seen["unknown"] = (unknown.is_error, unknown.content[0].text if unknown.content else "")
    return seen


def test_mcp_tools_store_return_and_filter_metadata(python):
    # Given a sibling's record holding the same metadata and words
    services.remember(
        principal=SYSTEM,
        scope="acme:bob:proj",
        text="I reviewed the launch codename plan orion.",
        force=True,
        metadata={"customer_id": 42},
    )
    # When an MCP client remembers with metadata and recalls and lists with filters
    with tempfile.TemporaryFile(mode="w+") as errlog:
        seen: dict[str, Any] = {}

        async def run() -> None:
            seen.update(await metadata_conversation(python, errlog))

        anyio.run(run)
    # Then the tools declare the arguments
    assert "metadata" in seen["schemas"]["remember"]["properties"]
    assert "filters" in seen["schemas"]["recall"]["properties"]
    assert "filters" in seen["schemas"]["list_records"]["properties"]
    # And the stored records carry their metadata
    mine = seen["mine"]["records"][0]
    assert mine["metadata"] == {"customer_id": 42}
    other = seen["other"]["records"][0]
    assert Record.objects.get(record_id=other["record_id"]).metadata == {"customer_id": "42"}
    # And recall's typed filter keeps only the number 42 at this session's scope
    assert [c["record_id"] for c in seen["recalled"]["candidates"]] == [mine["record_id"]]
    assert seen["recalled"]["candidates"][0]["metadata"] == {"customer_id": 42}
    # And list_records' filter keeps only the string "42"
    assert [r["record_id"] for r in seen["listed"]["items"]] == [other["record_id"]]
    # And bad metadata and unknown filters are tool errors naming the problem
    assert seen["bad"][0] and "metadata.x" in seen["bad"][1]
    assert seen["unknown"][0] and "filters" in seen["unknown"][1]
    # And operators and created_at ranges filter as in the HTTP API (issue 35 item 4)
    assert [c["record_id"] for c in seen["operators"]["candidates"]] == [mine["record_id"]]
    assert seen["later"]["items"] == []
    assert seen["operator"][0] and "$regex" in seen["operator"][1]
