"""The memory engine's long work, as django.tasks tasks run by ``manage.py db_worker``."""

from __future__ import annotations

from django.tasks import task

from memory.reindexing import run_reindex


@task()
def reindex_job(job_id: int) -> str:
    """Run reindex job ``job_id`` and return its final status."""
    return run_reindex(job_id).status


@task()
def erasure_job(job_id: int) -> str:
    """Run subject erasure ``job_id`` and return its final status."""
    from memory.services.erasure import run_subject_erasure  # the services import this module

    return run_subject_erasure(job_id).status


@task()
def subject_export_job(job_id: int) -> str:
    """Run subject export ``job_id`` and return its final status."""
    from memory.services.subject_export import run_subject_export  # imports this module

    return run_subject_export(job_id).status
