"""Reads of job rows, with visibility built in.

- An export is its requester's alone (it holds audit rows of their scopes at
  the time they asked), and only while they still hold AUDIT on its scope.
- A reindex or retention job is visible to admins of its scope (retention
  and "every scope" jobs: admins of the whole platform).

Anything else does not exist for the caller (views answer 404).
"""

from __future__ import annotations

from pathlib import Path

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from jobs.models import Job
from jobs.services import exports_dir


def _scope(job: Job) -> Scope:
    return Scope.parse(job.scope) if job.scope else Scope.platform()


def may_see(principal: Principal, job: Job) -> bool:
    if principal.is_system:
        return True
    if job.kind == Job.Kind.EXPORT:
        return (
            principal.user_id is not None
            and job.requested_by_id == principal.user_id
            and access.may(principal, access.AUDIT, _scope(job))
        )
    return access.may_administer(principal, _scope(job))


def get_job(principal: Principal, job_id: int) -> Job:
    """The job, or ``Job.DoesNotExist`` when it is missing or out of the caller's reach."""
    job = Job.objects.get(pk=job_id)
    if not may_see(principal, job):
        raise Job.DoesNotExist(f"no job {job_id}")
    return job


def recent_jobs(principal: Principal, *, kind: str, limit: int = 20) -> list[Job]:
    """The newest jobs of ``kind`` the caller may see (exports: only their own)."""
    rows = Job.objects.filter(kind=kind)
    if kind == Job.Kind.EXPORT and not principal.is_system:
        if principal.user_id is None:
            return []
        rows = rows.filter(requested_by_id=principal.user_id)
    # A few rows per page, checked one by one: the grant rules live in
    # aetnaweb.access, and an operator's own jobs are few.
    return [
        job for job in rows.order_by("-started_at", "-id")[: limit * 5] if may_see(principal, job)
    ][:limit]


def last_job(principal: Principal, *, kind: str) -> Job | None:
    jobs = recent_jobs(principal, kind=kind, limit=1)
    return jobs[0] if jobs else None


def file_path(job: Job) -> Path | None:
    """Where a finished job's file is, if it is still there (names are ours, never a path)."""
    if not job.has_file or "/" in job.file_name or job.file_name.startswith("."):
        return None
    path = exports_dir() / job.file_name
    return path if path.is_file() else None
