"""The MCP forget tools under issue 32 item 5, in process: the count typed back above ten,
the scopes below with a bundle, a reference; a refusal writes nothing."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from aetnaweb.access import SYSTEM
from memory import services
from memory.mcp_server import build_server
from memory.models import Record
from tests.memory.conftest import clean_index  # noqa: F401  (a fixture: empties the indexes)

USER = "acme:alice:*"
PROJECT = "acme:alice:proj"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_index")]


def call(scope: str, tool: str, arguments: dict[str, Any]) -> Any:
    server = build_server(scope, capabilities=["read", "forget"])

    async def run() -> Any:
        return await server.call_tool(tool, arguments)

    result = anyio.run(run)
    if getattr(result, "is_error", False):
        raise ToolError(result.content[0].text)
    return result.structured_content


def test_above_ten_the_tool_needs_the_previewed_count():
    for n in range(11):
        services.remember(
            principal=SYSTEM, scope=PROJECT, text=f"Remember that ticket {n} is about the printer."
        )
    preview = call(PROJECT, "forget_preview", {"selector": "printer"})
    assert preview["count"] == 11
    asked = {"selector": "printer", "expected_record_ids": preview["record_ids"]}
    with pytest.raises(ToolError, match="confirm_count"):
        call(PROJECT, "forget", asked)
    assert not Record.objects.filter(status="tombstoned").exists()
    receipt = call(PROJECT, "forget", {**asked, "confirm_count": 11, "reference": "REQ-1"})
    assert len(receipt["purged_record_ids"]) == 11


def test_include_below_returns_the_bundle():
    services.remember(
        principal=SYSTEM, scope=USER, text="Remember that the backup email is a@x.org."
    )
    services.remember(
        principal=SYSTEM, scope=PROJECT, text="Remember that the project backup email is p@x.org."
    )
    preview = call(USER, "forget_preview", {"selector": "backup email", "include_below": True})
    bundle = call(
        USER,
        "forget",
        {
            "selector": "backup email",
            "include_below": True,
            "expected_record_ids": preview["record_ids"],
            "expected_episode_ids": preview["episode_ids"],
        },
    )
    assert bundle["format"] == services.FORGET_BUNDLE_FORMAT
    assert sorted(r["subject_id"] for r in bundle["receipts"]) == sorted([USER, PROJECT])
