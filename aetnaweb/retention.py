"""Retention: remove operational rows and files past their keep-by, never evidence.

What one run removes (periods from settings, documented in docs/operators.md):

- ``idempotency_keys``: API idempotency rows past their ``expires_at``;
- ``rate_limit_windows``: per-token request counts of finished minutes;
- ``login_throttles``: sign-in failure counters that hold nothing back any
  more and saw no failure for ``AETNAWEB_RETENTION_LOGIN_THROTTLE_DAYS``;
- ``task_results``: finished task-queue rows older than
  ``AETNAWEB_RETENTION_TASK_RESULT_DAYS``;
- ``export_files``: audit export and subject export files older than
  ``AETNAWEB_RETENTION_EXPORT_DAYS`` (the job row stays, saying the file was
  removed; a subject export's download already answers "expired" from then);
- ``jobs``: finished job rows older than ``AETNAWEB_RETENTION_JOB_DAYS``;
- memory content that lapsed: what the retention policies on scope subtrees
  let go and records past their own ``expires_at``, purged with deletion
  receipts under the forget's lineage rules, scopes under a legal hold
  skipped and reported (:mod:`memory.services.retention`).

Audit events, checkpoints, deletion receipts, the Merkle tree, verification
runs and retrieval logs (the "why was this recalled" pages that audit events
link to) are kept: they are the evidence. Each real run appends one
``retention.run`` event with the counts (no keys, names or addresses) to the
platform chain in the same transaction as its deletes; a dry run only counts.

django.tasks has no scheduler: cron or a systemd timer calls
``manage.py retention run`` (see docs/operators.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from access.models import IdempotencyKey, LoginThrottle, RateLimitWindow
from access.ratelimits import WINDOW_SECONDS
from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.services import append_event
from jobs.models import Job
from jobs.services import Progress, queue_after_commit, record_job, remove_file, run_job
from memory.services import retention as memory_retention
from memory.services.holds import is_held

EVENT_TYPE = "retention.run"
CATEGORIES = (
    "idempotency_keys",
    "rate_limit_windows",
    "login_throttles",
    "task_results",
    "export_files",
    "jobs",
)


def policy() -> dict[str, int]:
    """The keep-by periods in days, as configured (shown on the page and recorded in the event)."""
    return {
        "export_days": settings.AETNAWEB_RETENTION_EXPORT_DAYS,
        "task_result_days": settings.AETNAWEB_RETENTION_TASK_RESULT_DAYS,
        "job_days": settings.AETNAWEB_RETENTION_JOB_DAYS,
        "login_throttle_days": settings.AETNAWEB_RETENTION_LOGIN_THROTTLE_DAYS,
    }


def require_retention_admin(principal: Principal) -> None:
    """Retention spans every tenant: admins of the whole platform only."""
    if not access.may_administer(principal, Scope.platform()):
        raise AccessDenied(f"{principal.label} may not run retention")


@storable_text_arguments
@transaction.atomic
def start_retention(
    *, principal: Principal, dry_run: bool = False, started_by: str | None = None
) -> Job:
    """Record a retention run and queue it after commit (platform admins only)."""
    require_retention_admin(principal)
    job = _record(principal, dry_run=dry_run, started_by=started_by)
    from aetnaweb.tasks import retention_job  # aetnaweb.tasks imports this module

    queue_after_commit(job, retention_job)
    return job


@storable_text_arguments
def run_retention_now(
    *, principal: Principal, dry_run: bool = False, started_by: str | None = None
) -> Job:
    """Record a retention run and execute it in this process (the shell command, cron)."""
    require_retention_admin(principal)
    with transaction.atomic():
        job = _record(principal, dry_run=dry_run, started_by=started_by)
    return run_retention(job.pk)


def _record(principal: Principal, *, dry_run: bool, started_by: str | None) -> Job:
    return record_job(
        kind=Job.Kind.RETENTION,
        scope=None,
        started_by=access.audit_actor(principal, started_by),
        requested_by_id=principal.user_id,
        total=len(CATEGORIES) + 1,
        params={"dry_run": dry_run, "policy": policy()},
    )


def run_retention(job_id: int) -> Job:
    """Execute recorded retention run ``job_id`` now, in this thread (what the task does)."""
    return run_job(job_id, Job.Kind.RETENTION, _sweep)


def _candidates(now: datetime, job: Job) -> dict[str, QuerySet[Any]]:
    days = job.params.get("policy") or policy()
    current_window = int(now.timestamp()) // WINDOW_SECONDS * WINDOW_SECONDS
    return {
        "idempotency_keys": IdempotencyKey.objects.filter(expires_at__lt=now),
        "rate_limit_windows": RateLimitWindow.objects.filter(window_start__lt=current_window),
        "login_throttles": LoginThrottle.objects.filter(
            Q(retry_at__isnull=True) | Q(retry_at__lte=now),
            last_failure_at__lt=now - timedelta(days=days["login_throttle_days"]),
        ),
        "task_results": DBTaskResult.objects.finished().filter(
            finished_at__lt=now - timedelta(days=days["task_result_days"])
        ),
        "export_files": _not_held(
            Job.objects.filter(
                kind__in=(Job.Kind.EXPORT, Job.Kind.SUBJECT_EXPORT),
                status=Job.Status.DONE,
                file_removed_at__isnull=True,
                finished_at__lt=now - timedelta(days=days["export_days"]),
            ).exclude(file_name="")
        ),
        # A job whose file is still on disk keeps its row (the row names the file).
        "jobs": Job.objects.exclude(status=Job.Status.RUNNING)
        .exclude(pk=job.pk)
        .filter(Q(file_name="") | Q(file_removed_at__isnull=False))
        .filter(finished_at__lt=now - timedelta(days=days["job_days"])),
    }


def _not_held(exports: QuerySet[Job]) -> QuerySet[Job]:
    """Export files of a scope under a legal hold are kept past their keep-by (issue 32)."""
    held = [
        export.pk
        for export in exports.exclude(scope__isnull=True).only("pk", "scope")
        if is_held(str(export.scope))
    ]
    return exports.exclude(pk__in=held)


def _sweep(job: Job, progress: Progress) -> dict[str, Any]:
    now = timezone.now()
    dry_run = bool(job.params.get("dry_run"))
    counts: dict[str, int] = {}
    candidates = _candidates(now, job)
    if dry_run:
        for step, name in enumerate(CATEGORIES, start=1):
            counts[name] = candidates[name].count()
            progress.set(step)
        preview = memory_retention.lapsed_counts(now)
        progress.set(len(CATEGORIES) + 1)
        return {"dry_run": True, "removed": counts, "memory": preview}
    # Memory content first, scope by scope (each purge its own transaction,
    # event and receipt, as a forget), so a hold refusing one scope stops no other.
    memory = memory_retention.purge_lapsed(actor=job.started_by, job_id=job.pk, now=now).summary()
    # Files first, outside the transaction: a file is gone once unlinked, and
    # its row then says so whatever happens to the rest of the run.
    for export in candidates["export_files"].iterator():
        remove_file(export)
        counts["export_files"] = counts.get("export_files", 0) + 1
    counts.setdefault("export_files", 0)
    with transaction.atomic():
        for step, name in enumerate(CATEGORIES, start=1):
            if name != "export_files":
                counts[name] = _delete(candidates[name])
            progress.set(step)
        append_event(
            subject=Scope.platform(),
            event_type=EVENT_TYPE,
            actor=job.started_by,
            payload={
                "job": job.pk,
                "removed": counts,
                "policy": job.params.get("policy"),
                # Counts only: the receipts are in each scope's own chain.
                "memory": {
                    "records": memory["records"],
                    "episodes": memory["episodes"],
                    "receipts": len(memory["receipts"]),
                    "held_scopes": len(memory["held"]),
                },
            },
        )
        progress.set(len(CATEGORIES) + 1)
    return {
        "dry_run": False,
        "removed": {name: counts[name] for name in CATEGORIES},
        "memory": memory,
    }


def _delete(rows: QuerySet[Any]) -> int:
    # The count of rows of the queried model only (not cascaded ones).
    _, per_model = rows.delete()
    return int(per_model.get(rows.model._meta.label, 0)) if per_model else 0
