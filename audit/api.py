"""HTTP endpoints for auditor tokens, under ``/api/v1/audit/`` (capability ``audit``).

Verify the chains inside the token's subtree, export their events as JSON
Lines, create a checkpoint of them to keep elsewhere, and fetch the
consistency bundle between two checkpoints. A token only ever sees the
chains of its own subtree: chains elsewhere are neither verified, exported
nor pinned, and naming one (or a checkpoint pinning one) is a 404.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import NinjaAPI, Query, Router, Schema
from pydantic import ConfigDict, Field

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    ApiError,
    ScopeStr,
    document_error_codes,
    may_refuse,
    not_found,
    principal_of,
    require,
    require_capability,
)
from audit import selectors
from audit.canonical import canonical_json
from audit.checkpoints import CONSISTENCY_BUNDLE_FORMAT, CheckpointError
from audit.exports import ExportError
from audit.models import Checkpoint
from audit.selectors import AuditQueryError
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
@may_refuse(AuditQueryError)
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
@may_refuse(AuditQueryError, ExportError)
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
@may_refuse("checkpoint_unavailable")
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
        # Not the kernel's DomainError handler: here the class's usual meaning (a
        # bad checkpoint file, 400) does not apply; issuing failed on our side (503),
        # and this body has been canonical JSON since the endpoint shipped.
        return HttpResponse(
            canonical_json({"error": "checkpoint_unavailable", "field": None, "detail": str(exc)}),
            status=503,
            content_type="application/json",
        )
    response = HttpResponse(canonical_json(document) + "\n", content_type=JSONL, status=201)
    response["Content-Disposition"] = f'attachment; filename="checkpoint-{_stamp()}.jsonl"'
    response["Cache-Control"] = "no-store"
    return response


_ROOT_EXAMPLE = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
_NOTE_EXAMPLE = (
    "example.org/audit\n{size}\n" + _ROOT_EXAMPLE + "\n\n"
    "\u2014 example.org/audit AbCdEf3oJ1f0VxqQmJx0k9Q...=\n"
)
_BUNDLE_EXAMPLE: dict[str, Any] = {
    "format": CONSISTENCY_BUNDLE_FORMAT,
    "old": _NOTE_EXAMPLE.format(size=12),
    "new": _NOTE_EXAMPLE.format(size=40),
    "old_head": {
        "checkpoint_id": 3,
        "created_at": "2026-05-01T09:00:00.000000Z",
        "checkpoint_sha256": "9f2c...64 hex",
        "tree_size": 12,
        "root_hash": _ROOT_EXAMPLE,
        "signed": True,
    },
    "new_head": {
        "checkpoint_id": 7,
        "created_at": "2026-05-02T09:00:00.000000Z",
        "checkpoint_sha256": "41be...64 hex",
        "tree_size": 40,
        "root_hash": _ROOT_EXAMPLE,
        "signed": True,
    },
    "proof": [_ROOT_EXAMPLE, _ROOT_EXAMPLE, _ROOT_EXAMPLE],
    "consistent": True,
    "fork": False,
    "failures": [],
    "signatures": {"old": "verified", "new": "verified"},
}
_MAX_ID = 2**63 - 1


class ConsistencyQuery(Schema):
    old: int = Field(
        ..., ge=1, le=_MAX_ID, description="ID of the older checkpoint (as the dashboard lists it)."
    )
    new: int | None = Field(
        None,
        ge=1,
        le=_MAX_ID,
        description="ID of the newer checkpoint; default: the newest one the token may see.",
    )


class LogHeadOut(Schema):
    checkpoint_id: int
    created_at: str
    checkpoint_sha256: str
    tree_size: int
    root_hash: str = Field(description="Base64 of the 32-byte RFC 6962 root.")
    signed: bool


class ConsistencyBundleOut(Schema):
    """A self-contained consistency bundle (docs/auditors.md), checked offline with
    ``python3 tools/verify_audit.py --consistency BUNDLE --public-key KEY``."""

    model_config = ConfigDict(json_schema_extra={"examples": [_BUNDLE_EXAMPLE]})

    format: str = Field(description=f"Always {CONSISTENCY_BUNDLE_FORMAT}.")
    old: str | None = Field(description="The older checkpoint's signed note; null if unsigned.")
    new: str | None = Field(description="The newer checkpoint's signed note; null if unsigned.")
    old_head: LogHeadOut
    new_head: LogHeadOut
    proof: list[str] = Field(description="RFC 9162 consistency proof, base64 hashes.")
    consistent: bool = Field(description="This server's verdict: NEW extends OLD.")
    fork: bool = Field(description="True when the log cannot show NEW extends OLD (rewritten).")
    failures: list[str] = Field(description="Why not consistent (a FORK line, a bad signature).")
    signatures: dict[str, str] = Field(
        description="Each note's signature by this server's key: verified, invalid, "
        "not signed, or not checked (no key configured here)."
    )


@router.get(
    "/checkpoints/consistency",
    response={200: ConsistencyBundleOut, 503: ERROR_RESPONSES[400], **ERROR_RESPONSES},
    summary="Prove that a newer checkpoint extends an older one (or flag a fork)",
    operation_id="checkpoint_consistency_bundle",
)
@may_refuse("checkpoint_not_provable", "checkpoint_unavailable")
def consistency(request: HttpRequest, params: Query[ConsistencyQuery]) -> dict[str, Any]:
    """The consistency bundle between checkpoint ``old`` and checkpoint ``new`` (default:
    the newest the token may see): both signed notes, their sizes and roots, and the
    RFC 9162 proof from this log. Keep it with your checkpoints and check it offline with
    ``tools/verify_audit.py --consistency``. A fork (the log no longer extends the older
    checkpoint) is a 200 with ``consistent: false, fork: true`` and the reason. Both must
    be checkpoints that pin only chains the token may audit, else 404. Capability ``audit``."""
    require_capability(request, access.AUDIT)
    try:
        return selectors.consistency_bundle(
            principal_of(request), old_id=params.old, new_id=params.new
        )
    except Checkpoint.DoesNotExist as exc:
        raise not_found() from exc
    except CheckpointError as exc:
        if exc.field is None:  # the server's own key could not be read
            raise ApiError(503, "checkpoint_unavailable", str(exc)) from exc
        raise ApiError(400, "checkpoint_not_provable", str(exc), exc.field) from exc


def mount(api: NinjaAPI) -> None:
    api.add_router("/audit/", router)
    document_error_codes(
        503,
        {
            "checkpoint_unavailable": "the server could not keep its own checkpoint copy, or"
            " read its checkpoint key"
        },
    )
    document_error_codes(
        400,
        {
            "checkpoint_not_provable": "no consistency proof answers this pair (a checkpoint "
            "from before the Merkle log, the older one given as new, an empty log)"
        },
    )
