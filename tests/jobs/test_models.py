"""One job-status vocabulary: verification runs and background jobs read queued/running/stale alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import VerificationRun
from jobs.models import Job, JobStatus

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "row",
    [
        lambda now: Job(kind="export", status="running", started_at=now, heartbeat_at=now, total=4),
        lambda now: VerificationRun(
            status="running", started_at=now, heartbeat_at=now, total_events=4
        ),
    ],
)
def test_both_kinds_of_row_share_the_queued_running_stale_rules(row):
    now = timezone.now()
    item = row(now)
    assert isinstance(item, JobStatus)
    # Recorded: queued, not stale, 0 %
    assert item.is_running and item.is_queued and not item.is_stale and item.progress_percent == 0
    # Picked up, half done
    item.heartbeat_at = now + timedelta(seconds=1)
    setattr(item, item.PROGRESS_FIELDS[0], 2)
    assert not item.is_queued and item.progress_percent == 50
    # Silent past the limit: stale
    item.heartbeat_at = now - timedelta(seconds=JobStatus.STALE_AFTER_SECONDS + 1)
    assert item.is_stale
    # Finished: 100 %, never stale
    item.status = "done" if isinstance(item, Job) else "passed"
    assert item.progress_percent == 100 and not item.is_stale and not item.is_running


def test_a_job_may_be_retried_when_it_failed_or_went_silent():
    now = timezone.now()
    job = Job(kind="reindex", status="error", started_at=now, heartbeat_at=now)
    assert job.may_retry
    job.status = "running"
    assert not job.may_retry
    job.heartbeat_at = now - timedelta(minutes=6)
    assert job.may_retry
    job.status = "done"
    assert not job.may_retry and not job.has_file


def test_an_export_folder_inside_the_static_folder_stops_start_up(settings, tmp_path):
    from jobs.checks import export_dir_is_not_public

    settings.STATIC_ROOT = tmp_path / "static"
    settings.AETNAWEB_EXPORT_DIR = tmp_path / "exports"
    assert export_dir_is_not_public() == []
    settings.AETNAWEB_EXPORT_DIR = tmp_path / "static" / "exports"
    [error] = export_dir_is_not_public()
    assert error.id == "jobs.E001" and "served to anyone" in error.msg
