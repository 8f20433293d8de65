"""``manage.py mcp --scope SCOPE`` end to end: a real subprocess speaking MCP over stdio.

The test talks to it with the official SDK's stdio client: initialize, list
tools, remember, recall, a webpage quarantined, forget with a receipt. The
server writes into this test's database (a file-backed SQLite test database,
or the PostgreSQL test database), so the test checks the rows it left.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import anyio
import pytest
from django.core.management import CommandError, call_command
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from memory import services
from memory.models import Episode, Record
from tests.mcp.conftest import REPO, subprocess_env

SCOPE = "acme:alice:proj"
EXPECTED_TOOLS = {
    "remember",
    "remember_fact",
    "recall",
    "recall_block",
    "capture",
    "forget_preview",
    "forget",
    "list_records",
    "get_record",
    "propose_facts",
    "import_conversation",
    "persona",
    "scenes",
    "log_action",
    "stage_plan",
}


def server_parameters(python: str, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=python,
        args=[str(REPO / "manage.py"), "mcp", *args],
        env=subprocess_env(),
        cwd=tempfile.gettempdir(),  # not the checkout: settings come from the environment
    )


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def conversation(python: str, errlog, bob_record: str) -> dict[str, Any]:
    seen: dict[str, Any] = {"bob_record": bob_record}
    async with (
        stdio_client(server_parameters(python, "--scope", SCOPE), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        seen["server_name"] = init.server_info.name
        listing = await session.list_tools()
        seen["tools"] = {tool.name: tool.input_schema for tool in listing.tools}

        seen["remembered"] = await call(
            session, "remember", text="My backup email is alice@example.org", session_id="s1"
        )
        seen["recalled"] = await call(session, "recall", query="backup email")
        seen["webpage"] = await call(
            session,
            "remember",
            text="Please read <webpage>Note: my bank PIN is 4321</webpage>",
            session_id="s1",
        )
        seen["recall_webpage"] = await call(session, "recall", query="bank PIN")
        seen["block"] = await call(session, "recall_block", query="backup email")
        seen["preview"] = await call(session, "forget_preview", utterance="forget my backup email")
        seen["receipt"] = await call(
            session,
            "forget",
            utterance="forget my backup email",
            expected_record_ids=seen["preview"]["record_ids"],
        )
        seen["after_forget"] = await call(session, "recall", query="backup email")
        refused = await session.call_tool("forget", {"selector": "   "})
        seen["empty_forget"] = (refused.is_error, refused.content[0].text)
        # Issue 9: a superseded value is forgotten by ID with its lineage; vague
        # or unmatched requests are tool errors, never an empty receipt.
        seen["shell_old"] = await call(session, "remember", text="My shell is bash.")
        seen["shell_new"] = await call(session, "remember", text="My shell is fish.")
        seen["lineage_receipt"] = await call(
            session, "forget", record_ids=[seen["shell_old"]["records"][0]["record_id"]]
        )
        vague = await session.call_tool("forget", {"utterance": "forget it please"})
        seen["vague_forget"] = (vague.is_error, vague.content[0].text)
        unmatched = await session.call_tool("forget", {"utterance": "forget my boat"})
        seen["unmatched_forget"] = (unmatched.is_error, unmatched.content[0].text)
        foreign = await session.call_tool("get_record", {"record_id": seen["bob_record"]})
        seen["foreign"] = (foreign.is_error, foreign.content[0].text)
        nul = await session.call_tool("remember", {"text": "My pet is fi\x00do"})
        seen["nul"] = (nul.is_error, nul.content[0].text)
        bad_args = await session.call_tool("recall", {"query": "x", "limit": 500})
        seen["bad_args"] = bad_args.is_error
        smuggled = await session.call_tool(
            "remember", {"text": "My desk is 4", "scope": "acme:bob:proj"}
        )
        seen["smuggled"] = (smuggled.is_error, smuggled.structured_content)
    return seen


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_mcp_session_end_to_end(python):
    # Given a record of bob's that alice's session must never reach
    bob = services.remember(
        principal=SYSTEM, scope="acme:bob:proj", text="My backup email is bob@example.org"
    )
    seen: dict[str, Any] = {"bob_record": bob.records[0].record_id}

    # When an MCP client runs a whole conversation against the server subprocess
    with tempfile.TemporaryFile(mode="w+") as errlog:

        async def run() -> None:
            seen.update(await conversation(python, errlog, seen["bob_record"]))

        anyio.run(run)
        errlog.seek(0)
        stderr = errlog.read()

    # Then initialize and list tools work, and no tool lets the model pick a scope
    assert seen["server_name"] == "aetnaweb"
    assert set(seen["tools"]) == EXPECTED_TOOLS
    for name, schema in seen["tools"].items():
        assert "scope" not in schema.get("properties", {}), name

    # And remember stored an active fact at exactly the bound scope
    [record] = seen["remembered"]["records"]
    assert record["status"] == "active"
    assert seen["remembered"]["scope"] == SCOPE
    assert seen["recalled"]["returned_ids"] == [record["record_id"]]
    # (scored with both text parts: full-text and meaning)
    parts = seen["recalled"]["candidates"][0]["parts"]
    assert parts["lexical"] > 0 and parts["semantic"] > 0
    assert "alice@example.org" in seen["block"]["text"]

    # And the webpage's claim was quarantined and never recalled
    assert [r["status"] for r in seen["webpage"]["records"]] == ["quarantined"]
    assert seen["recall_webpage"]["returned_ids"] == []

    # And forget purged exactly the previewed record and returned a verifiable receipt
    receipt = seen["receipt"]
    assert receipt["format"] == "aetnamem-deletion-receipt-v1"
    assert receipt["purged_record_ids"] == seen["preview"]["record_ids"] == [record["record_id"]]
    assert verify_deletion_receipt(json.loads(json.dumps(receipt)), principal=SYSTEM) == []
    assert Record.objects.get(record_id=record["record_id"]).status == "tombstoned"
    assert seen["after_forget"]["returned_ids"] == []

    # And refusals are tool errors the model can read, never crashes or leaks
    assert seen["empty_forget"][0] is True
    assert "empty" in seen["empty_forget"][1]
    shell_ids = [seen[k]["records"][0]["record_id"] for k in ("shell_old", "shell_new")]
    assert seen["lineage_receipt"]["purged_record_ids"] == shell_ids
    assert seen["vague_forget"][0] is True
    assert "say what to forget, e.g. 'forget my backup email'" in seen["vague_forget"][1]
    assert seen["unmatched_forget"][0] is True
    assert "nothing matched" in seen["unmatched_forget"][1]
    assert seen["foreign"] == (
        True,
        f"Error executing tool get_record: no record {seen['bob_record']}: check the ID",
    )
    assert seen["bad_args"] is True
    assert seen["nul"][0] is True
    assert "text: text may not contain the NUL character" in seen["nul"][1]
    # An extra "scope" argument from the model is ignored: the write lands at the bound scope
    assert seen["smuggled"][0] is False
    assert seen["smuggled"][1]["scope"] == SCOPE
    assert (
        not Record.objects.filter(scope="acme:bob:proj")
        .exclude(record_id=seen["bob_record"])
        .exists()
    )

    # And everything the session wrote is at the bound scope, attributed to the session
    written = AuditEvent.objects.exclude(subject_id="acme:bob:proj")
    assert set(written.values_list("subject_id", flat=True)) == {SCOPE}
    assert set(written.values_list("actor", flat=True)) == {"agent:mcp"}
    assert Episode.objects.filter(scope=SCOPE).count() == 5  # backup email, webpage, 2 shells, desk
    # And the server logged to stderr only (stdout carried nothing but the protocol)
    assert "serving MCP over stdio at scope acme:alice:proj" in stderr


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--scope", "acme:alice"], "three segments"),
        (["--scope", "acme:*:secret"], "ambiguous"),
        (["--scope", "acme:alice:proj", "--capabilities", "read,approve"], "cannot hold approve"),
        (["--scope", "acme:alice:proj", "--capabilities", ""], "at least one capability"),
        (["--scope", "acme:alice:proj", "--name", "two words"], "without spaces"),
        ([], "give --scope SCOPE for stdio"),
        (["--http", "--scope", "acme:alice:proj"], "--scope is for stdio"),
        (["--http", "--port", "0"], "--port must be"),
    ],
)
def test_bad_arguments_exit_2_and_serve_nothing(args, fragment):
    # (tests/mcp/test_console_script.py runs one refusal as a real subprocess:
    # exit status 2, one line on stderr, nothing on stdout.)
    with pytest.raises(CommandError) as refused:
        call_command("mcp", *args)
    assert refused.value.returncode == 2
    assert fragment in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not AuditEvent.objects.exists()


async def read_only_conversation(python: str, errlog, ancestor_record: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        stdio_client(
            server_parameters(python, "--scope", SCOPE, "--capabilities", "read"), errlog=errlog
        ) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        seen["tools"] = {tool.name: tool for tool in (await session.list_tools()).tools}
        seen["recall"] = await call(session, "recall", query="standup time")
        seen["ancestor"] = await call(session, "get_record", record_id=ancestor_record)
        persona = await session.read_resource(f"aetnaweb://memory/{SCOPE}/persona")
        seen["persona"] = persona.contents[0].text
        block = await session.read_resource(f"aetnaweb://memory/{SCOPE}/recall/login%20shell")
        seen["block"] = block.contents[0].text
        write_attempt = await session.call_tool("remember_fact", {"key": "k", "value": "v"})
        seen["write_attempt"] = write_attempt.is_error
    return seen


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_read_only_stdio_session_lists_read_tools_and_opens_inherited_records(python):
    # Given a team-wide fact at an ancestor of the session scope, and one at the scope
    team = services.remember_fact(
        principal=SYSTEM, scope="acme:*:*", key="standup time", value="9:30"
    )
    services.remember_fact(principal=SYSTEM, scope=SCOPE, key="login shell", value="fish")
    ancestor_record = team.records[0].record_id

    # When a read-only stdio session recalls it, opens it by ID and reads the resources
    with tempfile.TemporaryFile(mode="w+") as errlog:
        seen = anyio.run(read_only_conversation, python, errlog, ancestor_record)

    # Then only read tools are listed, each titled and marked read-only
    assert set(seen["tools"]) == {
        "recall",
        "recall_block",
        "list_records",
        "get_record",
        "persona",
        "scenes",
    }
    assert all(t.title and t.annotations.read_only_hint for t in seen["tools"].values())
    # And the inherited record recall returned opens by ID (the HTTP API's rule)
    assert seen["recall"]["returned_ids"] == [ancestor_record]
    assert seen["ancestor"]["record"]["scope"] == "acme:*:*"
    assert seen["ancestor"]["episode"] is None  # recall never shows an ancestor's episode
    # And the persona and recall block resources include the inherited fact
    assert ancestor_record in seen["persona"]
    assert "fish" in seen["block"]
    # And an unlisted write tool cannot be called; nothing was stored
    assert seen["write_attempt"] is True
    assert Record.objects.count() == 2
