"""The project's own long work (retention), as a django.tasks task run by ``manage.py db_worker``."""

from __future__ import annotations

from django.tasks import task

from aetnaweb.retention import run_retention


@task()
def retention_job(job_id: int) -> str:
    """Run retention job ``job_id`` and return its final status."""
    return run_retention(job_id).status
