"""Audit exports as background jobs: a scope's subtree (and a time range) written to a file.

The write path of the Exports page, ``manage.py audit export --async`` and the
tests: :func:`start_export` checks the requester's AUDIT grant and records a
:class:`jobs.models.Job`; after commit a task (:func:`audit.tasks.export_job`,
run by ``manage.py db_worker``) calls :func:`run_export`, which writes the
rows as JSON Lines under ``AETNAWEB_EXPORT_DIR`` (a temporary name renamed
when complete, so a half-written file is never offered) and stores the
file's SHA-256. The file is downloaded through a login- and grant-checked
view, never a static URL. Kept in its own module rather than
``audit/services.py``: that file holds the append path other work edits.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import Sum

from aetnaweb import access
from aetnaweb.access import SYSTEM, Principal
from aetnaweb.errors import DomainError
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import storable_text_arguments
from audit import selectors
from audit.canonical import canonical_json
from audit.models import AuditEvent, AuditSubject
from audit.verification import COLUMNS
from jobs.models import Job
from jobs.services import Progress, exports_dir, queue_after_commit, record_job, run_job

CHUNK = 2_000


class ExportError(DomainError, ValueError):
    """An export request refused before anything is recorded (bad scope or range)."""

    code = "invalid_export"
    status = 400
    meaning = "an audit export request is refused before anything is recorded (bad scope or range)"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=field)


def _utc(value: datetime | None, what: str) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ExportError(f"{what} needs a time zone (e.g. 2026-12-01T00:00:00Z)", field=what)
    return value.astimezone(UTC).isoformat()


@storable_text_arguments
@transaction.atomic
def start_export(
    *,
    principal: Principal,
    scope: Scope | str | None,
    since: datetime | None = None,
    until: datetime | None = None,
    started_by: str | None = None,
) -> Job:
    """Record an export of ``scope``'s subtree (``None``: every chain) and queue it after commit.

    ``since`` (inclusive) and ``until`` (exclusive) bound the events' creation
    time. Refused with nothing written: a malformed scope or range, or a
    scope the principal holds no AUDIT grant on (``AccessDenied``).
    """
    try:
        parsed = Scope.parse(scope) if scope is not None else Scope.platform()
    except ScopeError as exc:
        raise ExportError(f"export scope refused: {exc}", field="scope") from exc
    low, high = _utc(since, "since"), _utc(until, "until")
    if low is not None and high is not None and low >= high:
        raise ExportError("“since” must be before “until”", field="until")
    access.require(principal, access.AUDIT, parsed)
    total = (
        AuditSubject.objects.filter(**parsed.subtree_filter()).aggregate(n=Sum("event_count"))["n"]
        or 0
    )
    job = record_job(
        kind=Job.Kind.EXPORT,
        scope=None if parsed.is_platform else str(parsed),
        started_by=access.audit_actor(principal, started_by),
        requested_by_id=principal.user_id,
        total=total,
        params={"since": low, "until": high},
    )
    from audit.tasks import export_job  # audit.tasks imports this module

    queue_after_commit(job, export_job)
    return job


def run_export(job_id: int) -> Job:
    """Write recorded export ``job_id`` now, in this thread (what the task does)."""
    return run_job(job_id, Job.Kind.EXPORT, _write_export)


def _write_export(job: Job, progress: Progress) -> dict[str, Any]:
    scope = Scope.parse(job.scope) if job.scope else Scope.platform()
    # The requester's grant was checked when they asked; the worker reads as
    # the system, bounded to that subtree and to the rows that existed then.
    subjects = selectors.visible_subject_ids(
        SYSTEM, access.AUDIT, within=None if scope.is_platform else scope
    )
    rows = AuditEvent.objects.order_by("sequence")
    if subjects is not None:
        rows = rows.filter(subject_id__in=subjects)
    if job.params.get("since"):
        rows = rows.filter(created_at__gte=job.params["since"])
    if job.params.get("until"):
        rows = rows.filter(created_at__lt=job.params["until"])
    horizon = AuditEvent.objects.order_by("-sequence").values_list("sequence", flat=True).first()
    rows = rows.filter(sequence__lte=horizon or 0)

    folder = exports_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Unguessable, and ours: the download view never takes a name from a request.
    name = f"audit-export-{job.pk}-{secrets.token_hex(8)}.jsonl"
    temporary = folder / f".{name}.part"
    digest = hashlib.sha256()
    size = 0
    count = 0
    last = 0
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            while True:
                chunk = list(rows.filter(sequence__gt=last).values_list(*COLUMNS)[:CHUNK])
                for values in chunk:
                    line = (canonical_json(dict(zip(COLUMNS, values, strict=True))) + "\n").encode()
                    handle.write(line)
                    digest.update(line)
                    size += len(line)
                count += len(chunk)
                progress.set(count)
                if len(chunk) < CHUNK:
                    break
                last = chunk[-1][0]
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, folder / name)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return {
        "events": count,
        "file_name": name,
        "file_sha256": digest.hexdigest(),
        "file_bytes": size,
    }
