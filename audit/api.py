"""HTTP endpoints for auditor tokens, under ``/api/v1/audit/`` (capability ``audit``).

Verify the chains inside the token's subtree, export their events as JSON
Lines, and create a checkpoint of them to keep elsewhere. A token only ever
sees the chains of its own subtree: chains elsewhere are neither verified,
exported nor pinned, and naming one is a 404.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import NinjaAPI, Query, Router, Schema
from pydantic import Field

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    ScopeStr,
    document_error_codes,
    principal_of,
    require,
    require_capability,
)
from audit import selectors
from audit.canonical import canonical_json
from audit.checkpoints import CheckpointError
from audit.services import create_checkpoint
from audit.verification import verify_subjects

router = Router(tags=["audit"])

JSONL = "application/jsonl"


class VerifyQuery(Schema):
    scope: ScopeStr | None = Field(
        None, description="Only the chains inside this subtree (default: the token's subtree)."
    )


class SubjectVerdictOut(Schema):
    subject_id: str
    ok: bool
    events_checked: int
    first_bad_sequence: int | None
    reasons: list[str]


class VerifyOut(Schema):
    ok: bool
    events_checked: int
    first_bad_sequence: int | None
    subjects: list[SubjectVerdictOut]


class ExportQuery(Schema):
    subject: ScopeStr | None = Field(
        None, description="One chain (a scope); default: every chain the token may audit."
    )


def _jsonl_response(lines: Any, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(lines, content_type=JSONL)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _jsonl_200(description: str) -> dict[str, Any]:
    return {
        "responses": {
            "200": {
                "description": description,
                "content": {JSONL: {"schema": {"type": "string"}}},
            }
        }
    }


def _jsonl_201(description: str) -> dict[str, Any]:
    return {"responses": {"201": _jsonl_200(description)["responses"]["200"]}}


@router.get(
    "/verify",
    response={200: VerifyOut, **ERROR_RESPONSES},
    summary="Verify the audit chains inside the token's subtree",
    operation_id="verify_audit_chains",
)
def verify(request: HttpRequest, params: Query[VerifyQuery]) -> dict[str, Any]:
    """Recompute every event hash and link of each chain the token may audit
    (inside ``scope`` when given). Read-only. Capability ``audit``."""
    principal = principal_of(request)
    if params.scope is not None:
        require(request, access.AUDIT, params.scope)
    else:
        require_capability(request, access.AUDIT)
    subjects = selectors.subjects_visible(principal, access.AUDIT, within=params.scope)
    report = verify_subjects(subjects, principal=principal)
    return {
        "ok": report.ok,
        "events_checked": report.events_checked,
        "first_bad_sequence": report.first_bad_sequence,
        "subjects": [subject.as_dict() for subject in report.subjects],
    }


@router.get(
    "/export",
    response={200: None, **ERROR_RESPONSES},
    summary="Export audit events as JSON Lines (streamed)",
    operation_id="export_audit_events",
    openapi_extra=_jsonl_200("One canonical-JSON audit_log row per line, by sequence."),
)
def export(request: HttpRequest, params: Query[ExportQuery]) -> StreamingHttpResponse:
    """Every event of one chain (``subject``) or of every chain the token may audit,
    one row per line, in sequence order, streamed. Capability ``audit``."""
    if params.subject is not None:
        require(request, access.AUDIT, params.subject)
    else:
        require_capability(request, access.AUDIT)
    lines = selectors.export_lines(principal_of(request), subject=params.subject)
    return _jsonl_response(lines, f"audit-export-{_stamp()}.jsonl")


@router.post(
    "/checkpoint",
    response={201: None, 503: ERROR_RESPONSES[400], **ERROR_RESPONSES},
    summary="Create and download a checkpoint of the token's chains",
    operation_id="create_checkpoint",
    openapi_extra=_jsonl_201("One aetnamem-checkpoint-v1 line, to keep outside this server."),
)
def checkpoint(request: HttpRequest) -> HttpResponse:
    """Pin the head of every chain the token may audit in an ``aetnamem-checkpoint-v1``
    document (also kept by the server) and download it as one JSON Lines line.
    Keep it elsewhere: it is what later detects a deleted tail or a swapped database.
    Capability ``audit``."""
    require_capability(request, access.AUDIT)
    principal = principal_of(request)
    try:
        document = create_checkpoint(principal=principal)
    except CheckpointError as exc:
        # The server could not write its own copy (its sink); nothing was stored.
        return HttpResponse(
            canonical_json({"error": "checkpoint_unavailable", "field": None, "detail": str(exc)}),
            status=503,
            content_type="application/json",
        )
    response = HttpResponse(canonical_json(document) + "\n", content_type=JSONL, status=201)
    response["Content-Disposition"] = f'attachment; filename="checkpoint-{_stamp()}.jsonl"'
    response["Cache-Control"] = "no-store"
    return response


def mount(api: NinjaAPI) -> None:
    api.add_router("/audit/", router)
    document_error_codes(
        503, {"checkpoint_unavailable": "the server could not keep its own checkpoint copy"}
    )
