"""Erase a subject and hold a subtree over HTTP (see :mod:`memory.services.erasure`, ``holds``).

``POST /api/v1/memory/erase-subject/preview``, ``POST /api/v1/memory/erase-subject``
(202: the job is queued), ``GET /api/v1/memory/erasures/{job_id}`` (progress) and
``GET /api/v1/memory/erasures/{job_id}/certificate``; legal holds at
``/api/v1/memory/legal-holds`` (list, set) and ``/legal-holds/lift``. Exporting a
subject: :mod:`memory.api_subject_export`. Both are
admin-level acts on the whole subtree: the services check it.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    BodyIn,
    may_refuse,
    not_found,
    principal_of,
    refusals_about,
    require,
)
from aetnaweb.errors import InvalidInput
from aetnaweb.scopes import Scope
from jobs.models import Job
from memory.api_schemas import ScopeStr
from memory.errors import LegalHoldError, SubjectErasureError
from memory.services.erasure import (
    MAX_REFERENCE_CHARS,
    erasure_certificate,
    start_subject_erasure,
    subject_erasure_preview,
)
from memory.services.holds import legal_holds, lift_legal_hold, set_legal_hold


class EraseSubjectPreviewIn(BodyIn):
    scope: ScopeStr = Field(..., description="One person's subtree, e.g. acme:dana:*")


class EraseSubjectIn(BodyIn):
    model_config = {
        "json_schema_extra": {
            "examples": [
                {"scope": "acme:dana:*", "reference": "DSR-2026-0042", "confirm": "acme:dana:*"}
            ]
        }
    }

    scope: ScopeStr = Field(..., description="One person's subtree, e.g. acme:dana:*")
    reference: str = Field(
        ...,
        max_length=MAX_REFERENCE_CHARS,
        description="The request's reference (a ticket number); kept with the erasure and "
        "in its certificate, committed to the chain by digest",
    )
    confirm: str = Field(..., max_length=200, description="The scope again, typed exactly")


class ErasurePreviewOut(Schema):
    subtree: str
    scopes: list[dict[str, Any]]
    records: int
    episodes: int
    confirmation: str
    holds: list[dict[str, str]]


class ErasureOut(Schema):
    job_id: int
    subtree: str
    status: str
    queued: bool
    done: int
    total: int
    reference: str
    result: dict[str, Any]
    error: str
    certificate_url: str | None


class LegalHoldIn(BodyIn):
    model_config = {
        "json_schema_extra": {"examples": [{"scope": "acme:dana:*", "reference": "CASE-2026-7"}]}
    }

    scope: ScopeStr = Field(..., description="The subtree to hold (it and every scope below)")
    reference: str = Field(..., max_length=200, description="The matter or order the hold answers")


class LegalHoldLiftIn(BodyIn):
    scope: ScopeStr = Field(..., description="The scope whose hold is lifted (exactly)")


class LegalHoldOut(Schema):
    hold_id: str
    scope: str
    reference: str
    set_by: str
    set_at: str
    lifted_by: str
    lifted_at: str | None
    audit_event_id: str


class LegalHoldListOut(Schema):
    items: list[dict[str, Any]]
    holds: list[dict[str, Any]] = Field(
        json_schema_extra={"deprecated": True},
        description="Deprecated: the same list as items (kept until API v2).",
    )


class LegalHoldQuery(Schema):
    scope: ScopeStr


def _erasure_out(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.pk,
        "subtree": job.scope or "",
        "status": "stale" if job.is_stale else job.status,
        "queued": job.is_queued,
        "done": job.done,
        "total": job.total,
        "reference": str(job.params.get("reference", "")),
        "result": job.result,
        "error": job.error,
        "certificate_url": (
            f"/api/v1/memory/erasures/{job.pk}/certificate" if job.has_file else None
        ),
    }


def _erasure(request: HttpRequest, job_id: int) -> Job:
    """A subject erasure the caller administers; any other ID is a 404."""
    job = Job.objects.filter(pk=job_id, kind=Job.Kind.ERASURE).first()
    if job is None or not job.scope:
        raise not_found()
    if not access.may_erase_subject(principal_of(request), Scope.parse(job.scope)):
        raise not_found()
    return job


CONFLICT_RESPONSES = {**ERROR_RESPONSES, 409: ERROR_RESPONSES[400]}


def add_routes(router: Router) -> None:
    """Mounted by :func:`memory.api.mount` on the memory router."""

    @router.post(
        "/erase-subject/preview",
        response={200: ErasurePreviewOut, **ERROR_RESPONSES},
        summary="Preview erasing one person's subtree: counts per scope (writes nothing)",
    )
    @may_refuse(SubjectErasureError, InvalidInput)
    def erase_subject_preview(
        request: HttpRequest, payload: EraseSubjectPreviewIn
    ) -> dict[str, Any]:
        """What erasing every scope under ``scope`` would purge (admins of the subtree)."""
        require(request, access.READ, payload.scope)
        with refusals_about("scope"):
            preview = subject_erasure_preview(
                subtree=payload.scope, principal=principal_of(request)
            )
        return preview.as_dict()

    @router.post(
        "/erase-subject",
        response={202: ErasureOut, **ERROR_RESPONSES},
        summary="Erase everything stored under one person's subtree, as a job with a certificate",
    )
    @may_refuse(SubjectErasureError, LegalHoldError, InvalidInput)
    def erase_subject(request: HttpRequest, payload: EraseSubjectIn) -> Status[dict[str, Any]]:
        """Queue the erasure of every record (any status) and stored message under ``scope``.

        ``confirm`` must repeat ``scope`` exactly and ``reference`` name the request.
        Poll ``GET /erasures/{job_id}``; when it is done, the certificate (every
        per-scope deletion receipt with its inclusion proof under a signed
        checkpoint) is at ``certificate_url`` and checks offline with
        ``tools/verify_audit.py --erasure-certificate FILE --public-key KEY``.
        """
        require(request, access.READ, payload.scope)
        with refusals_about("scope"):
            job = start_subject_erasure(
                subtree=payload.scope,
                reference=payload.reference,
                confirmation=payload.confirm,
                principal=principal_of(request),
            )
        return Status(202, _erasure_out(job))

    @router.get(
        "/erasures/{job_id}",
        response={200: ErasureOut, **ERROR_RESPONSES},
        summary="A subject erasure's progress and result",
    )
    @may_refuse()
    def erasure(request: HttpRequest, job_id: int) -> dict[str, Any]:
        """Its status, progress (done of total) and, when finished, counts per scope."""
        return _erasure_out(_erasure(request, job_id))

    @router.get(
        "/erasures/{job_id}/certificate",
        response={200: dict[str, Any], **ERROR_RESPONSES},
        summary="A finished subject erasure's certificate (aetnaweb-erasure-certificate-v1)",
    )
    @may_refuse()
    def erasure_certificate_json(request: HttpRequest, job_id: int) -> dict[str, Any]:
        """The certificate file, as JSON; 400 `subject_erasure_refused` while it has not finished."""
        job = _erasure(request, job_id)
        return erasure_certificate(job_id=job.pk, principal=principal_of(request))

    @router.get(
        "/legal-holds",
        response={200: LegalHoldListOut, **ERROR_RESPONSES},
        summary="Legal holds in force over a scope or inside it",
    )
    @may_refuse(InvalidInput)
    def list_legal_holds(request: HttpRequest, params: Query[LegalHoldQuery]) -> dict[str, Any]:
        """Holds that keep ``scope``: at it, at an ancestor, or below it (capability ``read``)."""
        require(request, access.READ, params.scope)
        holds = legal_holds(principal=principal_of(request), scope=params.scope)
        items = [
            {
                "hold_id": h.hold_id,
                "scope": h.scope,
                "reference": h.reference,
                "set_by": h.set_by,
                "set_at": h.set_at.isoformat(),
            }
            for h in holds
        ]
        return {"items": items, "holds": items}  # holds: deprecated alias of items

    @router.post(
        "/legal-holds",
        response={201: LegalHoldOut, **CONFLICT_RESPONSES},
        summary="Set a legal hold: every purge at the scope and below is refused until lifted",
    )
    @may_refuse(LegalHoldError, InvalidInput)
    def create_legal_hold(request: HttpRequest, payload: LegalHoldIn) -> Status[dict[str, Any]]:
        """Forget, reject and erasure at or below ``scope`` answer 409 ``legal_hold`` while it holds."""
        require(request, access.READ, payload.scope)
        with refusals_about("scope"):
            result = set_legal_hold(
                scope=payload.scope, reference=payload.reference, principal=principal_of(request)
            )
        return Status(201, result.as_dict())

    @router.post(
        "/legal-holds/lift",
        response={200: LegalHoldOut, **CONFLICT_RESPONSES},
        summary="Lift the legal hold at exactly one scope",
    )
    @may_refuse(LegalHoldError, InvalidInput)
    def lift(request: HttpRequest, payload: LegalHoldLiftIn) -> dict[str, Any]:
        """Purges at the scope are possible again; the lift is audited."""
        require(request, access.READ, payload.scope)
        with refusals_about("scope"):
            result = lift_legal_hold(scope=payload.scope, principal=principal_of(request))
        return result.as_dict()
