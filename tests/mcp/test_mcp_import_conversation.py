"""The MCP import_conversation tool and remember's occurred_at (issue 30), in process."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from memory.mcp_server import build_server
from memory.models import Episode, Record
from tests.memory.conftest import clean_index  # noqa: F401  (a fixture: empties the indexes)

SCOPE = "acme:alice:proj"


def call(tool: str, arguments: dict[str, Any], capabilities: list[str] | None = None) -> Any:
    server = build_server(SCOPE, capabilities=capabilities or ["read", "write"])

    async def run() -> Any:
        return await server.call_tool(tool, arguments)

    return anyio.run(run)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_the_tool_imports_turns_at_the_sessions_scope():
    # Given a user turn and another person's turn / When imported through the MCP tool
    call(
        "import_conversation",
        {
            "turns": [
                {
                    "text": "I love sailing.",
                    "speaker": "Alice",
                    "turn_id": "t1",
                    "occurred_at": "2026-03-02T09:30:00+00:00",
                },
                {"text": "Me too!", "role": "other", "speaker": "Bob", "turn_id": "t2"},
            ]
        },
    )
    # Then both turns are kept word for word at the session's scope, with the user's fact
    assert sorted(Record.objects.filter(scope=SCOPE).values_list("content", flat=True)) == [
        "Alice (2 March 2026): I love sailing.",
        "Bob: Me too!",
        "User loves sailing.",
    ]
    assert Record.objects.get(turn_id="t1", kind="turn").occurred_at == datetime(
        2026, 3, 2, 9, 30, tzinfo=UTC
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_a_bad_turn_or_a_read_only_session_is_a_tool_error_and_stores_nothing():
    for arguments, capabilities in (
        ({"turns": [{"text": "hi", "occurred_at": "monday"}]}, None),
        ({"turns": [{"text": "I ski."}]}, ["read"]),
    ):
        with pytest.raises(ToolError):
            call("import_conversation", arguments, capabilities)
    assert not Episode.objects.exists() and not Record.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_remember_takes_occurred_at():
    call("remember", {"text": "My car is red.", "occurred_at": "2026-03-02T09:30:00Z"})
    assert Record.objects.get().occurred_at == datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
