"""Issue 10 item 2 over MCP: a lone surrogate in a tool call is answered, never dropped.

The SDK's transport could not parse such a line, dropped it without a reply,
and the client waited forever. Raw JSON-RPC lines are written here, exactly
as a hostile client would send them (the SDK's own client cannot even encode one).
"""

from __future__ import annotations

import json
import select
import subprocess
import tempfile
from typing import Any

import pytest

from audit.models import AuditEvent
from memory.mcp_server import refusal_for
from memory.models import Record
from tests.mcp.conftest import REPO, subprocess_env

SCOPE = "acme:alice:proj"


class Wire:
    def __init__(self, python: str) -> None:
        self.process = subprocess.Popen(
            [python, str(REPO / "manage.py"), "mcp", "--scope", SCOPE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=subprocess_env(),
            cwd=tempfile.gettempdir(),
        )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("utf-8") + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        assert ready, "the server did not answer (the client would hang)"
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_surrogate_in_a_tool_call_gets_an_error_result(python):
    wire = Wire(python)
    try:
        # Given an initialized session
        wire.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "hostile", "version": "1"},
                    },
                }
            )
        )
        assert wire.receive()["id"] == 1
        wire.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        # When tools are called with lone surrogates in their arguments
        wire.send(
            r'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "log_action",'
            r' "arguments": {"event_type": "agent.x", "payload": {"k": "\ud800"}}}}'
        )
        logged = wire.receive()
        wire.send(
            r'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "remember",'
            r' "arguments": {"text": "My pet is \udc80"}}}'
        )
        remembered = wire.receive()
        # And the session goes on afterwards
        wire.send('{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}')
        listed = wire.receive()
    finally:
        wire.close()
    # Then each call got an error result naming the argument
    assert logged["id"] == 2 and logged["result"]["isError"] is True
    assert logged["result"]["content"][0]["text"].startswith("payload.k: text may not contain")
    assert remembered["id"] == 3 and remembered["result"]["isError"] is True
    assert remembered["result"]["content"][0]["text"].startswith("text: text may not contain")
    assert listed["id"] == 4 and listed["result"]["tools"]
    # And nothing was written
    assert AuditEvent.objects.count() == 0 and Record.objects.count() == 0


def test_other_requests_get_an_invalid_params_error():
    answer = refusal_for(
        r'{"jsonrpc": "2.0", "id": "a", "method": "prompts/get", "params": {"name": "\ud800"}}'
    )
    assert answer is not None
    dumped = json.loads(answer.model_dump_json(by_alias=True, exclude_none=True))
    assert dumped["id"] == "a" and dumped["error"]["code"] == -32602
    assert dumped["error"]["message"].startswith("name: text may not contain")


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',  # valid: the SDK's
        r'{"jsonrpc": "2.0", "method": "notifications/x", "params": {"k": "\ud800"}}',  # no id
        "not json",
    ],
)
def test_lines_without_an_answerable_refusal_are_left_to_the_sdk(line):
    assert refusal_for(line) is None
