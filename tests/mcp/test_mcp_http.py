"""MCP over streamable HTTP end to end: the SDK's client against ``manage.py mcp --http``.

One server subprocess (uvicorn serving ``aetnaweb.asgi:application`` on a
port in 8190-8199) is started for the module; it uses this test's database,
so the tests create API tokens here and check the rows the server wrote.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

import anyio
import httpx2
import pytest
from django.utils import timezone
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from access import tokens
from access.models import ApiToken
from actions.models import ActionTransaction
from aetnaweb.access import SYSTEM
from aetnaweb.agent_mcp import is_mcp_path
from aetnaweb.scopes import Scope
from audit.models import AuditEvent
from memory import services
from memory.models import Record
from tests.factories import authorizing_evidence, ensure_authorizing_episode
from tests.mcp.conftest import REPO, subprocess_env
from tests.mcp.test_console_script import console_script

SCOPE = "acme:alice:proj"
SIBLING = "acme:bob:proj"
READ_TOOLS = {"recall", "recall_block", "list_records", "get_record", "persona", "scenes"}
WRITE_TOOLS = {"remember", "remember_fact", "import_conversation", "capture", "log_action"}
ALL_TOOLS = READ_TOOLS | WRITE_TOOLS | {"forget_preview", "forget", "propose_facts", "stage_plan"}
PORTS = range(8190, 8200)


def free_port() -> int:
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port in 8190-8199")


@pytest.fixture(scope="module")
def actions_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("actions-root")
    (root / "notes").mkdir()
    return root


@pytest.fixture(scope="module")
def mcp_url(django_db_setup, actions_root) -> Iterator[str]:
    port = free_port()
    env = {**subprocess_env(), "AETNAWEB_ACTIONS_ROOT": str(actions_root)}
    server = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "mcp", "--http", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"{base}/healthz", timeout=2).status_code < 500:
                    break
            except httpx2.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"MCP server did not start: {server.stderr.read().decode()}")
            time.sleep(0.3)
        yield f"{base}/mcp/"
    finally:
        server.terminate()
        server.wait(timeout=10)


def issue(scope: str, capabilities: list[str], name: str = "agent-1") -> str:
    return tokens.create_token(
        principal=SYSTEM,
        name=name,
        scope=scope,
        capabilities=capabilities,
        expires_at=timezone.now() + timedelta(days=1),
    ).secret


async def session_run(url: str, secret: str, body) -> Any:
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await body(session)


def run_session(url: str, secret: str, body) -> Any:
    async def main() -> Any:
        return await session_run(url, secret, body)

    return anyio.run(main)


async def ok(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


def post(url: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    return httpx2.post(
        url,
        json=body,
        headers={"Accept": "application/json, text/event-stream", **(headers or {})},
        timeout=10,
    )


# -- authentication --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_requests_without_a_live_token_are_refused_with_401_and_write_nothing(mcp_url):
    # Given an expired and a revoked token (and one that works)
    expired = issue(SCOPE, ["read", "write"], name="expired")
    ApiToken.objects.filter(name="expired").update(expires_at=timezone.now() - timedelta(1))
    revoked = issue(SCOPE, ["read", "write"], name="revoked")
    tokens.revoke_token(
        principal=SYSTEM,
        token_prefix=revoked.split("_")[1],
    )
    live = issue(SCOPE, ["read"], name="live")
    events_before = AuditEvent.objects.count()

    # When MCP requests arrive with no, malformed, unknown, expired or revoked credentials
    cases = {
        "none": ({}, "missing API token"),
        "basic": ({"Authorization": "Basic dXNlcjpwYXNz"}, "malformed Authorization header"),
        "unknown": ({"Authorization": "Bearer aetna_00000000_nope"}, "unknown API token"),
        "expired": ({"Authorization": f"Bearer {expired}"}, "expired"),
        "revoked": ({"Authorization": f"Bearer {revoked}"}, "revoked"),
    }
    answers = {name: post(mcp_url, headers) for name, (headers, _) in cases.items()}

    # Then each is a 401 naming the problem, with a Bearer challenge
    for name, (_, fragment) in cases.items():
        response = answers[name]
        assert response.status_code == 401, name
        assert response.headers["www-authenticate"].startswith("Bearer"), name
        assert response.json()["error"] == "unauthorized", name
        assert fragment in response.json()["detail"], name
    # And the live token is answered (the same request, authenticated)
    assert post(mcp_url, {"Authorization": f"Bearer {live}"}).status_code == 200
    # And the SDK's client fails loudly without a token rather than hanging
    with pytest.raises(ExceptionGroup) as failed:
        run_session(mcp_url, "aetna_00000000_nope", lambda session: session.list_tools())
    assert failed.group_contains(MCPError, depth=2)
    # And nothing was written by any refusal
    assert AuditEvent.objects.count() == events_before
    assert not Record.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_session_scope_outside_the_token_subtree_is_404_and_a_bad_one_400(mcp_url):
    # Given a token for alice's person-level subtree
    secret = issue("acme:alice:*", ["read", "write"])
    auth = {"Authorization": f"Bearer {secret}"}
    # When a client asks for a sibling's scope, an ancestor, or a malformed scope
    sibling = post(f"{mcp_url}?scope={quote(SIBLING)}", auth)
    ancestor = post(f"{mcp_url}?scope={quote('acme:*:*')}", auth)
    malformed = post(f"{mcp_url}?scope=acme:alice", auth)
    # (and a Host header outside ALLOWED_HOSTS, as Django refuses it everywhere else)
    rebound = post(mcp_url, {**auth, "Host": "evil.example"})
    # Then the sibling and the ancestor are 404 (like the HTTP API), the bad scope a 400
    assert (sibling.status_code, sibling.json()["error"]) == (404, "not_found")
    assert ancestor.status_code == 404
    assert malformed.status_code == 400
    assert malformed.json()["field"] == "scope"
    assert "three segments" in malformed.json()["detail"]
    assert (rebound.status_code, rebound.json()["error"]) == (400, "bad_host")
    # And a narrower scope in its subtree is accepted: writes land exactly there
    written = run_session(
        f"{mcp_url}?scope={quote(SCOPE)}",
        secret,
        lambda session: ok(session, "remember", text="My editor is helix."),
    )
    assert written["scope"] == SCOPE
    assert Record.objects.get().scope == SCOPE


# -- capabilities ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_read_only_token_lists_no_write_tool_and_cannot_write(mcp_url):
    # Given a read-only token and a fact already at its scope
    services.remember(principal=SYSTEM, scope=SCOPE, text="My backup email is alice@example.org")
    secret = issue(SCOPE, ["read"], name="reader")

    async def body(session: ClientSession) -> dict[str, Any]:
        listing = await session.list_tools()
        forged = await session.call_tool("remember", {"text": "My PIN is 1234"})
        return {
            "tools": {tool.name: tool for tool in listing.tools},
            "recall": await ok(session, "recall", query="backup email"),
            "forged": (forged.is_error, forged.content[0].text),
        }

    # When it lists tools, recalls, and tries a write tool anyway
    seen = run_session(mcp_url, secret, body)

    # Then only read tools are listed, each marked read-only with a title
    assert set(seen["tools"]) == READ_TOOLS
    for tool in seen["tools"].values():
        assert tool.annotations.read_only_hint is True, tool.name
        assert tool.title, tool.name
    # And recall works, while the unlisted write tool is refused and stores nothing
    assert len(seen["recall"]["returned_ids"]) == 1
    assert seen["forged"][0] is True
    assert "remember" in seen["forged"][1]
    assert Record.objects.count() == 1
    assert not AuditEvent.objects.filter(actor="agent:reader", event_type="memory.remembered")


# -- every tool, refusals and resources ------------------------------------------------------


async def full_session(session: ClientSession, ids: dict[str, str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    listing = await session.list_tools()
    seen["tools"] = {tool.name: tool for tool in listing.tools}
    seen["remember"] = await ok(session, "remember", text="My backup email is a@example.org")
    seen["recall"] = await ok(session, "recall", query="backup email")
    seen["recall_team"] = await ok(session, "recall", query="standup time")
    seen["ancestor"] = await ok(session, "get_record", record_id=ids["ancestor"])
    seen["sibling"] = await refused(session, "get_record", record_id=ids["sibling"])
    seen["block"] = await ok(session, "recall_block", query="backup email")
    seen["fact_old"] = await ok(session, "remember_fact", key="shell", value="bash")
    seen["fact_new"] = await ok(session, "remember_fact", key="shell", value="fish")
    seen["history"] = await ok(
        session, "get_record", record_id=seen["fact_new"]["records"][0]["record_id"]
    )
    seen["list"] = await ok(session, "list_records", status="active", limit=1)
    seen["list_next"] = await ok(
        session, "list_records", status="active", limit=1, after=seen["list"]["next_cursor"]
    )
    seen["capture"] = await ok(session, "capture", role="assistant", content="Sure, noted.")
    seen["persona"] = await ok(session, "persona")
    seen["scenes"] = await ok(session, "scenes")
    seen["log"] = await ok(
        session, "log_action", event_type="agent.file_written", payload={"bytes": 12}
    )
    episode = seen["remember"]["episode_id"]
    seen["proposed"] = await ok(
        session,
        "propose_facts",
        facts=[{"content": "Alice prefers email over phone", "evidence": [episode]}],
    )
    seen["vague"] = await refused(session, "forget_preview", utterance="forget it")
    seen["nothing"] = await refused(session, "forget_preview", utterance="forget my boat")
    seen["empty"] = await refused(session, "forget", selector="   ")
    seen["preview"] = await ok(session, "forget_preview", utterance="forget my backup email")
    seen["receipt"] = await ok(
        session,
        "forget",
        utterance="forget my backup email",
        expected_record_ids=seen["preview"]["record_ids"],
    )
    operation = {
        "key": "w1",
        "adapter": "filesystem",
        "operation": "write_text",
        "arguments": {"path": "notes/todo.txt", "content": "buy milk\n"},
        "evidence": [authorizing_evidence()],
    }
    seen["staged"] = await ok(session, "stage_plan", operations=[operation])
    seen["bad_stage"] = await refused(
        session, "stage_plan", operations=[{**operation, "adapter": "teleport"}]
    )
    # Resources: persona and recall blocks, by the session scope and by template
    seen["resources"] = [str(r.uri) for r in (await session.list_resources()).resources]
    seen["templates"] = [
        t.uri_template for t in (await session.list_resource_templates()).resource_templates
    ]
    persona = await session.read_resource(f"aetnaweb://memory/{SCOPE}/persona")
    seen["persona_resource"] = persona.contents[0].text
    block = await session.read_resource(f"aetnaweb://memory/{SCOPE}/recall/login%20shell")
    seen["block_resource"] = block.contents[0].text
    for name, uri in {
        "sibling_resource": f"aetnaweb://memory/{SIBLING}/persona",
        "ancestor_resource": "aetnaweb://memory/acme:*:*/persona",
        "sibling_block": f"aetnaweb://memory/{SIBLING}/recall/backup%20email",
    }.items():
        try:
            await session.read_resource(uri)
            seen[name] = None
        except Exception as exc:
            seen[name] = str(exc)
    return seen


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_full_token_session_uses_every_tool_and_resource_as_its_principal(mcp_url, actions_root):
    # Given a team-wide fact at an ancestor scope, and bob's fact at the sibling scope
    ancestor = services.remember_fact(
        principal=SYSTEM, scope="acme:*:*", key="standup time", value="9:30"
    )
    sibling = services.remember(
        principal=SYSTEM, scope=SIBLING, text="My backup email is bob@example.org"
    )
    ids = {
        "ancestor": ancestor.records[0].record_id,
        "sibling": sibling.records[0].record_id,
    }
    secret = issue(SCOPE, ["read", "write", "forget", "propose", "stage"], name="helper")
    ensure_authorizing_episode()  # the stored user message the plan's evidence cites
    sibling_events = AuditEvent.objects.filter(subject_id=SIBLING).count()

    # When one MCP session calls every tool and reads the resources
    seen = run_session(mcp_url, secret, lambda session: full_session(session, ids))

    # Then every tool is listed with a title, a description and honest hints
    tools = seen["tools"]
    assert set(tools) == ALL_TOOLS
    assert all(tool.title and tool.description for tool in tools.values())
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["forget"].annotations.read_only_hint is False
    assert tools["forget_preview"].annotations.read_only_hint is True
    assert tools["remember_fact"].annotations.idempotent_hint is True
    assert "quarantined" in tools["remember"].description
    assert "ancestors" in tools["recall"].description
    assert "scope" not in tools["remember"].input_schema["properties"]
    # And memory tools act at the session scope as the token's principal
    assert seen["remember"]["scope"] == SCOPE
    assert seen["recall"]["returned_ids"] == [seen["remember"]["records"][0]["record_id"]]
    assert "a@example.org" in seen["block"]["text"]
    # And an inherited record recall returned opens by ID; a sibling's does not
    assert seen["recall_team"]["returned_ids"] == [ids["ancestor"]]
    assert seen["ancestor"]["record"]["scope"] == "acme:*:*"
    assert (
        seen["sibling"]
        == f"Error executing tool get_record: no record {ids['sibling']}: check the ID"
    )
    # And a record shows its supersession lineage
    old_id = seen["fact_old"]["records"][0]["record_id"]
    assert [r["record_id"] for r in seen["history"]["supersedes_chain"]] == [old_id]
    # And lists page by cursor
    assert len(seen["list"]["items"]) == 1
    assert seen["list_next"]["items"][0]["record_id"] != seen["list"]["items"][0]["record_id"]
    assert "fish" in seen["persona"]["text"]
    assert seen["scenes"]["scope"] == SCOPE
    assert [r["status"] for r in seen["proposed"]["accepted"]] == ["quarantined"]
    # And forget refusals are is_error results with the service's message
    assert "say what to forget" in seen["vague"]
    assert "nothing matched" in seen["nothing"]
    assert "empty" in seen["empty"]
    assert seen["receipt"]["purged_record_ids"] == seen["preview"]["record_ids"]
    # And a plan is staged for a person (nothing on disk); a bad plan writes nothing
    txn = ActionTransaction.objects.get()
    assert (txn.pk, txn.state) == (seen["staged"]["transaction_id"], "awaiting_approval")
    assert txn.actor_id == "agent:helper"
    assert not (actions_root / "notes" / "todo.txt").exists()
    assert "teleport" in seen["bad_stage"]
    # And the resources expose the persona and recall blocks, by scope
    assert seen["resources"] == [f"aetnaweb://memory/{SCOPE}/persona"]
    assert set(seen["templates"]) == {
        "aetnaweb://memory/{scope}/persona",
        "aetnaweb://memory/{scope}/recall/{query}",
    }
    assert "fish" in seen["persona_resource"]
    assert "fish" in seen["block_resource"]
    assert "<relevant_memories>" in seen["block_resource"]
    # And a sibling scope is unreachable through a resource template too; an ancestor's
    # persona is as well (a token reads ancestors only through its own scope's recall)
    for name in ("sibling_resource", "ancestor_resource", "sibling_block"):
        assert seen[name] is not None, name
        assert "not allowed" in seen[name], name
    # And no scope but the session's (and reads of the team's) was touched, all as the token
    written = AuditEvent.objects.filter(actor="agent:helper")
    assert set(written.values_list("subject_id", flat=True)) == {SCOPE}
    assert AuditEvent.objects.filter(subject_id=SIBLING).count() == sibling_events
    assert set(Record.objects.filter(scope=SIBLING).values_list("record_id", flat=True)) == {
        ids["sibling"]
    }


# -- host configuration examples (docs/mcp/) ------------------------------------------------

DOCS = REPO / "docs" / "mcp"


def mcp_command_options(args: list[str]) -> Any:
    from aetnaweb.management.commands.mcp import Command

    assert args[0] == "mcp"
    return Command().create_parser("aetnaweb", "mcp").parse_args(args[1:])


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_stdio_host_example_launches_our_console_script():
    # Given the Claude Desktop example
    config = json.loads((DOCS / "claude_desktop_config.json").read_text())
    server = config["mcpServers"]["aetnaweb"]
    # Then it names the console script pyproject.toml installs, with options `mcp` accepts
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["aetnaweb"] == "aetnaweb.cli:main"
    assert server["command"].endswith("/.venv/bin/aetnaweb")
    options = mcp_command_options(server["args"])
    assert str(Scope.parse(options.scope)) == options.scope == SCOPE
    assert server["env"]["DATABASE_URL"].startswith("sqlite:///")

    # When a host launches it as written (this checkout's script and test database)
    async def main() -> dict[str, Any]:
        parameters = StdioServerParameters(
            command=console_script(),
            args=server["args"],
            env={
                **subprocess_env(),
                **{k: v for k, v in server["env"].items() if k != "DATABASE_URL"},
            },
            cwd=tempfile.gettempdir(),
        )
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            return {
                "tools": tools,
                "fact": await ok(session, "remember_fact", key="pet", value="cat"),
            }

    seen = anyio.run(main)
    # Then the session serves every tool and acts as the named agent at the configured scope
    assert seen["tools"] == ALL_TOOLS
    assert seen["fact"]["scope"] == SCOPE
    assert AuditEvent.objects.filter(actor="agent:claude-desktop", subject_id=SCOPE).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.parametrize(
    ("example", "servers_key"), [("vscode-mcp.json", "servers"), ("cursor-mcp.json", "mcpServers")]
)
def test_the_http_host_examples_reach_our_mcp_route_with_a_token(mcp_url, example, servers_key):
    # Given an HTTP host example and the port `manage.py mcp --http` serves on by default
    server = json.loads((DOCS / example).read_text())[servers_key]["aetnaweb"]
    url = urlsplit(server["url"])
    default_port = mcp_command_options(["mcp", "--http"]).port
    # Then it points at /mcp/ on that port, with a bearer token the host fills in
    assert (url.hostname, url.port, url.path) == ("127.0.0.1", default_port, "/mcp/")
    assert is_mcp_path(url.path)
    assert server.get("type", "http") == "http"
    assert re.fullmatch(r"Bearer \$\{(input|env):[A-Za-z_-]+\}", server["headers"]["Authorization"])

    # When the host connects as written, to this test's server, with a real token
    secret = issue("acme:alice:*", ["read", "write"], name="editor")
    live = urlsplit(mcp_url)
    target = urlunsplit(url._replace(netloc=live.netloc))

    async def body(session: ClientSession) -> dict[str, Any]:
        return await ok(session, "remember", text="My laptop is a ThinkPad.")

    written = run_session(target, secret, body)
    # Then the token's session works, at the scope the URL names (or the token's own)
    expected = parse_qs(url.query).get("scope", ["acme:alice:*"])[0]
    assert written["scope"] == expected


# -- text no store can keep, and oversized bodies ------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_unstorable_text_and_huge_bodies_are_answered_and_write_nothing(mcp_url):
    # Given a writing token
    secret = issue(SCOPE, ["read", "write"])
    headers = {
        "Authorization": f"Bearer {secret}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    events_before = AuditEvent.objects.count()

    def call_raw(request_id: int, text_json: str) -> httpx2.Response:
        body = (
            f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":'
            f'{{"name":"remember","arguments":{{"text":"{text_json}"}}}}}}'
        )
        return httpx2.post(mcp_url, content=body.encode(), headers=headers, timeout=10)

    # When a tool call carries a lone surrogate, a NUL character, or a body over 1 MB
    surrogate = call_raw(7, "My pet is \\ud800")
    nul = call_raw(8, "My pet is a\\u0000b")
    huge = call_raw(9, "x" * 1_100_000)

    # Then the first two are tool errors naming the argument, the last a 413
    assert surrogate.status_code == 200
    assert surrogate.json()["id"] == 7
    assert surrogate.json()["result"]["isError"] is True
    assert surrogate.json()["result"]["content"][0]["text"].startswith("text: ")
    assert nul.json()["result"]["isError"] is True
    assert "NUL" in nul.json()["result"]["content"][0]["text"]
    assert huge.status_code == 413
    # And nothing was stored
    assert not Record.objects.exists()
    assert AuditEvent.objects.count() == events_before
