"""The memory verbs as MCP tools, bound to one scope chosen by whoever starts the server.

``manage.py mcp --scope SCOPE`` (or ``aetnaweb mcp --scope SCOPE``) builds this
server and serves it over stdio with the official ``mcp`` SDK. The scope is
fixed at start-up from the command line: no tool takes a scope argument, so
the model can never choose another one. Every tool calls the same service or
selector the HTTP API, the dashboard and the commands call, as a principal
bound to that scope's subtree (like an API token: it can never reach a
sibling, and it holds no review or approve capability). Writes land at
exactly the bound scope; recall sees it and its ancestors, as scopes.md says.
"""

from __future__ import annotations

import functools
import io
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Annotated, Any, Literal

import anyio
from django.db import close_old_connections
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCResponse,
    TextContent,
)
from pydantic import BaseModel, Field

from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import UnstorableText, check_storable_text, unstorable_text_in
from memory import selectors, services
from memory.errors import MemoryEngineError, RecordNotFound
from memory.extraction import MAX_TEXT_CHARS
from memory.services import MAX_QUERY_CHARS, MAX_RECALL_LIMIT, PERSONA_MAX_CHARS

# The memory verbs' capabilities; staging actions and audit exports have their
# own interfaces (the HTTP API), so an MCP session never holds them.
MCP_CAPABILITIES = frozenset({access.READ, access.WRITE, access.FORGET, access.PROPOSE})
DEFAULT_CAPABILITIES = MCP_CAPABILITIES

INSTRUCTIONS = (
    "Long-term memory for this conversation, kept by aetnaweb at one scope fixed by the "
    "host ({scope}). Call recall (or recall_block) before answering questions about the "
    "user; call remember when the user states a durable fact or preference; use capture to "
    "record each turn if the host does not. Content from webpages and tools is quarantined "
    "until a person reviews it, and is never recalled before that. forget returns a deletion "
    "receipt: preview first, then forget exactly the previewed record IDs."
)

Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Context = Annotated[str | None, Field(default=None, min_length=1, max_length=200)]
RecordId = Annotated[str, Field(min_length=1, max_length=64)]


class ProposedFact(BaseModel):
    content: Annotated[str, Field(min_length=1, max_length=10_000)]
    evidence: Annotated[
        list[RecordId],
        Field(min_length=1, max_length=100, description="Episode or record IDs it is drawn from."),
    ]
    fact_key: Annotated[str | None, Field(default=None, max_length=200)] = None
    confidence: Annotated[float | None, Field(default=None, ge=0.0, le=1.0)] = None


def bound_principal(scope: Scope, capabilities: Iterable[str], *, name: str = "mcp") -> Principal:
    """A principal reaching ``scope``'s subtree only, with at most :data:`MCP_CAPABILITIES`."""
    caps = frozenset(capabilities)
    unknown = caps - MCP_CAPABILITIES
    if unknown:
        raise ValueError(
            f"an MCP session cannot hold {', '.join(sorted(unknown))}: "
            f"choose from {', '.join(sorted(MCP_CAPABILITIES))}"
        )
    if not caps:
        raise ValueError("an MCP session needs at least one capability")
    return Principal(label=f"agent:{name}", kind="token", bindings=((scope, caps),))


def _text_arguments[F: Callable[..., Any]](tool: F) -> F:
    """Refuse unstorable text in any argument before the tool runs (names the argument)."""

    @functools.wraps(tool)
    def checked(**arguments: Any) -> Any:
        for name, value in arguments.items():
            if isinstance(value, BaseModel):
                value = value.model_dump()
            try:
                check_storable_text(value, name)
            except UnstorableText as exc:
                raise ToolError(str(exc)) from exc
        return tool(**arguments)

    return checked  # type: ignore[return-value]


def _call[T](fn: Callable[[], T]) -> T:
    """Run one tool body: domain refusals become tool errors the model can read."""
    close_old_connections()
    try:
        return fn()
    except RecordNotFound as exc:
        raise ToolError(str(exc)) from exc
    except AccessDenied as exc:
        raise ToolError(
            "not allowed: this MCP session is bound to one scope and may not do that"
        ) from exc
    except (MemoryEngineError, ScopeError, UnstorableText) as exc:
        raise ToolError(str(exc)) from exc
    finally:
        close_old_connections()


def build_server(
    scope: Scope | str,
    *,
    capabilities: Iterable[str] = DEFAULT_CAPABILITIES,
    name: str = "mcp",
) -> MCPServer:
    """An MCP server whose every tool acts at exactly ``scope`` as a bound principal."""
    bound = Scope.parse(scope)
    principal = bound_principal(bound, capabilities, name=name)
    actor = principal.label
    server: MCPServer = MCPServer(
        "aetnaweb",
        title="aetnaweb memory",
        instructions=INSTRUCTIONS.format(scope=bound),
        version="1",
    )
    at = str(bound)

    @server.tool()
    @_text_arguments
    def remember(
        text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)],
        session_id: Context = None,
        turn_id: Context = None,
        source_type: Literal["user_message", "webpage", "tool_output"] | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """Remember a message the user said (facts are extracted from it).

        Wrap third-party content in <webpage>...</webpage> or state source_type:
        it is quarantined until a person promotes it. Everything the user states
        about themselves is kept; force=true also keeps other prose as a note.
        """
        return _call(
            lambda: services.remember(
                scope=at,
                text=text,
                session_id=session_id,
                turn_id=turn_id,
                source_type=source_type,
                force=force,
                principal=principal,
                actor=actor,
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def remember_fact(
        key: Annotated[str, Field(min_length=1, max_length=200)],
        value: Annotated[str, Field(min_length=1, max_length=10_000)],
        kind: Annotated[str | None, Field(default=None, max_length=64)] = None,
        session_id: Context = None,
    ) -> dict[str, Any]:
        """Remember an explicit fact: key (a slot such as 'backup email') and its value.

        It replaces (supersedes) the earlier value of the same key at this scope.
        """
        return _call(
            lambda: services.remember_fact(
                scope=at,
                key=key,
                value=value,
                kind=kind,
                session_id=session_id,
                principal=principal,
                actor=actor,
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def recall(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS)],
        limit: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5,
        min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0,
        session_id: Context = None,
    ) -> dict[str, Any]:
        """Recall the most relevant active memories (this scope and its ancestors)."""
        return _call(
            lambda: services.recall(
                scope=at,
                query=query,
                limit=limit,
                min_score=min_score,
                session_id=session_id,
                principal=principal,
                actor=actor,
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def recall_block(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS)],
        max_items: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5,
        max_chars: Annotated[int, Field(ge=1, le=100_000)] = 2000,
        min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.3,
        session_id: Context = None,
    ) -> dict[str, Any]:
        """A <relevant_memories> block to put in the prompt ('' when nothing qualifies)."""
        return _call(
            lambda: services.recall_block(
                scope=at,
                query=query,
                max_items=max_items,
                max_chars=max_chars,
                min_score=min_score,
                session_id=session_id,
                principal=principal,
                actor=actor,
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def capture(
        role: Literal["user", "assistant", "tool_call", "tool_result"],
        content: Text,
        session_id: Context = None,
        turn_id: Context = None,
    ) -> dict[str, Any]:
        """Record one turn: a user turn is remembered; assistant and tool turns leave
        only a digest and a size in the audit chain (an agent cannot poison its memory)."""
        return _call(
            lambda: services.capture(
                scope=at,
                role=role,
                content=content,
                session_id=session_id,
                turn_id=turn_id,
                principal=principal,
                actor=actor,
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def forget_preview(
        selector: Annotated[str | None, Field(default=None, max_length=10_000)] = None,
        record_ids: Annotated[list[RecordId] | None, Field(default=None, max_length=1000)] = None,
        utterance: Annotated[str | None, Field(default=None, max_length=10_000)] = None,
    ) -> dict[str, Any]:
        """Show exactly which records a forget would purge (writes nothing).

        Give one of: selector (text the records contain), record_ids, or
        utterance (the user's words, e.g. 'forget my backup email').
        """
        return _call(
            lambda: services.forget_preview(
                scope=at,
                selector=selector,
                record_ids=record_ids,
                utterance=utterance,
                principal=principal,
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def forget(
        selector: Annotated[str | None, Field(default=None, max_length=10_000)] = None,
        record_ids: Annotated[list[RecordId] | None, Field(default=None, max_length=1000)] = None,
        utterance: Annotated[str | None, Field(default=None, max_length=10_000)] = None,
        expected_record_ids: Annotated[
            list[RecordId] | None, Field(default=None, max_length=1000)
        ] = None,
    ) -> dict[str, Any]:
        """Forget records at this scope and return the deletion receipt.

        Pass the preview's record_ids as expected_record_ids so that exactly
        those are purged (refused if the match changed). An empty request is
        refused, never read as 'everything'.
        """
        return _call(
            lambda: services.forget(
                scope=at,
                selector=selector,
                record_ids=record_ids,
                utterance=utterance,
                expected_record_ids=expected_record_ids,
                principal=principal,
                actor=actor,
            )
        )

    @server.tool()
    @_text_arguments
    def list_records(
        status: Literal["active", "quarantined", "superseded", "tombstoned"] | None = None,
        text: Annotated[str | None, Field(default=None, max_length=1000)] = None,
        after: Annotated[str | None, Field(default=None, max_length=20)] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> dict[str, Any]:
        """List records stored at this scope, newest first; pass next_cursor as after."""

        def run() -> dict[str, Any]:
            page = selectors.list_records(
                principal, scope=at, status=status, text=text, after=after, limit=limit
            )
            return {
                "scope": at,
                "items": [selectors.record_as_dict(record) for record in page.items],
                "next_cursor": page.next_cursor,
            }

        return _call(run)

    @server.tool()
    @_text_arguments
    def get_record(record_id: RecordId) -> dict[str, Any]:
        """One record with its supersession chain, source episode and audit events."""

        def run() -> dict[str, Any]:
            try:
                return selectors.record_detail(principal, record_id).as_dict()
            except AccessDenied:
                # Outside this scope's subtree: the same answer as an unknown ID.
                raise RecordNotFound(f"no record {record_id}: check the ID") from None

        return _call(run)

    @server.tool()
    @_text_arguments
    def propose_facts(
        facts: Annotated[list[ProposedFact], Field(min_length=1, max_length=500)],
    ) -> dict[str, Any]:
        """Propose facts drawn from this scope's episodes or records (cite them as evidence);
        they wait in quarantine for a person to review."""
        return _call(
            lambda: services.propose_facts(
                scope=at,
                facts=[fact.model_dump(exclude_none=True) for fact in facts],
                principal=principal,
                actor=actor,
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def persona(
        max_chars: Annotated[int, Field(ge=1, le=100_000)] = PERSONA_MAX_CHARS,
    ) -> dict[str, Any]:
        """A bounded summary of the active facts visible here, one '- [record_id] fact' per line."""
        return _call(
            lambda: services.persona(
                scope=at, max_chars=max_chars, principal=principal, actor=actor
            ).as_dict()
        )

    @server.tool()
    @_text_arguments
    def scenes(limit: Annotated[int, Field(ge=1, le=200)] = 20) -> dict[str, Any]:
        """One scene per session at this scope, newest first, with its episodes and records."""
        return _call(
            lambda: {
                "scope": at,
                "scenes": [
                    scene.as_dict()
                    for scene in services.scenes(scope=at, limit=limit, principal=principal)
                ],
            }
        )

    @server.tool()
    @_text_arguments
    def log_action(
        event_type: Annotated[str, Field(min_length=1, max_length=100)],
        payload: dict[str, Any],
        session_id: Context = None,
        turn_id: Context = None,
    ) -> dict[str, Any]:
        """Append an agent.* event (stored as agent.log.*) to this scope's audit chain.

        The payload is stored as given: put digests, IDs and counts in it, never content.
        """
        return _call(
            lambda: services.log_action(
                scope=at,
                event_type=event_type,
                payload=payload,
                session_id=session_id,
                turn_id=turn_id,
                principal=principal,
                actor=actor,
            )
        )

    return server


# -- stdio, answering what the SDK would drop -----------------------------------------------


def refusal_for(line: str) -> JSONRPCMessage | None:
    """The answer to a request line the SDK cannot parse because of unstorable text, else ``None``.

    The SDK validates each line with pydantic, which refuses a lone surrogate
    (``"\\ud800"`` in JSON); it then drops the message without a reply and the
    client waits forever. Python's json reads such a line, so the request's
    ``id`` is known and it gets an answer: a tool error result for
    ``tools/call`` (like every other refused argument), a JSON-RPC
    invalid-params error otherwise. Anything else is left to the SDK.
    """
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    found = unstorable_text_in(message)
    request_id = message.get("id")
    if found is None or not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        return None  # a valid line, or a notification or id that cannot be answered
    if unstorable_text_in(request_id) is not None:
        return None
    field = found[0].removeprefix("params.").removeprefix("arguments.")
    text = f"{field}: {found[1]}"
    if message["method"] == "tools/call":
        result = CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return JSONRPCResponse(
            jsonrpc="2.0",
            id=request_id,
            result=result.model_dump(by_alias=True, mode="json", exclude_none=True),
        )
    return JSONRPCError(
        jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_PARAMS, message=text)
    )


class _AnsweringLines:
    """The stdin the SDK reads: refused requests are answered on ``replies``, not passed on."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines
        self.replies: Any = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        async for line in self._lines:
            answer = refusal_for(line)
            if answer is None or self.replies is None:
                yield line
            else:
                await self.replies.send(SessionMessage(answer))


async def serve_stdio(server: MCPServer) -> None:
    """Serve ``server`` over stdin/stdout like ``server.run("stdio")``, answering every request."""
    wire = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    lines = _AnsweringLines(anyio.wrap_file(wire))
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
        # Set before the first await, so the reader task (started by the
        # context) can answer from its very first line.
        lines.replies = write_stream
        lowlevel = server._lowlevel_server  # the SDK's run_stdio_async does exactly this
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
