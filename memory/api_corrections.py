"""Correct a record by ID and read its lineage (see :mod:`memory.corrections`).

``PATCH /api/v1/memory/records/{record_id}`` and
``GET /api/v1/memory/records/{record_id}/history``.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    BodyIn,
    may_refuse,
    not_found,
    principal_of,
    refusals_about,
    require_capability,
)
from aetnaweb.errors import InvalidInput
from memory import corrections, selectors
from memory.api_schemas import METADATA_DESCRIPTION, MetadataValue, RecordOut, StoredRecordOut
from memory.errors import ExtractionError, RecordNotFound, RecordStateError
from memory.limits import MAX_TEXT_CHARS


class CorrectIn(BodyIn):
    content: str = Field(
        ...,
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="The corrected fact, stored as given (no extraction). Third-party "
        "content (<webpage>, tool blocks, or source_type) lands quarantined.",
    )
    source_type: Literal["user_message", "webpage", "tool_output"] | None = None
    metadata: dict[str, MetadataValue] | None = Field(
        None,
        description="Omit (or null) to carry the record's metadata over to the correction; "
        "an object replaces it ({} clears it). The corrected version keeps its own. "
        + METADATA_DESCRIPTION,
        examples=[{"customer_id": 42}],
    )


class CorrectOut(Schema):
    corrected_id: str
    record: StoredRecordOut
    trust_tier: str
    superseded_ids: list[str]


class HistoryOut(Schema):
    record_id: str
    lineage: list[RecordOut]


def add_routes(router: Router) -> None:
    """Mounted by :func:`memory.api.mount` on the memory router."""

    @router.patch(
        "/records/{record_id}",
        response={200: CorrectOut, 409: ERROR_RESPONSES[400], **ERROR_RESPONSES},
        summary="Correct a record: a new record supersedes it (history kept)",
    )
    @may_refuse(RecordStateError, ExtractionError, InvalidInput)
    def correct_record(request: HttpRequest, record_id: str, payload: CorrectIn) -> dict[str, Any]:
        """Capability ``write`` at the record's scope; any other record is 404. Trusted
        content supersedes the record at once; third-party content lands quarantined
        beside it. A superseded or forgotten record is 409 (the detail names its successor)."""
        require_capability(request, access.WRITE)
        if len(record_id) > 64:
            raise not_found()
        try:
            # A superseded or forgotten record: RecordStateError, 409 on record_id.
            with refusals_about("record_id"):
                result = corrections.correct_record(
                    record_id=record_id,
                    content=payload.content,
                    source_type=payload.source_type,
                    metadata=payload.metadata,
                    principal=principal_of(request),
                )
        except RecordNotFound:
            # The path names the record: a 404 like any record the token may not read.
            raise not_found() from None
        return result.as_dict()

    @router.get(
        "/records/{record_id}/history",
        response={200: HistoryOut, **ERROR_RESPONSES},
        summary="A record's lineage, oldest first",
    )
    @may_refuse()
    def record_history(request: HttpRequest, record_id: str) -> dict[str, Any]:
        """What the record replaced, the record, and what replaced it (capability ``read``);
        records the token may not read are left out, forgotten ones have no content."""
        require_capability(request, access.READ)
        if len(record_id) > 64:
            raise not_found()
        try:
            lineage = corrections.record_history(principal_of(request), record_id)
        except RecordNotFound:
            raise not_found() from None
        return {
            "record_id": record_id,
            "lineage": [selectors.record_as_dict(record) for record in lineage],
        }
