"""Semantic reindex as a background job, started from the dashboard by an admin.

``manage.py memory reindex`` keeps running the same :func:`memory.vectors.reindex`
synchronously for an operator at a shell; this module records a
:class:`jobs.models.Job` so the work runs on the task queue
(:func:`memory.tasks.reindex_job`) with progress on its page. The reindex
only ever looks at active records that still lack a vector, so a job that
stopped (worker killed, error) is resumed by starting it again: nothing done
is redone.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import storable_text_arguments
from jobs.models import Job
from jobs.services import JobError, Progress, queue_after_commit, record_job, run_job
from memory import vector_cells, vectors

BATCH = 200


@storable_text_arguments
@transaction.atomic
def start_reindex(
    *, principal: Principal, scope: Scope | str | None = None, started_by: str | None = None
) -> Job:
    """Record a reindex of records stored at ``scope`` (``None``: every scope) and queue it after commit.

    Admins only: of the scope, or of the whole platform for every scope.
    Refused with nothing written when the semantic index is unavailable.
    """
    try:
        parsed = Scope.parse(scope) if scope is not None else Scope.platform()
    except ScopeError as exc:
        raise JobError(f"reindex scope refused: {exc}") from exc
    if not access.may_administer(principal, parsed):
        raise AccessDenied(f"{principal.label} may not reindex {parsed}")
    state = vectors.status()
    if not state.available:
        raise JobError(f"semantic index unavailable: {state.detail}")
    exact = None if parsed.is_platform else str(parsed)
    job = record_job(
        kind=Job.Kind.REINDEX,
        scope=exact,
        started_by=access.audit_actor(principal, started_by),
        requested_by_id=principal.user_id,
        total=vectors.missing_count(exact),
        params={"engine": state.engine, "model": state.model},
    )
    from memory.tasks import reindex_job  # memory.tasks imports this module

    queue_after_commit(job, reindex_job)
    return job


def run_reindex(job_id: int) -> Job:
    """Index what recorded reindex ``job_id`` covers now, in this thread (what the task does)."""
    return run_job(job_id, Job.Kind.REINDEX, _reindex)


def _reindex(job: Job, progress: Progress) -> dict[str, Any]:
    # Re-counted now: a resumed job (or records written since it was asked
    # for) changes what is left.
    progress.set(0, total=vectors.missing_count(job.scope))
    indexed = vectors.reindex(scope=job.scope, batch=BATCH, progress=progress.add)
    progress.set(indexed, total=max(indexed, job.total))
    # Then (SQLite) split the big scopes into cells: each refiled vector counts.
    trained = vectors.train_cells(job.scope, progress=progress.add)
    refiled = sum(t.refiled for t in trained)
    progress.set(indexed + refiled, total=max(indexed + refiled, job.total))
    result: dict[str, Any] = {"indexed": indexed}
    if trained:
        result["cells"] = {t.scope: t.cells for t in trained}
        result["refiled"] = refiled
    return result


CELLS_STARTED_BY = "system: vector cells"


def schedule_cells_if_due(scope: str) -> Job | None:
    """Queue a reindex of ``scope`` when it is due to be split into cells (SQLite; see vector_cells).

    Called after a write commits, now and then (vector_cells.note_write). Does
    nothing while a reindex of that scope is already queued or running, so a
    busy scope queues one job, not one per write, even when no task worker
    picks it up for hours.
    """
    if not vector_cells.due(scope):
        return None
    pending = Job.objects.filter(kind=Job.Kind.REINDEX, scope=scope, status=Job.Status.RUNNING)
    # A job still waiting for a worker counts however old it is: with no
    # worker running, a busy scope must not pile up one queued job per check.
    # Only a job whose worker started and then fell silent is replaced.
    if any(job.is_queued or not job.is_stale for job in pending):
        return None
    state = vectors.status()
    with transaction.atomic():
        job = record_job(
            kind=Job.Kind.REINDEX,
            scope=scope,
            started_by=CELLS_STARTED_BY,
            requested_by_id=None,
            total=vectors.missing_count(scope),
            params={"engine": state.engine, "model": state.model, "reason": "vector cells"},
        )
        from memory.tasks import reindex_job  # memory.tasks imports this module

        queue_after_commit(job, reindex_job)
    return job
