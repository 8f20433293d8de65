"""``POST /api/v1/memory/conversations/import``: a conversation's turns in one call.

Translation only: the body becomes :class:`memory.inputs.ConversationTurn`
items and :func:`memory.services.import_conversation` checks and stores them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    BodyIn,
    ContextStr,
    ScopeStr,
    may_refuse,
    principal_of,
    require,
)
from aetnaweb.errors import InvalidInput
from memory import services
from memory.api_schemas import StoredRecordOut
from memory.errors import ExtractionError
from memory.inputs import ConversationTurn
from memory.limits import MAX_IMPORT_TURNS, MAX_SPEAKER_CHARS, MAX_TEXT_CHARS


class TurnIn(BodyIn):
    text: str = Field(..., min_length=1, max_length=MAX_TEXT_CHARS, description="What was said.")
    role: Literal["user", "assistant", "tool", "other"] = Field(
        "user",
        description="user: the person the memory is for; other: another person; "
        "assistant and tool turns never become trusted facts by themselves.",
    )
    speaker: str = Field("", max_length=MAX_SPEAKER_CHARS, description="The speaker's name.")
    occurred_at: datetime | None = Field(
        None, description="When it was said (ISO 8601 with a time zone)."
    )
    turn_id: ContextStr | None = None
    session_id: ContextStr | None = None


class ImportConversationIn(BodyIn):
    scope: ScopeStr
    turns: list[TurnIn] = Field(
        ...,
        min_length=1,
        max_length=MAX_IMPORT_TURNS,
        description=f"1 to {MAX_IMPORT_TURNS} turns, in the order they were said.",
    )


class ImportedTurnOut(Schema):
    turn_id: str
    session_id: str
    role: str
    episode_id: str
    records: list[StoredRecordOut]
    duplicate_of: list[str]


class ImportConversationOut(Schema):
    scope: str
    turns: list[ImportedTurnOut]
    records_stored: int
    superseded_ids: list[str]


def add_routes(router: Router) -> None:
    """Mounted by :func:`memory.api.mount` on the memory router."""

    @router.post(
        "/conversations/import",
        response={200: ImportConversationOut, **ERROR_RESPONSES},
        summary="Import a conversation: each human turn kept word for word, facts linked to it",
    )
    @may_refuse(ExtractionError, InvalidInput)
    def import_conversation(request: HttpRequest, payload: ImportConversationIn) -> dict[str, Any]:
        """Store the turns at exactly ``scope`` (capability ``write``), in order, all or
        nothing. What each role keeps is in docs/agents.md ("Importing a conversation");
        a refused turn is a 400 naming ``turns.<index>.<field>`` and nothing is stored."""
        require(request, access.WRITE, payload.scope)
        turns = [
            ConversationTurn(
                **{
                    **turn.model_dump(),
                    "turn_id": turn.turn_id or "",
                    "session_id": turn.session_id or "",
                }
            )
            for turn in payload.turns
        ]
        result = services.import_conversation(
            scope=payload.scope, turns=turns, principal=principal_of(request)
        )
        return result.as_dict()
