"""The memory verbs as MCP tools and resources, for one principal at one session scope.

:func:`add_memory_tools` and :func:`add_memory_resources` register what a
principal may use; ``aetnaweb.mcp`` composes them with the guarded-actions
tool and serves the result over stdio (``manage.py mcp --scope SCOPE``, a
principal bound to that scope's subtree) or streamable HTTP (``/mcp/``, the
principal of an API token). The session scope is fixed when the session
starts: no tool takes a scope argument, so the model can never choose another
one. Every tool calls the same service or selector the HTTP API, the
dashboard and the commands call, with the session's principal, so the
service layer checks every call. Writes land at exactly the session scope;
recall sees it and its ancestors, as scopes.md says.
"""

from __future__ import annotations

import functools
import io
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import anyio
from django.db import close_old_connections
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
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
    ToolAnnotations,
)
from pydantic import BaseModel, Field

from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import UnstorableText, check_storable_text, unstorable_text_in
from audit.services import MAX_EVENT_TYPE_LENGTH
from jobs.models import Job
from memory import mcp_results, ranking, selectors, services
from memory import metadata as record_metadata
from memory.errors import MemoryEngineError, RecordNotFound
from memory.limits import (
    MAX_BLOCK_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_FACT_CONTENT_CHARS,
    MAX_FACT_EVIDENCE,
    MAX_FORGET_RECORDS,
    MAX_IMPORT_TURNS,
    MAX_KEY_CHARS,
    MAX_KIND_CHARS,
    MAX_METADATA_BYTES,
    MAX_METADATA_KEYS,
    MAX_PAGE,
    MAX_PROPOSED_FACTS,
    MAX_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MAX_SELECTOR_CHARS,
    MAX_SPEAKER_CHARS,
    MAX_TEXT_CHARS,
    MAX_VALUE_CHARS,
)
from memory.mcp_results import (
    ForgetOutput,
    ForgetPreviewOutput,
    RecallBlockOutput,
    RecallOutput,
    RecordDetailOutput,
    RecordListOutput,
)
from memory.services import PERSONA_MAX_CHARS, erasure, subject_export
from memory.services.forgetting import MAX_FORGET_REFERENCE_CHARS

# What an agent may do over MCP: the memory verbs and staging a plan. Audit
# exports have their own interface (the HTTP API), and review and approval
# stay with people.
MCP_CAPABILITIES = frozenset(
    {access.READ, access.WRITE, access.FORGET, access.PROPOSE, access.STAGE}
)
DEFAULT_CAPABILITIES = MCP_CAPABILITIES

INSTRUCTIONS = (
    "Long-term memory for this conversation, kept by aetnaweb at one scope fixed when the "
    "session started ({scope}). Call recall (or recall_block) before answering questions about the "
    "user; call remember when the user states a durable fact or preference; use capture to "
    "record each turn if the host does not. Content from webpages and tools is quarantined "
    "until a person reviews it, and is never recalled before that. forget returns a deletion "
    "receipt: preview first, then forget exactly the previewed record and episode IDs. stage_plan (when "
    "listed) records an exact plan that waits for a person's approval; it executes nothing."
)

Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Context = Annotated[str | None, Field(default=None, min_length=1, max_length=MAX_CONTEXT_CHARS)]
MinConfidence = Annotated[
    float,
    Field(
        ge=0.0,
        le=1.0,
        description="Return only memories whose calibrated match confidence reaches this; "
        "when none does, the answer says abstained (no memory fits).",
    ),
]
RecordId = Annotated[str, Field(min_length=1, max_length=64)]
EpisodeIds = Annotated[
    list[RecordId] | None,
    Field(
        default=None,
        max_length=MAX_FORGET_RECORDS,
        description="Stored messages (episode IDs from remember or scenes) to forget, "
        "with every record drawn from them.",
    ),
]
SessionArg = Annotated[
    str | None,
    Field(
        default=None,
        min_length=1,
        max_length=MAX_CONTEXT_CHARS,
        description="Forget every stored message and record of this session.",
    ),
]
ExpiresAtArg = Annotated[
    str | None,
    Field(
        default=None,
        description="When the stored memories lapse (ISO 8601 with a time zone, in the "
        "future): recall skips them from then on and retention purges them. Omit to keep "
        "them until forgotten.",
    ),
]
MetadataArg = Annotated[
    dict[str, Any] | None,
    Field(
        default=None,
        description='Flat key/values stored with each record, e.g. {"customer_id": 42}: '
        f"at most {MAX_METADATA_KEYS} keys of [a-z0-9_.-], values string, number, "
        f"true/false or null, {MAX_METADATA_BYTES} bytes in all. Recall and list_records "
        "can filter on them.",
    ),
]
FiltersArg = Annotated[
    dict[str, Any] | None,
    Field(
        default=None,
        description="Keep only records matching, as in the HTTP API: "
        '{"metadata": {"customer_id": 42}} keeps records whose metadata holds exactly '
        'that typed value (42 and "42" differ); several keys must all match. An object '
        'applies operators: {"score": {"$gte": 3}, "tier": {"$in": ["gold", "silver"]}} '
        "($eq, $ne, $in, $gt, $gte, $lt, $lte; numbers match numbers, ISO 8601 date "
        'strings match strings). {"created_at": {"$gte": "2026-01-01T00:00:00Z"}} bounds '
        "when records were stored.",
    ),
]


def _metadata_filter(filters: dict[str, Any] | None) -> Any:
    """A ``filters`` argument ({"metadata": ..., "created_at": ...}), checked as the API
    checks its body's (:func:`memory.metadata.check_filter`, naming the place at fault)."""
    if not filters:
        return None
    unknown = sorted(set(filters) - {"metadata", "created_at"})
    if unknown:
        raise ToolError(
            f"filters: unknown filter {unknown[0][:40]!r}; the filters are 'metadata' and "
            "'created_at'"
        )
    return record_metadata.check_filter(
        filters.get("metadata"), created_at=filters.get("created_at")
    )


class ConversationTurnArg(BaseModel):
    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
    role: Annotated[
        Literal["user", "assistant", "tool", "other"],
        Field(description="user: the person this memory is for; other: another person."),
    ] = "user"
    speaker: Annotated[str, Field(max_length=MAX_SPEAKER_CHARS)] = ""
    occurred_at: Annotated[
        str | None, Field(description="When it was said, ISO 8601 with a time zone.")
    ] = None
    turn_id: Context = None
    session_id: Context = None


class ProposedFact(BaseModel):
    content: Annotated[str, Field(min_length=1, max_length=MAX_FACT_CONTENT_CHARS)]
    evidence: Annotated[
        list[RecordId],
        Field(
            min_length=1,
            max_length=MAX_FACT_EVIDENCE,
            description="Episode or record IDs it is drawn from.",
        ),
    ]
    fact_key: Annotated[str | None, Field(default=None, max_length=MAX_KEY_CHARS)] = None
    confidence: Annotated[float | None, Field(default=None, ge=0.0, le=1.0)] = None


IncludeBelow = Annotated[
    bool,
    Field(
        default=False,
        description="Also the same words' matches in the scopes below this one (one receipt "
        "per scope, bundled).",
    ),
]


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


def _answered[F: Callable[..., Any]](tool: F) -> F:
    """The tool, answering a JSON object as one-line JSON text plus structured content.

    A tool with a summary of its own builds its result (memory.mcp_results.answer)
    and it passes unchanged.
    """

    @functools.wraps(tool)
    def answer(**arguments: Any) -> Any:
        return mcp_results.tool_result(tool(**arguments))

    return answer  # type: ignore[return-value]


def _call[T](fn: Callable[[], T]) -> T:
    """Run one tool body: domain refusals become tool errors the model can read."""
    close_old_connections()
    try:
        return fn()
    except RecordNotFound as exc:
        raise ToolError(str(exc)) from exc
    except AccessDenied as exc:
        raise ToolError(
            "not allowed: outside this session's scope subtree or capabilities"
        ) from exc
    except (MemoryEngineError, ScopeError, UnstorableText) as exc:
        raise ToolError(str(exc)) from exc
    finally:
        close_old_connections()


# -- tools ------------------------------------------------------------------------------------

RECALL_BEHAVIOUR = (
    "Recall searches the session's scope and its ancestors (e.g. acme:alice:proj also sees "
    "acme:alice:*, acme:*:* and platform:*:*, each level weighted half the one below), returns "
    "active records only (never quarantined, superseded or forgotten ones) and is recorded in "
    "the audit chain. Each memory carries a calibrated confidence (0 to 1); when none reaches "
    "min_confidence the answer says abstained: no memory fits, so do not guess from memory."
)
REMEMBER_BEHAVIOUR = (
    "remember stores the message as an episode and keeps what the user states about themselves: "
    "keyed facts ('my backup email is ...', 'I prefer ...'), where a later value of the same "
    "fact supersedes the earlier one (history kept), and other first-person statements as "
    "notes. Questions, greetings, thanks, chit-chat and requests to the assistant store nothing "
    "(force=true also keeps other prose as a note). Content from webpages or tools (wrapped in "
    "<webpage>...</webpage> or with source_type) is quarantined: a person reviews it and it is "
    "never recalled before that."
)


def _annotations(
    *, read_only: bool, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    # openWorldHint is false throughout: every tool acts on this memory service only.
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def tool_registrar(
    server: MCPServer, principal: Principal, scope: Scope
) -> Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """A ``@register(capability, title, ...)`` decorator that lists a tool only when held.

    A session never sees a tool it could not call: a read-only token lists no
    write tool. The services check the capability again on every call. A tool
    answers with a compact text (its own summary, else its result as one-line
    JSON) and its whole result as structured content (memory.mcp_results).
    """

    def register(
        capability: str,
        title: str,
        *,
        read_only: bool,
        destructive: bool = False,
        idempotent: bool = False,
        description: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            if access.may(principal, capability, scope):
                server.tool(
                    title=title,
                    description=description,
                    annotations=_annotations(
                        read_only=read_only, destructive=destructive, idempotent=idempotent
                    ),
                )(_text_arguments(_answered(fn)))
            return fn

        return decorate

    return register


def add_memory_tools(server: MCPServer, principal: Principal, scope: Scope) -> None:
    """Register the memory verbs ``principal`` may use at ``scope`` (the session's scope)."""
    at = str(scope)
    tool = tool_registrar(server, principal, scope)
    add_subject_tools(server, principal, scope)

    @tool(
        access.WRITE,
        "Remember what the user said",
        read_only=False,
        description="Remember a message the user said, at this session's scope. "
        + REMEMBER_BEHAVIOUR,
    )
    def remember(
        text: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_TEXT_CHARS,
                description="The user's message, verbatim.",
            ),
        ],
        session_id: Context = None,
        turn_id: Context = None,
        source_type: Annotated[
            Literal["user_message", "webpage", "tool_output"] | None,
            Field(description="Where the text came from; webpage and tool_output are quarantined."),
        ] = None,
        force: Annotated[
            bool,
            Field(description="Also keep prose that states nothing about the user, as a note."),
        ] = False,
        metadata: MetadataArg = None,
        occurred_at: Annotated[
            str | None,
            Field(description="When the message was said, ISO 8601 with a time zone."),
        ] = None,
        expires_at: ExpiresAtArg = None,
    ) -> dict[str, Any]:
        return _call(
            lambda: services.remember(
                scope=at,
                text=text,
                session_id=session_id,
                turn_id=turn_id,
                source_type=source_type,
                force=force,
                metadata=metadata,
                occurred_at=occurred_at,
                expires_at=expires_at,
                principal=principal,
            ).as_dict()
        )

    @tool(access.WRITE, "Import a conversation", read_only=False)
    def import_conversation(
        turns: Annotated[
            list[ConversationTurnArg], Field(min_length=1, max_length=MAX_IMPORT_TURNS)
        ],
    ) -> dict[str, Any]:
        """Import a conversation's turns, in order, all or nothing. Each human turn (user,
        other) is kept word for word with its speaker and time, and the user's facts cite
        it; assistant turns are kept as episodes only (a user's plain "yes, exactly" right
        after one makes its statement a confirmed fact); tool turns land quarantined."""
        return _call(
            lambda: services.import_conversation(
                scope=at, turns=[turn.model_dump() for turn in turns], principal=principal
            ).as_dict()
        )

    @tool(access.WRITE, "Remember an explicit fact", read_only=False, idempotent=True)
    def remember_fact(
        key: Annotated[
            str,
            Field(
                min_length=1, max_length=MAX_KEY_CHARS, description="A slot, e.g. 'backup email'."
            ),
        ],
        value: Annotated[str, Field(min_length=1, max_length=MAX_VALUE_CHARS)],
        kind: Annotated[str | None, Field(default=None, max_length=MAX_KIND_CHARS)] = None,
        session_id: Context = None,
        metadata: MetadataArg = None,
        expires_at: ExpiresAtArg = None,
    ) -> dict[str, Any]:
        """Remember an explicit fact: key (a slot such as 'backup email') and its value.

        It replaces (supersedes) the earlier value of the same key at this scope;
        the old value stays in the record's history (get_record shows it).
        """
        return _call(
            lambda: services.remember_fact(
                scope=at,
                key=key,
                value=value,
                kind=kind,
                session_id=session_id,
                metadata=metadata,
                expires_at=expires_at,
                principal=principal,
            ).as_dict()
        )

    @tool(
        access.READ,
        "Recall memories",
        read_only=True,
        description="Recall the most relevant active memories for a query, with scores and "
        "record IDs (open one with get_record). " + RECALL_BEHAVIOUR,
    )
    def recall(
        query: Annotated[
            str, Field(max_length=MAX_QUERY_CHARS, description="What you want to know.")
        ],
        limit: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5,
        min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0,
        min_confidence: MinConfidence = ranking.DEFAULT_MIN_CONFIDENCE,
        session_id: Context = None,
        filters: FiltersArg = None,
    ) -> Annotated[CallToolResult, RecallOutput]:
        return mcp_results.answer(
            _call(
                lambda: services.recall(
                    scope=at,
                    query=query,
                    limit=limit,
                    min_score=min_score,
                    min_confidence=min_confidence,
                    session_id=session_id,
                    metadata=_metadata_filter(filters),
                    principal=principal,
                ).as_dict()
            ),
            mcp_results.recall_text,
        )

    @tool(
        access.READ,
        "Recall a prompt block",
        read_only=True,
        description="A <relevant_memories> block to put in the prompt ('' when nothing "
        "qualifies), bounded by max_items and max_chars. " + RECALL_BEHAVIOUR,
    )
    def recall_block(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS)],
        max_items: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5,
        max_chars: Annotated[int, Field(ge=1, le=MAX_BLOCK_CHARS)] = 2000,
        min_score: Annotated[float, Field(ge=0.0, le=1.0)] = services.RECALL_BLOCK_MIN_SCORE,
        min_confidence: MinConfidence = ranking.DEFAULT_MIN_CONFIDENCE,
        session_id: Context = None,
        filters: FiltersArg = None,
    ) -> Annotated[CallToolResult, RecallBlockOutput]:
        return mcp_results.answer(
            _call(
                lambda: services.recall_block(
                    scope=at,
                    query=query,
                    max_items=max_items,
                    max_chars=max_chars,
                    min_score=min_score,
                    min_confidence=min_confidence,
                    session_id=session_id,
                    metadata=_metadata_filter(filters),
                    principal=principal,
                ).as_dict()
            ),
            mcp_results.block_text,
        )

    @tool(access.WRITE, "Capture a conversation turn", read_only=False)
    def capture(
        role: Literal["user", "assistant", "tool_call", "tool_result"],
        content: Text,
        session_id: Context = None,
        turn_id: Context = None,
        metadata: MetadataArg = None,
        occurred_at: Annotated[
            str | None,
            Field(description="When a user turn was said, ISO 8601 with a time zone."),
        ] = None,
    ) -> dict[str, Any]:
        """Record one turn: a user turn is remembered (as remember does); assistant and tool
        turns leave only a digest and a size in the audit chain (an agent cannot poison its
        own memory)."""
        return _call(
            lambda: services.capture(
                scope=at,
                role=role,
                content=content,
                session_id=session_id,
                turn_id=turn_id,
                metadata=metadata,
                occurred_at=occurred_at,
                principal=principal,
            ).as_dict()
        )

    @tool(access.FORGET, "Preview a forget", read_only=True)
    def forget_preview(
        selector: Annotated[
            str | None,
            Field(
                default=None, max_length=MAX_SELECTOR_CHARS, description="Text the records contain."
            ),
        ] = None,
        record_ids: Annotated[
            list[RecordId] | None, Field(default=None, max_length=MAX_FORGET_RECORDS)
        ] = None,
        utterance: Annotated[
            str | None,
            Field(
                default=None,
                max_length=MAX_SELECTOR_CHARS,
                description="The user's words, e.g. 'forget my backup email'.",
            ),
        ] = None,
        episode_ids: EpisodeIds = None,
        session_id: SessionArg = None,
        include_below: IncludeBelow = False,
    ) -> Annotated[CallToolResult, ForgetPreviewOutput]:
        """Show exactly which records and stored messages a forget would purge at this scope
        (writes nothing).

        Give one of selector, record_ids, utterance, episode_ids or session_id. Words
        match stored messages too (a message that produced no record included). A vague
        request ('forget it'), one that matches nothing, or one that matches too many is
        an error saying so: ask the user to be specific. Then call forget with the
        preview's record_ids and episode_ids as expected_record_ids and expected_episode_ids,
        and its count as confirm_count when the count is above confirm_above (10). below
        names the same words' matches in the scopes below this one; include_below puts them
        in the lists.
        """
        return mcp_results.answer(
            _call(
                lambda: services.forget_preview(
                    scope=at,
                    selector=selector,
                    record_ids=record_ids,
                    utterance=utterance,
                    episode_ids=episode_ids,
                    session_id=session_id,
                    include_below=include_below,
                    principal=principal,
                ).as_dict()
            ),
            mcp_results.preview_text,
        )

    @tool(
        access.FORGET,
        "Forget records",
        read_only=False,
        destructive=True,
    )
    def forget(
        selector: Annotated[str | None, Field(default=None, max_length=MAX_SELECTOR_CHARS)] = None,
        record_ids: Annotated[
            list[RecordId] | None, Field(default=None, max_length=MAX_FORGET_RECORDS)
        ] = None,
        utterance: Annotated[str | None, Field(default=None, max_length=MAX_SELECTOR_CHARS)] = None,
        expected_record_ids: Annotated[
            list[RecordId] | None,
            Field(
                default=None,
                max_length=MAX_FORGET_RECORDS,
                description="The record_ids forget_preview returned; refused if the match changed.",
            ),
        ] = None,
        episode_ids: EpisodeIds = None,
        session_id: SessionArg = None,
        expected_episode_ids: Annotated[
            list[RecordId] | None,
            Field(
                default=None,
                max_length=MAX_FORGET_RECORDS,
                description="The episode_ids forget_preview returned; refused if the match "
                "changed.",
            ),
        ] = None,
        include_below: IncludeBelow = False,
        confirm_count: Annotated[
            int | None,
            Field(
                default=None,
                ge=0,
                description="The count forget_preview returned; required above 10.",
            ),
        ] = None,
        reference: Annotated[
            str | None,
            Field(
                default=None,
                max_length=MAX_FORGET_REFERENCE_CHARS,
                description="The request's reference, e.g. a ticket number (optional).",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ForgetOutput]:
        """Purge records and stored messages at this scope (and the superseded values of the
        same facts) and return a verifiable deletion receipt listing both. Irreversible: call
        forget_preview first and pass its record_ids and episode_ids as expected_record_ids
        and expected_episode_ids, and its count as confirm_count when above 10. An empty,
        vague, unmatched or too-broad request is refused, never read as 'everything'.
        include_below (with words) also forgets the matches in the scopes below this one and
        returns a bundle of one receipt per scope; forget never reaches any other scope."""
        return mcp_results.answer(
            _call(
                lambda: services.forget(
                    scope=at,
                    selector=selector,
                    record_ids=record_ids,
                    utterance=utterance,
                    episode_ids=episode_ids,
                    session_id=session_id,
                    expected_record_ids=expected_record_ids,
                    expected_episode_ids=expected_episode_ids,
                    include_below=include_below,
                    confirm_count=confirm_count,
                    reference=reference,
                    principal=principal,
                )
            ),
            mcp_results.forget_text,
        )

    @tool(access.READ, "List records", read_only=True)
    def list_records(
        status: Literal["active", "quarantined", "superseded", "tombstoned"] | None = None,
        text: Annotated[str | None, Field(default=None, max_length=1000)] = None,
        after: Annotated[
            str | None,
            Field(default=None, max_length=20, description="next_cursor of the previous page."),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 20,
        filters: FiltersArg = None,
    ) -> Annotated[CallToolResult, RecordListOutput]:
        """List records stored at exactly this scope, newest first (all statuses unless one
        is given); pass next_cursor as after for the next page."""

        def run() -> dict[str, Any]:
            page = selectors.list_records(
                principal,
                scope=at,
                status=status,
                text=text,
                metadata=_metadata_filter(filters),
                after=after,
                limit=limit,
            )
            return {
                "scope": at,
                "items": [selectors.record_as_dict(record) for record in page.items],
                "next_cursor": page.next_cursor,
            }

        return mcp_results.answer(_call(run), mcp_results.records_text)

    @tool(access.READ, "Show a record with its history", read_only=True)
    def get_record(record_id: RecordId) -> Annotated[CallToolResult, RecordDetailOutput]:
        """One record by ID with its history: what it superseded and what superseded it
        (nearest first), its source episode, the audit events naming it and the recalls that
        considered it. Works for any record recall returned, including an ancestor scope's."""

        def run() -> dict[str, Any]:
            try:
                return selectors.record_detail(principal, record_id).as_dict()
            except AccessDenied:
                # Out of reach: the same answer as an unknown ID, so nothing leaks.
                raise RecordNotFound(f"no record {record_id}: check the ID") from None

        return mcp_results.answer(_call(run), mcp_results.record_detail_text)

    @tool(access.PROPOSE, "Propose facts for review", read_only=False)
    def propose_facts(
        facts: Annotated[list[ProposedFact], Field(min_length=1, max_length=MAX_PROPOSED_FACTS)],
    ) -> dict[str, Any]:
        """Propose facts you inferred, citing this scope's episode or record IDs as evidence;
        they wait in quarantine until a person promotes them and are not recalled before."""
        return _call(
            lambda: services.propose_facts(
                scope=at,
                facts=[fact.model_dump(exclude_none=True) for fact in facts],
                principal=principal,
            ).as_dict()
        )

    @tool(access.READ, "Persona summary", read_only=True)
    def persona(
        max_chars: Annotated[int, Field(ge=1, le=MAX_BLOCK_CHARS)] = PERSONA_MAX_CHARS,
    ) -> dict[str, Any]:
        """A bounded summary of the active facts visible here (this scope and its ancestors),
        one '- [record_id] fact' per line."""
        return _call(
            lambda: services.persona(scope=at, max_chars=max_chars, principal=principal).as_dict()
        )

    @tool(access.READ, "Conversation scenes", read_only=True)
    def scenes(limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 20) -> dict[str, Any]:
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

    @tool(access.WRITE, "Log an agent action", read_only=False)
    def log_action(
        event_type: Annotated[
            str,
            Field(min_length=1, max_length=MAX_EVENT_TYPE_LENGTH, description="agent.<something>"),
        ],
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
            )
        )


# -- resources --------------------------------------------------------------------------------

RESOURCE_ROOT = "aetnaweb://memory"


RequestReference = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_FORGET_REFERENCE_CHARS,
        description="The request's reference: the ticket or letter it answers.",
    ),
]


def add_subject_tools(server: MCPServer, principal: Principal, scope: Scope) -> None:
    """Requests about the person the session's scope belongs to (issue 32): preview and erase
    everything under it, read an erasure, export everything under it.

    Listed only when ``principal`` may erase that subtree
    (:func:`aetnaweb.access.may_erase_subject`: an admin-level act, so a token
    must hold every capability a token may hold on a grant covering it, which
    an MCP session started with ``manage.py mcp`` never does). The services
    check it again on every call.
    """
    if scope.depth < 2 or not access.may_erase_subject(principal, scope):
        return
    at = str(scope)

    def register(
        title: str, *, read_only: bool, destructive: bool = False
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            server.tool(
                title=title,
                annotations=_annotations(read_only=read_only, destructive=destructive),
            )(_text_arguments(fn))
            return fn

        return decorate

    @register("Preview erasing the person", read_only=True)
    def erase_subject_preview() -> dict[str, Any]:
        """Counts per scope of what erasing everything under this session's scope (one
        person's subtree, every scope below included) would purge. Writes nothing."""
        return _call(
            lambda: erasure.subject_erasure_preview(subtree=at, principal=principal).as_dict()
        )

    @register("Erase the person", read_only=False, destructive=True)
    def erase_subject(
        reference: RequestReference,
        confirm: Annotated[
            str,
            Field(max_length=200, description="This session's scope, typed back exactly."),
        ],
    ) -> dict[str, Any]:
        """Erase every record (any status) and stored message under this session's scope,
        as a job ending in an erasure certificate. Irreversible: only on the person's own
        request, after erase_subject_preview; confirm must repeat the scope exactly.
        Refused under a legal hold. Follow it with erasure_status."""
        return _call(
            lambda: _erasure_state(
                erasure.start_subject_erasure(
                    subtree=at, reference=reference, confirmation=confirm, principal=principal
                )
            )
        )

    @register("Erasure status", read_only=True)
    def erasure_status(job_id: Annotated[int, Field(ge=1)]) -> dict[str, Any]:
        """An erasure's progress; when it is done, its certificate (per-scope receipts with
        inclusion proofs; tools/verify_audit.py --erasure-certificate checks it offline)."""

        def run() -> dict[str, Any]:
            job = Job.objects.filter(pk=job_id, kind=Job.Kind.ERASURE, scope=at).first()
            if job is None:
                raise RecordNotFound(f"no erasure {job_id} of {at}")
            state = _erasure_state(job)
            if job.has_file:
                state["certificate"] = erasure.erasure_certificate(
                    job_id=job.pk, principal=principal
                )
            return state

        return _call(run)

    @register("Export the person", read_only=False)
    def export_subject(reference: RequestReference) -> dict[str, Any]:
        """Everything stored under this session's scope (records in every status, stored
        messages, their audit events) with a manifest bound to the log
        (tools/verify_audit.py --subject-export checks it). Recorded in the audit chain."""
        return _call(
            lambda: subject_export.export_subject(
                subtree=at, reference=reference, principal=principal
            )
        )


def _erasure_state(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.pk,
        "subtree": job.scope or "",
        "status": job.status,
        "done": job.done,
        "total": job.total,
        "result": job.result,
        "error": job.error,
    }


def add_memory_resources(server: MCPServer, principal: Principal, scope: Scope) -> None:
    """Persona and recall blocks as resources: one per session scope, templates for any scope.

    A template names its scope in the URI; the services refuse (as an error the
    client sees) a scope outside the principal's subtree, e.g. a sibling.
    """
    if not access.may(principal, access.READ, scope):
        return

    def persona_text(at: str) -> str:
        def run() -> str:
            return str(services.persona(scope=at, principal=principal).as_dict()["text"])

        return _resource_call(run)

    def block_text(at: str, query: str) -> str:
        def run() -> str:
            check_storable_text(query, "query")
            return str(
                services.recall_block(scope=at, query=query, principal=principal).as_dict()["text"]
            )

        return _resource_call(run)

    @server.resource(
        f"{RESOURCE_ROOT}/{scope}/persona",
        name="persona",
        title=f"Persona at {scope}",
        description="The active facts visible at this session's scope, one per line.",
        mime_type="text/plain",
    )
    def session_persona() -> str:
        return persona_text(str(scope))

    @server.resource(
        RESOURCE_ROOT + "/{scope}/persona",
        name="persona_at",
        title="Persona at a scope",
        description="The persona of any scope this session may read, e.g. "
        f"{RESOURCE_ROOT}/{scope}/persona (a sibling scope is refused).",
        mime_type="text/plain",
    )
    def persona_at(scope: str) -> str:
        return persona_text(scope)

    @server.resource(
        RESOURCE_ROOT + "/{scope}/recall/{query}",
        name="recall_block_at",
        title="Recall block at a scope",
        description="A <relevant_memories> block for a percent-encoded query, e.g. "
        f"{RESOURCE_ROOT}/{scope}/recall/backup%20email. " + RECALL_BEHAVIOUR,
        mime_type="text/plain",
    )
    def recall_block_at(scope: str, query: str) -> str:
        return block_text(scope, unquote(query))


def _resource_call(fn: Callable[[], str]) -> str:
    """Run one resource read: a refusal becomes a resource error the client can read."""
    try:
        return _call(fn)
    except ToolError as exc:
        raise ResourceError(str(exc)) from exc


def build_server(
    scope: Scope | str,
    *,
    capabilities: Iterable[str] = DEFAULT_CAPABILITIES,
    name: str = "mcp",
) -> MCPServer:
    """A memory-only MCP server bound to ``scope`` (aetnaweb.mcp adds the actions tool)."""
    bound = Scope.parse(scope)
    principal = bound_principal(bound, capabilities, name=name)
    server = new_server(bound)
    add_memory_tools(server, principal, bound)
    add_memory_resources(server, principal, bound)
    return server


def new_server(scope: Scope) -> MCPServer:
    return MCPServer(
        "aetnaweb",
        title="aetnaweb memory",
        instructions=INSTRUCTIONS.format(scope=scope),
        version="1",
    )


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
