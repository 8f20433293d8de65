"""Export a subject over HTTP (see :mod:`memory.services.subject_export`).

``POST /api/v1/memory/export-subject`` (202: the job is queued),
``GET /api/v1/memory/subject-exports/{job_id}`` (progress, counts, expiry) and
``GET /api/v1/memory/subject-exports/{job_id}/download`` (the ZIP file; 409
``subject_export_not_ready`` before it finished, 410 ``subject_export_expired``
once its file is purged). An admin-level act on the whole subtree: the service
checks it.
"""

from __future__ import annotations

from typing import Any

from django.http import FileResponse, HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    BodyIn,
    may_refuse,
    principal_of,
    refusals_about,
    require,
)
from jobs.models import Job
from memory.api_schemas import ScopeStr
from memory.services.erasure import MAX_REFERENCE_CHARS
from memory.services.subject_export import (
    expires_at,
    get_subject_export,
    is_expired,
    start_subject_export,
    subject_export_file,
)


class ExportSubjectIn(BodyIn):
    model_config = {
        "json_schema_extra": {"examples": [{"scope": "acme:dana:*", "reference": "SAR-2026-0042"}]}
    }

    scope: ScopeStr = Field(..., description="One person's subtree, e.g. acme:dana:*")
    reference: str = Field(
        ...,
        max_length=MAX_REFERENCE_CHARS,
        description="The request's reference (a ticket number); kept with the job, committed "
        "to the chain by digest",
    )


class SubjectExportOut(Schema):
    job_id: int
    subtree: str
    status: str = Field(description="running, done, error or stale")
    queued: bool
    done: int
    total: int
    reference: str
    result: dict[str, Any] = Field(
        description="When done: records, episodes, audit_events, scopes, manifest_sha256"
    )
    error: str
    expires_at: str | None = Field(description="When the file stops being served (then purged)")
    expired: bool
    file_sha256: str
    download_url: str | None


def _out(job: Job) -> dict[str, Any]:
    moment = expires_at(job)
    expired = job.status == Job.Status.DONE and is_expired(job)
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
        "expires_at": moment.isoformat() if moment else None,
        "expired": expired,
        "file_sha256": job.file_sha256,
        "download_url": (
            f"/api/v1/memory/subject-exports/{job.pk}/download"
            if job.has_file and not expired
            else None
        ),
    }


DOWNLOAD_RESPONSES = {**ERROR_RESPONSES, 409: ERROR_RESPONSES[400], 410: ERROR_RESPONSES[400]}
_ZIP_200 = {
    "responses": {
        "200": {
            "description": "The export as one ZIP file: export.json and records.csv, "
            "episodes.csv, audit_events.csv (their digests are in the manifest).",
            "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
        }
    }
}


def add_routes(router: Router) -> None:
    """Mounted by :func:`memory.api.mount` on the memory router."""

    @router.post(
        "/export-subject",
        response={202: SubjectExportOut, **ERROR_RESPONSES},
        summary="Export everything stored under one person's subtree, as a job",
    )
    @may_refuse("subject_export_refused")
    def export_subject(request: HttpRequest, payload: ExportSubjectIn) -> Status[dict[str, Any]]:
        """Queue the export of every record (any status), stored message and audit event of the
        scopes under ``scope``, with a manifest a ``memory.subject_exported`` event commits.

        Poll ``GET /subject-exports/{job_id}``; when done, ``download_url`` serves the ZIP
        until ``expires_at``. Check it offline with
        ``tools/verify_audit.py --subject-export FILE.zip --public-key KEY``.
        Admins of the subtree (a token: every capability on a grant covering it).
        """
        require(request, access.READ, payload.scope)
        with refusals_about("scope", SubjectExportError="reference"):
            job = start_subject_export(
                subtree=payload.scope, reference=payload.reference, principal=principal_of(request)
            )
        return Status(202, _out(job))

    @router.get(
        "/subject-exports/{job_id}",
        response={200: SubjectExportOut, **ERROR_RESPONSES},
        summary="A subject export's progress, result and expiry",
    )
    @may_refuse()
    def subject_export(request: HttpRequest, job_id: int) -> dict[str, Any]:
        """Its status, progress (done of total), counts when done, and when its file expires."""
        return _out(get_subject_export(job_id=job_id, principal=principal_of(request)))

    @router.get(
        "/subject-exports/{job_id}/download",
        response={200: None, **DOWNLOAD_RESPONSES},
        summary="A finished subject export's ZIP file, while it is kept",
        openapi_extra=_ZIP_200,
    )
    @may_refuse("subject_export_not_ready", "subject_export_expired")
    def download(request: HttpRequest, job_id: int) -> FileResponse:
        """The ZIP; 409 ``subject_export_not_ready`` while it runs or after it failed, 410
        ``subject_export_expired`` once its file expired or was purged (start a new export)."""
        job, path = subject_export_file(job_id=job_id, principal=principal_of(request))
        response = FileResponse(
            path.open("rb"),
            as_attachment=True,
            filename=f"subject-export-{job.pk}.zip",
            content_type="application/zip",
        )
        response["X-Content-SHA256"] = job.file_sha256
        return response
