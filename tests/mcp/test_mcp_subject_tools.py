"""MCP tools for requests about a person (issue 32): preview and erase a subject, read the
erasure, export a subject; listed only for a session that may erase the subtree (in process)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from aetnaweb import access
from aetnaweb.access import SYSTEM, Principal
from aetnaweb.agent_mcp import build_server
from aetnaweb.scopes import Scope
from memory import services
from memory.models import Record
from memory.services.erasure import run_subject_erasure
from memory.services.holds import set_legal_hold
from tests.memory.conftest import clean_index  # noqa: F401  (a fixture: empties the indexes)

DANA = "acme:dana:*"
APOLLO = "acme:dana:apollo"
SUBJECT_TOOLS = {"erase_subject_preview", "erase_subject", "erasure_status", "export_subject"}

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_index")]


def token(scope: str, capabilities: frozenset[str]) -> Principal:
    return Principal(
        label="agent:test", kind="token", bindings=((Scope.parse(scope), capabilities),)
    )


FULL = token(DANA, access.TOKEN_CAPABILITIES)


def tools(principal: Principal, scope: str = DANA) -> set[str]:
    server = build_server(principal, Scope.parse(scope))

    async def run() -> Any:
        return await server.list_tools()

    return {t.name for t in anyio.run(run)}


def call(tool: str, arguments: dict[str, Any], principal: Principal = FULL) -> Any:
    server = build_server(principal, Scope.parse(DANA))

    async def run() -> Any:
        return await server.call_tool(tool, arguments)

    result = anyio.run(run)
    if getattr(result, "is_error", False):
        raise ToolError(result.content[0].text)
    return result.structured_content


def seed() -> None:
    services.remember(principal=SYSTEM, scope=DANA, text="Remember that my shoe size is 39.")
    services.remember(principal=SYSTEM, scope=APOLLO, text="Remember that my role is pilot.")


def test_the_tools_are_listed_only_for_a_session_that_may_erase_the_subtree():
    assert tools(FULL) >= SUBJECT_TOOLS
    # A read-write-forget key, or a session above one person, never sees them
    assert not SUBJECT_TOOLS & tools(token(DANA, frozenset({"read", "write", "forget"})))
    assert not SUBJECT_TOOLS & tools(token("acme:*:*", access.TOKEN_CAPABILITIES), "acme:*:*")


def test_preview_erase_and_read_the_certificate():
    seed()
    preview = call("erase_subject_preview", {})
    assert preview["records"] == 2 and {r["scope"] for r in preview["scopes"]} == {DANA, APOLLO}
    # A wrong confirmation is refused and writes nothing
    with pytest.raises(ToolError, match="type the subtree"):
        call("erase_subject", {"reference": "DSR-1", "confirm": APOLLO})
    assert Record.objects.exclude(content="").count() == 2
    started = call("erase_subject", {"reference": "DSR-1", "confirm": DANA})
    run_subject_erasure(started["job_id"])
    done = call("erasure_status", {"job_id": started["job_id"]})
    assert done["status"] == "done" and done["certificate"]["reference"] == "DSR-1"
    assert not Record.objects.exclude(content="").exists()


def test_a_held_subject_is_refused():
    seed()
    set_legal_hold(principal=SYSTEM, scope=APOLLO, reference="LIT-1")
    with pytest.raises(ToolError, match="hold"):
        call("erase_subject", {"reference": "DSR-1", "confirm": DANA})


def test_export_the_subject():
    seed()
    document = call("export_subject", {"reference": "DSR-2"})
    assert document["manifest"]["records"]["count"] == 2
    assert document["reference"] == "DSR-2"
