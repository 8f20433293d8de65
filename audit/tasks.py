"""The evidence layer's long work, as django.tasks tasks run by a worker process.

A task takes only the id of a row that already records the request (who asked,
what scope): the row is the source of truth and carries the progress the
dashboard polls, the task is just "do it now". See docs/operators.md for the
worker (`manage.py db_worker`).
"""

from __future__ import annotations

from django.tasks import task

from audit import services
from audit.exports import run_export


@task()
def verify_run(run_id: int) -> str:
    """Execute verification run ``run_id`` and return its final status."""
    return services.run_verification(run_id).status


@task()
def export_job(job_id: int) -> str:
    """Write export job ``job_id``'s file and return its final status."""
    return run_export(job_id).status
