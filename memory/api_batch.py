"""``POST /api/v1/memory/remember/batch``: many messages in one call (see :mod:`memory.batch`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field, model_validator

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
from memory import batch
from memory.api_schemas import Metadata, RememberOut
from memory.errors import ExtractionError
from memory.limits import MAX_KEY_CHARS, MAX_TEXT_CHARS, MAX_VALUE_CHARS


class BatchItemIn(BodyIn):
    text: str | None = Field(None, min_length=1, max_length=MAX_TEXT_CHARS)
    key: str | None = Field(None, min_length=1, max_length=MAX_KEY_CHARS)
    value: str | None = Field(None, min_length=1, max_length=MAX_VALUE_CHARS)
    kind: str | None = Field(None, max_length=64)
    session_id: ContextStr | None = None
    turn_id: ContextStr | None = None
    source_type: Literal["user_message", "webpage", "tool_output"] | None = None
    force: bool = False
    metadata: Metadata
    expires_at: datetime | None = Field(
        None, description="When this item's records lapse (ISO 8601 with a zone, in the future)."
    )

    @model_validator(mode="after")
    def _text_or_key_value(self) -> BatchItemIn:
        if (self.text is None) == (self.key is None):
            raise ValueError("give either text, or key and value")
        if self.key is not None and self.value is None:
            raise ValueError("value is required with key")
        return self


class RememberBatchIn(BodyIn):
    scope: ScopeStr
    items: list[BatchItemIn] = Field(
        ...,
        min_length=1,
        max_length=batch.MAX_BATCH_ITEMS,
        description=f"1 to {batch.MAX_BATCH_ITEMS} messages or key/value facts, stored in order.",
    )


class RememberBatchOut(Schema):
    scope: str
    items: list[RememberOut] = Field(description="One result per item, in order.")
    results: list[RememberOut] = Field(
        json_schema_extra={"deprecated": True},
        description="Deprecated: the same list as items (kept until API v2).",
    )


def add_routes(router: Router) -> None:
    """Mounted by :func:`memory.api.mount` on the memory router."""

    @router.post(
        "/remember/batch",
        response={201: RememberBatchOut, 200: RememberBatchOut, **ERROR_RESPONSES},
        summary="Remember many messages at one scope in one transaction (all or nothing)",
    )
    @may_refuse(ExtractionError, InvalidInput)
    def remember_batch(request: HttpRequest, payload: RememberBatchIn) -> Status[dict[str, Any]]:
        """Each item is a message (``text``) or a fact (``key`` and ``value``), stored in order
        at exactly ``scope`` (capability ``write``). One result per item, in order. 201 when
        any item stored a record; 200 when none did (every item a duplicate or a message with
        no fact in it), as ``/remember`` answers for one. If any item is refused the answer
        is 400 naming ``items.<index>.<field>`` and nothing is stored."""
        require(request, access.WRITE, payload.scope)
        items = [batch.BatchItem(**item.model_dump()) for item in payload.items]
        # A refused item (BatchItemError) names items.<index>.<field> and its own code.
        results = batch.remember_batch(
            scope=payload.scope,
            items=items,
            principal=principal_of(request),
        )
        answers = [result.as_dict() for result in results]
        stored = any(answer["records"] for answer in answers)
        return Status(
            201 if stored else 200, {"scope": payload.scope, "items": answers, "results": answers}
        )
