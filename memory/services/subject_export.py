"""Export a subject (issue 32, item 2, the right of access): everything stored under one
person's subtree, with a manifest bound to the log.

Every record (status, provenance, supersession links, metadata, dates), every
stored message and every audit event of the scopes under the subtree. The
manifest holds each section's count and digest; a ``memory.subject_exported``
event in the subtree's chain commits the manifest's digest, and the export
carries that event's inclusion proof under the signed checkpoint, so an
auditor checks offline (``tools/verify_audit.py --subject-export FILE``) that
the export is the one the log recorded, nothing dropped or added. The CSV
renderings of the three sections are bound the same way (their digests are in
the manifest).

On the dashboard, the API and the command line it runs as a job
(:func:`start_subject_export`, :func:`run_subject_export`): the job writes one
ZIP file (``export.json`` and the CSV files) into the exports directory, where
it is kept ``AETNAWEB_RETENTION_EXPORT_DAYS`` days; then the download answers
:class:`SubjectExportExpired` and the retention run purges the file (the job
row stays and says when). An erasure of the subtree purges it at once.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import secrets
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest, loads_strict, sha256_text
from audit.chain import PREIMAGE_FIELDS
from audit.models import AuditEvent
from audit.receipts import log_proof_for
from audit.services import lock_subject
from jobs.models import Job
from jobs.selectors import file_path
from jobs.services import Progress, exports_dir, queue_after_commit, record_job, run_job
from memory.errors import (
    SubjectErasureError,
    SubjectExportError,
    SubjectExportExpired,
    SubjectExportNotReady,
)
from memory.models import Episode, Record
from memory.services._common import _audit
from memory.services.erasure import clean_reference, require_subject_admin

SUBJECT_EXPORT_FORMAT = "aetnaweb-subject-export-v1"

RECORD_FIELDS = (
    "record_id",
    "scope",
    "status",
    "content",
    "fact_key",
    "kind",
    "source_type",
    "trust_tier",
    "confidence",
    "episode_id",
    "session_id",
    "turn_id",
    "supersedes_id",
    "superseded_by_id",
    "metadata",
    "evidence",
    "created_at",
    "updated_at",
    "deleted_at",
)
EPISODE_FIELDS = (
    "episode_id",
    "scope",
    "session_id",
    "turn_id",
    "source_type",
    "text",
    "created_at",
    "purged_at",
)
# An event as the audit log stores it: its sequence, the hash preimage's fields, its hash.
EVENT_FIELDS = ("sequence", *PREIMAGE_FIELDS, "event_hash")


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _rows(queryset: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{name: _plain(row[name]) for name in fields} for row in queryset.values(*fields)]


# Rows read per query while a job collects a subtree (progress is written between them).
COLLECT_CHUNK = 500
CSV_SECTIONS = ("records", "episodes", "audit_events")
EXPORT_MEMBER = "export.json"


def _collect(model: Any, parsed: Scope, fields: tuple[str, ...], progress: Progress | None) -> list:
    """Every row of ``model`` under the subtree, by primary key in chunks, ordered by scope then
    key (as the export lists them)."""
    where = parsed.subtree_filter()
    keyed: list[tuple[str, int, dict[str, Any]]] = []
    last = 0
    while True:
        chunk = list(
            model.objects.filter(**where, pk__gt=last)
            .order_by("pk")
            .values("pk", *fields)[:COLLECT_CHUNK]
        )
        if not chunk:
            break
        last = chunk[-1]["pk"]
        keyed.extend(
            (row["scope"], row["pk"], {n: _plain(row[n]) for n in fields}) for row in chunk
        )
        if progress is not None:
            progress.add(len(chunk))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [row for _, _, row in keyed]


def _refused(exc: SubjectErasureError) -> SubjectExportError:
    # The shared reference and subtree checks speak of an erasure's refusal; an
    # export's is its own code, with the same sentence.
    return exc if isinstance(exc, SubjectExportError) else SubjectExportError(str(exc))


def _require(principal: Principal, subtree: Scope | str, reference: str) -> tuple[Scope, str]:
    try:
        return require_subject_admin(principal, subtree), clean_reference(reference)
    except SubjectErasureError as exc:
        raise _refused(exc) from exc


@storable_text_arguments
@transaction.atomic
def export_subject(
    *, subtree: Scope | str, reference: str, principal: Principal, actor: str | None = None
) -> dict[str, Any]:
    """Everything stored under ``subtree`` and the audit events of its scopes, with a manifest
    whose digest a ``memory.subject_exported`` event commits. Admins of the subtree only."""
    parsed, cleaned = _require(principal, subtree, reference)
    records = _collect(Record, parsed, RECORD_FIELDS, None)
    episodes = _collect(Episode, parsed, EPISODE_FIELDS, None)
    return _seal(parsed, cleaned, records, episodes, access.audit_actor(principal, actor))


@transaction.atomic
def _seal(
    parsed: Scope,
    cleaned: str,
    records: list[dict[str, Any]],
    episodes: list[dict[str, Any]],
    actor: str,
) -> dict[str, Any]:
    """Add the audit events of the scopes, commit the manifest in the subtree's chain; the export."""
    scopes = sorted({row["scope"] for row in records} | {row["scope"] for row in episodes})
    lock_subject(str(parsed))
    events = _rows(
        AuditEvent.objects.filter(subject_id__in=[*scopes, str(parsed)]).order_by("sequence"),
        EVENT_FIELDS,
    )
    for row in events:
        row["payload"] = loads_strict(row["payload"])
    sections = {"records": records, "episodes": episodes, "audit_events": events}
    manifest = {
        "subtree": str(parsed),
        "reference_sha256": sha256_text(cleaned),
        "scopes": scopes,
        "records": {"count": len(records), "sha256": digest(records)},
        "episodes": {"count": len(episodes), "sha256": digest(episodes)},
        "audit_events": {"count": len(events), "sha256": digest(events)},
        # The CSV renderings, byte for byte: a reader of the CSV files checks them too.
        "csv": {
            f"{name}.csv": hashlib.sha256(_csv_text(rows, name).encode()).hexdigest()
            for name, rows in sections.items()
        },
    }
    recorded = _audit(
        scope=parsed,
        event_type="memory.subject_exported",
        actor=actor,
        payload={"manifest_sha256": digest(manifest), "records": len(records)},
    )
    return {
        "format": SUBJECT_EXPORT_FORMAT,
        "reference": cleaned,
        "manifest": manifest,
        "manifest_proof": log_proof_for(recorded),
        **sections,
    }


def _fields(section: str) -> tuple[str, ...]:
    return {"records": RECORD_FIELDS, "episodes": EPISODE_FIELDS, "audit_events": EVENT_FIELDS}[
        section
    ]


def _csv_text(rows: list[dict[str, Any]], section: str) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=_fields(section), lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v
                for k, v in row.items()
            }
        )
    return out.getvalue()


def export_csv(document: dict[str, Any], section: str) -> str:
    """One section (``records``, ``episodes`` or ``audit_events``) of an export as CSV (JSON
    cells for objects); its SHA-256 is the manifest's ``csv`` entry."""
    if section not in CSV_SECTIONS:
        raise ValueError(f"no section {section!r}: one of {', '.join(CSV_SECTIONS)}")
    return _csv_text(document[section], section)


def export_archive(document: dict[str, Any]) -> bytes:
    """The export as one ZIP file: ``export.json`` and one CSV file per section."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(EXPORT_MEMBER, json.dumps(document, indent=2, sort_keys=True))
        for section in CSV_SECTIONS:
            archive.writestr(f"{section}.csv", export_csv(document, section))
    return out.getvalue()


# -- as a job ----------------------------------------------------------------------------


@storable_text_arguments
@transaction.atomic
def start_subject_export(
    *,
    subtree: Scope | str,
    reference: str,
    principal: Principal,
    started_by: str | None = None,
    queue: bool = True,
) -> Job:
    """Record the export of everything under ``subtree`` and queue it; refused with nothing
    written (no job, no event) unless the caller administers the subtree and names the request."""
    parsed, cleaned = _require(principal, subtree, reference)
    where = parsed.subtree_filter()
    job = record_job(
        kind=Job.Kind.SUBJECT_EXPORT,
        scope=str(parsed),
        started_by=access.audit_actor(principal, started_by),
        requested_by_id=principal.user_id,
        total=Record.objects.filter(**where).count() + Episode.objects.filter(**where).count(),
        params={"reference": cleaned},
    )
    if queue:  # a shell command runs it at once instead (run_subject_export)
        from memory.tasks import subject_export_job

        queue_after_commit(job, subject_export_job)
    return job


def run_subject_export(job_id: int) -> Job:
    """Write the export recorded as job ``job_id``, in this thread (what the task does)."""
    return run_job(job_id, Job.Kind.SUBJECT_EXPORT, _export)


def _export(job: Job, progress: Progress) -> dict[str, Any]:
    parsed = Scope.parse(str(job.scope))
    # Read outside one long transaction so the progress written between chunks is seen.
    records = _collect(Record, parsed, RECORD_FIELDS, progress)
    episodes = _collect(Episode, parsed, EPISODE_FIELDS, progress)
    document = _seal(parsed, str(job.params["reference"]), records, episodes, job.started_by)
    body = export_archive(document)
    name = f"subject-export-{job.pk}-{secrets.token_hex(8)}.zip"
    directory = exports_dir()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(body)
    manifest = document["manifest"]
    return {
        "records": manifest["records"]["count"],
        "episodes": manifest["episodes"]["count"],
        "audit_events": manifest["audit_events"]["count"],
        "scopes": len(manifest["scopes"]),
        "manifest_sha256": digest(manifest),
        "file_name": name,
        "file_sha256": hashlib.sha256(body).hexdigest(),
        "file_bytes": len(body),
    }


def keep_days() -> int:
    """How long a subject export's file is kept (the audit exports' keep-by)."""
    return int(settings.AETNAWEB_RETENTION_EXPORT_DAYS)


def expires_at(job: Job) -> datetime | None:
    """When a finished export's file stops being served (the retention run then purges it)."""
    if job.finished_at is None or job.status != Job.Status.DONE:
        return None
    return job.finished_at + timedelta(days=keep_days())


def is_expired(job: Job) -> bool:
    moment = expires_at(job)
    return job.file_removed_at is not None or (moment is not None and timezone.now() >= moment)


def get_subject_export(*, job_id: int, principal: Principal) -> Job:
    """The subject export ``job_id``, to admins of its subtree; ``AccessDenied`` otherwise."""
    job = Job.objects.filter(pk=job_id, kind=Job.Kind.SUBJECT_EXPORT).first()
    if job is None or not job.scope or not access.may_erase_subject(principal, job.scope):
        raise AccessDenied(f"no subject export {job_id} that {principal.label} may read")
    return job


def subject_export_file(*, job_id: int, principal: Principal) -> tuple[Job, Path]:
    """The export's ZIP file while it is kept; refused with what to do next otherwise."""
    job = get_subject_export(job_id=job_id, principal=principal)
    if job.status != Job.Status.DONE:
        state = "it failed; start a new export" if job.status == Job.Status.ERROR else "poll it"
        raise SubjectExportNotReady(f"subject export {job_id} has not finished ({state})")
    path = file_path(job)
    if job.file_removed_at is not None:
        raise SubjectExportExpired(
            f"the file of subject export {job_id} was purged {job.file_removed_at:%Y-%m-%d %H:%M} "
            f"UTC (it expired, or the subject was erased): start a new export of {job.scope}"
        )
    moment = expires_at(job)
    if path is None or (moment is not None and timezone.now() >= moment):
        raise SubjectExportExpired(
            f"subject export {job_id} expired {moment:%Y-%m-%d %H:%M} UTC and its file is "
            f"purged: start a new export of {job.scope}"
        )
    return job, path


def subject_exports(*, subtree: Scope | str, principal: Principal, limit: int = 10) -> list[Job]:
    """The newest exports of exactly ``subtree``, to admins of it (an empty list otherwise)."""
    parsed = Scope.parse(subtree)
    if not access.may_erase_subject(principal, parsed):
        return []
    return list(
        Job.objects.filter(kind=Job.Kind.SUBJECT_EXPORT, scope=str(parsed)).order_by(
            "-started_at", "-id"
        )[:limit]
    )
