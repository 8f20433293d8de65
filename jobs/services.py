"""Every write to a job row: record it, queue it after commit, run it with progress, finish it.

An app that owns some long work calls :func:`record_job` inside its own
service (after its permission checks), passes the task that does the work to
:func:`queue_after_commit`, and the task body calls :func:`run_job` with a
function doing the work. The row is the source of truth; the task only says
"do it now", so a task lost with its worker leaves a row that reads stale
and can be retried from the page.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.models import Job

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL_SECONDS = 0.5
NOT_QUEUED = "could not be queued; is the task backend set up (AETNAWEB_TASKS_BACKEND)?"


class JobError(ValueError):
    """A job that cannot be (re)run, with a reason a person can act on."""


class Enqueueable(Protocol):
    def enqueue(self, *args: Any, **kwargs: Any) -> Any: ...


def exports_dir() -> Path:
    """Where export files are written: ``AETNAWEB_EXPORT_DIR`` (never under a static folder)."""
    return Path(settings.AETNAWEB_EXPORT_DIR)


def record_job(
    *,
    kind: str,
    scope: str | None,
    started_by: str,
    requested_by_id: int | None = None,
    total: int = 0,
    params: dict[str, Any] | None = None,
) -> Job:
    """Insert a job row that reads *queued* until a worker's first heartbeat."""
    now = timezone.now()
    return Job.objects.create(
        kind=kind,
        scope=scope,
        started_by=started_by,
        requested_by_id=requested_by_id,
        started_at=now,
        heartbeat_at=now,
        total=total,
        params=params or {},
    )


def queue_after_commit(job: Job, task: Enqueueable) -> None:
    """Hand ``job`` to ``task`` once the caller's transaction commits."""
    transaction.on_commit(partial(_enqueue, job.pk, task))


def _enqueue(job_id: int, task: Enqueueable) -> None:
    try:
        task.enqueue(job_id)
    except Exception:
        # The row is committed; without a task it would read "running" until
        # it goes stale. Say at once that it never started.
        logger.exception("job %s could not be queued", job_id)
        Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
            status=Job.Status.ERROR, finished_at=timezone.now(), error=NOT_QUEUED
        )


class Progress:
    """Called by the work with its running count; writes it and a heartbeat at most twice a second."""

    def __init__(self, job_id: int, *, done: int = 0) -> None:
        self.job_id = job_id
        self.done = done
        self.last_write = time.monotonic()

    def add(self, count: int) -> None:
        self.set(self.done + count)

    def set(self, done: int, *, total: int | None = None) -> None:
        self.done = done
        now = time.monotonic()
        if now - self.last_write < PROGRESS_INTERVAL_SECONDS and total is None:
            return
        self.last_write = now
        fields: dict[str, Any] = {"done": done, "heartbeat_at": timezone.now()}
        if total is not None:
            fields["total"] = total
        Job.objects.filter(pk=self.job_id).update(**fields)


Work = Callable[[Job, Progress], dict[str, Any]]


def run_job(job_id: int, kind: str, work: Work) -> Job:
    """Run the recorded job ``job_id`` now, in this thread, and store what ``work`` returns.

    ``work`` gets the row and a :class:`Progress`, and returns the result
    (counts, and for a file ``file_name``/``file_sha256``/``file_bytes``). A
    job that raises is stored as ``error`` with the exception's message, and
    the exception propagates (the task result records it too).
    """
    job = Job.objects.get(pk=job_id)
    if job.kind != kind:
        raise JobError(f"job {job_id} is a {job.kind} job, not {kind}")
    if not job.is_running:
        raise JobError(f"job {job_id} has already finished ({job.status})")
    # The first heartbeat says a worker picked it up (the page stops saying
    # "waiting for a task worker").
    Job.objects.filter(pk=job_id).update(heartbeat_at=timezone.now())
    progress = Progress(job_id)
    try:
        result = work(job, progress)
    except Exception as exc:
        Job.objects.filter(pk=job_id).update(
            status=Job.Status.ERROR,
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
            done=progress.done,
            error=_error_text(exc),
        )
        raise
    file_fields = {
        name: result.pop(name)
        for name in ("file_name", "file_sha256", "file_bytes")
        if name in result
    }
    now = timezone.now()
    Job.objects.filter(pk=job_id).update(
        status=Job.Status.DONE,
        finished_at=now,
        heartbeat_at=now,
        done=progress.done,
        result=result,
        **file_fields,
    )
    job.refresh_from_db()
    logger.info("%s job %s done: %s", kind, job_id, result)
    return job


def _error_text(exc: Exception) -> str:
    # Domain errors carry a message meant for people; anything else is named
    # by its type only (its text may hold data the page must not show).
    if isinstance(exc, (JobError, ValueError, RuntimeError, OSError)):
        return f"{type(exc).__name__}: {exc}"[:1000]
    return f"did not finish: {type(exc).__name__}"


def remove_file(job: Job) -> bool:
    """Delete a finished job's file and note when; ``False`` if it was already gone."""
    existed = False
    if job.file_name:
        path = exports_dir() / job.file_name
        try:
            path.unlink()
            existed = True
        except FileNotFoundError:
            pass
    Job.objects.filter(pk=job.pk).update(file_removed_at=timezone.now())
    return existed
