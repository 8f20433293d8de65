"""Issue 11 item 6: one source for input limits, and every layer agrees on it.

Each limit is written once (``aetnaweb/limits.py``, ``memory/limits.py``,
``actions/limits.py``). For each one, every layer that takes the input (the
dashboard form, the HTTP API schema, the MCP tool, the service or selector)
is driven at the limit, which it must accept, and one past it, which it must
refuse. A layer that kept its own number fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from actions import services as action_services
from actions.errors import ActionInputError
from actions.forms import AbortForm, DenyForm
from actions.limits import MAX_REASON_LENGTH
from aetnaweb.access import SYSTEM
from aetnaweb.limits import MAX_CONTEXT_CHARS
from audit.services import MAX_EVENT_TYPE_LENGTH
from memory import selectors
from memory import services as memory_services
from memory.api_schemas import LogActionIn, ProposeIn, RecallIn, RecordsQuery, RememberIn
from memory.errors import MemoryEngineError, QueryError
from memory.forms import DecisionForm, RecallTestForm
from memory.limits import (
    MAX_KEY_CHARS,
    MAX_KIND_CHARS,
    MAX_PAGE,
    MAX_PROPOSED_FACTS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_RECALL_LIMIT,
    MAX_TEXT_CHARS,
    MAX_VALUE_CHARS,
)
from memory.mcp_server import build_server
from tests.actions.conftest import write_op

SCOPE = "acme:alice:proj"

Accepts = Callable[[int], bool]


def schema_accepts(schema: type, **fixed: Any) -> Callable[[str, Callable[[int], Any]], Accepts]:
    def field(name: str, value: Callable[[int], Any]) -> Accepts:
        def accepts(n: int) -> bool:
            try:
                schema(**{**fixed, name: value(n)})
            except ValidationError:
                return False
            return True

        return accepts

    return field


def form_accepts(form: type, name: str, value: Callable[[int], Any], /, **fixed: Any) -> Accepts:
    def accepts(n: int) -> bool:
        bound = form(data={**fixed, name: value(n)})
        bound.is_valid()
        return name not in bound.errors

    return accepts


def mcp_accepts(tool: str, name: str, value: Callable[[int], Any], /, **fixed: Any) -> Accepts:
    def accepts(n: int) -> bool:
        server = build_server(SCOPE, capabilities=["read", "write", "propose", "forget"])

        async def call() -> Any:
            return await server.call_tool(tool, {**fixed, name: value(n)})

        try:
            anyio.run(call)
        except ToolError:
            return False
        return True

    return accepts


def service_accepts(
    call: Callable[..., Any], name: str, value: Callable[[int], Any], /, **fixed: Any
) -> Accepts:
    def accepts(n: int) -> bool:
        try:
            call(**{**fixed, name: value(n)})
        except (MemoryEngineError, ActionInputError):
            return False
        return True

    return accepts


def chars(n: int) -> str:
    return "q" * n


def sentence(n: int) -> str:
    # A message that is still "a fact about me" at any length (extraction keeps it).
    head = "My favourite word is "
    return head + "w" * (n - len(head))


def facts(n: int) -> list[dict[str, Any]]:
    return [{"content": f"fact {i}", "evidence": ["epi_missing"]} for i in range(n)]


def event_type(n: int) -> str:
    # Already namespaced, so the type is stored exactly as given (agent.x gains "log.").
    head = "agent.log."
    return head + "e" * (n - len(head))


def number(n: int) -> int:
    return n


BANKS = iter(["Lakeside", "Harbour", "Northgate", "Riverside"])


def quarantined_record() -> str:
    # A new bank each time: the same message again would be a duplicate, not a record.
    result = memory_services.remember(
        scope=SCOPE,
        text=f"<webpage>My bank is {next(BANKS)} Bank.</webpage>",
        principal=SYSTEM,
    )
    return result.records[0].record_id


def promote_with(reason: str) -> Any:
    return memory_services.promote(
        scope=SCOPE, record_id=quarantined_record(), reason=reason, principal=SYSTEM
    )


def abort_with(reason: str) -> Any:
    staged = action_services.stage(
        scope=SCOPE, operations=[write_op("a.txt", "x")], principal=SYSTEM
    )
    return action_services.abort(
        transaction_id=staged.transaction_id, reason=reason, principal=SYSTEM
    )


def list_with(limit: int) -> Any:
    try:
        return selectors.list_records(SYSTEM, scope=SCOPE, limit=limit)
    except QueryError as exc:
        raise MemoryEngineError(str(exc)) from exc


remember_schema = schema_accepts(RememberIn, scope=SCOPE)
recall_schema = schema_accepts(RecallIn, scope=SCOPE)

CASES: list[tuple[str, int, str, Accepts]] = [
    # (what, limit, layer, accepts(n))
    ("query", MAX_QUERY_CHARS, "form", form_accepts(RecallTestForm, "query", chars, limit=5, min_score=0)),
    ("query", MAX_QUERY_CHARS, "api", recall_schema("query", chars)),
    ("query", MAX_QUERY_CHARS, "mcp", mcp_accepts("recall", "query", chars)),
    ("query", MAX_QUERY_CHARS, "service", service_accepts(memory_services.recall, "query", chars, scope=SCOPE, principal=SYSTEM)),
    ("recall limit", MAX_RECALL_LIMIT, "form", form_accepts(RecallTestForm, "limit", number, query="q", min_score=0)),
    ("recall limit", MAX_RECALL_LIMIT, "api", schema_accepts(RecallIn, scope=SCOPE, query="q")("limit", number)),
    ("recall limit", MAX_RECALL_LIMIT, "mcp", mcp_accepts("recall", "limit", number, query="q")),
    ("recall limit", MAX_RECALL_LIMIT, "service", service_accepts(memory_services.recall, "limit", number, scope=SCOPE, query="q", principal=SYSTEM)),
    ("text", MAX_TEXT_CHARS, "api", remember_schema("text", sentence)),
    ("text", MAX_TEXT_CHARS, "mcp", mcp_accepts("remember", "text", sentence)),
    ("text", MAX_TEXT_CHARS, "service", service_accepts(memory_services.remember, "text", sentence, scope=SCOPE, principal=SYSTEM)),
    ("session_id", MAX_CONTEXT_CHARS, "api", remember_schema("session_id", chars)),
    ("session_id", MAX_CONTEXT_CHARS, "mcp", mcp_accepts("remember", "session_id", chars, text="My car is red.")),
    ("session_id", MAX_CONTEXT_CHARS, "service", service_accepts(memory_services.remember, "session_id", chars, scope=SCOPE, text="My car is red.", principal=SYSTEM)),
    ("key", MAX_KEY_CHARS, "api", remember_schema("key", chars)),
    ("key", MAX_KEY_CHARS, "mcp", mcp_accepts("remember_fact", "key", chars, value="v")),
    ("key", MAX_KEY_CHARS, "service", service_accepts(memory_services.remember_fact, "key", chars, scope=SCOPE, value="v", principal=SYSTEM)),
    ("value", MAX_VALUE_CHARS, "api", remember_schema("value", chars)),
    ("value", MAX_VALUE_CHARS, "mcp", mcp_accepts("remember_fact", "value", chars, key="k")),
    ("value", MAX_VALUE_CHARS, "service", service_accepts(memory_services.remember_fact, "value", chars, scope=SCOPE, key="k", principal=SYSTEM)),
    ("kind", MAX_KIND_CHARS, "api", remember_schema("kind", chars)),
    ("kind", MAX_KIND_CHARS, "mcp", mcp_accepts("remember_fact", "kind", chars, key="k", value="v")),
    ("kind", MAX_KIND_CHARS, "service", service_accepts(memory_services.remember_fact, "kind", chars, scope=SCOPE, key="k", value="v", principal=SYSTEM)),
    ("proposed facts", MAX_PROPOSED_FACTS, "api", schema_accepts(ProposeIn, scope=SCOPE)("facts", facts)),
    ("proposed facts", MAX_PROPOSED_FACTS, "mcp", mcp_accepts("propose_facts", "facts", facts)),
    ("proposed facts", MAX_PROPOSED_FACTS, "service", service_accepts(memory_services.propose_facts, "facts", facts, scope=SCOPE, principal=SYSTEM)),
    ("event type", MAX_EVENT_TYPE_LENGTH, "api", schema_accepts(LogActionIn, scope=SCOPE, payload={})("event_type", event_type)),
    ("event type", MAX_EVENT_TYPE_LENGTH, "mcp", mcp_accepts("log_action", "event_type", event_type, payload={})),
    ("event type", MAX_EVENT_TYPE_LENGTH, "service", service_accepts(memory_services.log_action, "event_type", event_type, scope=SCOPE, payload={}, principal=SYSTEM)),
    ("page", MAX_PAGE, "api", schema_accepts(RecordsQuery, scope=SCOPE)("limit", number)),
    ("page", MAX_PAGE, "mcp", mcp_accepts("list_records", "limit", number)),
    ("page", MAX_PAGE, "selector", service_accepts(list_with, "limit", number)),
    ("review reason", MAX_REASON_CHARS, "form", form_accepts(DecisionForm, "reason", chars, scope=SCOPE, record_id="mem_" + "0" * 32, decision="promote")),
    ("review reason", MAX_REASON_CHARS, "service", service_accepts(promote_with, "reason", chars)),
    ("action reason", MAX_REASON_LENGTH, "deny form", form_accepts(DenyForm, "reason", chars)),
    ("action reason", MAX_REASON_LENGTH, "abort form", form_accepts(AbortForm, "reason", chars)),
    ("action reason", MAX_REASON_LENGTH, "service", service_accepts(abort_with, "reason", chars)),
]  # fmt: skip


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("what", "limit", "layer", "accepts"),
    CASES,
    ids=[f"{what}-{layer}" for what, _, layer, _ in CASES],
)
def test_every_layer_accepts_the_limit_and_refuses_one_past_it(
    what, limit, layer, accepts, actions_root, authorizing_messages
):
    # Given the one shared limit for this input
    # When the layer is driven at the limit and one past it
    # Then it accepts the first and refuses the second, like every other layer
    assert accepts(limit), f"{layer} refused {what} at its limit {limit}"
    assert not accepts(limit + 1), f"{layer} accepted {what} at {limit + 1}"


@pytest.fixture
def actions_root(tmp_path, settings):
    root = tmp_path / "root"
    root.mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(root)
    return root
