"""Retention: what is past its keep-by goes, evidence stays, each run is audited with counts only."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from access.models import IdempotencyKey, LoginThrottle, RateLimitWindow
from access.tokens import create_token
from aetnaweb import retention
from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from audit.exports import run_export, start_export
from audit.models import AuditEvent, Checkpoint, VerificationRun
from audit.services import create_checkpoint, run_verification, start_verification_run
from jobs.models import Job
from jobs.selectors import file_path
from tests.audit.conftest import append
from tests.factories import login_as, make_operator, start_well_inside_a_minute

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def seed_operational_rows() -> dict[str, list[int]]:
    """One row to remove and one to keep of each kind; returns the keepers' ids."""
    start_well_inside_a_minute()  # the sweep keeps only the current minute's window
    now = timezone.now()
    token = create_token(
        principal=SYSTEM,
        name="agent",
        scope="acme:*:*",
        capabilities=["read"],
        expires_at=now + 30 * DAY,
    ).token
    keep: dict[str, list[int]] = {}
    for name, expires in (("old", now - DAY), ("live", now + DAY)):
        row = IdempotencyKey.objects.create(
            token=token, key=name, request_digest="0" * 64, created_at=now, expires_at=expires
        )
        if name == "live":
            keep["idempotency"] = [row.pk]
    window = int(now.timestamp()) // 60 * 60
    RateLimitWindow.objects.create(token=token, window_start=window - 120, count=3)
    keep["windows"] = [RateLimitWindow.objects.create(token=token, window_start=window).pk]
    old = now - 40 * DAY
    LoginThrottle.objects.create(
        kind="address", key="10.0.0.1", label="10.0.0.1", failures=2,
        first_failure_at=old, last_failure_at=old,
    )  # fmt: skip
    locked = LoginThrottle.objects.create(  # old, but still holding sign-ins back
        kind="address", key="10.0.0.2", label="10.0.0.2", failures=30,
        first_failure_at=old, last_failure_at=old, locked_at=old, retry_at=now + DAY,
    )  # fmt: skip
    recent = LoginThrottle.objects.create(
        kind="account", key="rita", label="rita", failures=1,
        first_failure_at=now, last_failure_at=now,
    )  # fmt: skip
    keep["throttles"] = [locked.pk, recent.pk]
    return keep


def finished_task_row(age: timedelta, status: str = "SUCCESSFUL") -> DBTaskResult:
    now = timezone.now()
    return DBTaskResult.objects.create(
        status=status,
        args_kwargs={"args": [], "kwargs": {}},
        task_path="audit.tasks.verify_run",
        backend_name="default",
        run_after=now - age,
        started_at=now - age,
        finished_at=now - age,
        exception_class_path="",
        traceback="",
    )


def test_a_run_removes_what_is_past_its_keep_by_and_keeps_the_rest():
    # Given operational rows on both sides of their keep-by, and evidence
    keep = seed_operational_rows()
    old_task, new_task = finished_task_row(8 * DAY), finished_task_row(DAY)
    waiting = finished_task_row(30 * DAY, status="READY")
    append("acme:alice:*")
    old_export = run_export(start_export(principal=SYSTEM, scope="acme:*:*").pk)
    new_export = run_export(start_export(principal=SYSTEM, scope="acme:*:*").pk)
    Job.objects.filter(pk=old_export.pk).update(finished_at=timezone.now() - 8 * DAY)
    old_file = file_path(old_export)
    ancient = Job.objects.create(
        kind="reindex", status="done", started_by="x", started_at=timezone.now() - 100 * DAY,
        heartbeat_at=timezone.now(), finished_at=timezone.now() - 100 * DAY,
    )  # fmt: skip
    create_checkpoint(principal=SYSTEM, actor="auditor")
    run_verification(start_verification_run(principal=SYSTEM, started_by="auditor").pk)
    evidence = (AuditEvent.objects.count(), Checkpoint.objects.count())
    # When retention runs
    job = retention.run_retention_now(principal=SYSTEM, started_by="cron")
    # Then each category removed exactly its expired rows
    assert job.status == "done" and job.result == {
        "dry_run": False,
        "removed": {
            "idempotency_keys": 1,
            "rate_limit_windows": 1,
            "login_throttles": 1,
            "task_results": 1,
            "export_files": 1,
            "jobs": 1,
        },
        # No memory content lapsed (no retention policy, no expires_at): none purged.
        "memory": {"records": 0, "episodes": 0, "receipts": [], "scopes": [], "held": []},
    }
    assert list(IdempotencyKey.objects.values_list("pk", flat=True)) == keep["idempotency"]
    assert list(RateLimitWindow.objects.values_list("pk", flat=True)) == keep["windows"]
    assert sorted(LoginThrottle.objects.values_list("pk", flat=True)) == sorted(keep["throttles"])
    assert set(DBTaskResult.objects.values_list("pk", flat=True)) == {new_task.pk, waiting.pk}
    assert not DBTaskResult.objects.filter(pk=old_task.pk).exists()
    assert not Job.objects.filter(pk=ancient.pk).exists()
    # And the old export's file is gone (its row says so); the new one's stays
    old_export.refresh_from_db()
    assert not old_file.exists() and old_export.file_removed_at is not None
    assert file_path(new_export) is not None
    # And the evidence is untouched but for one retention event, counts only
    assert Checkpoint.objects.count() == evidence[1] and VerificationRun.objects.count() == 1
    assert AuditEvent.objects.count() == evidence[0] + 1
    event = AuditEvent.objects.get(event_type="retention.run")
    payload = json.loads(event.payload)
    assert event.subject_id == "platform:*:*" and event.actor == "cron"
    assert payload["removed"] == job.result["removed"] and payload["job"] == job.pk
    assert "10.0.0.1" not in event.payload and "old" not in json.dumps(payload["removed"])


def test_a_dry_run_counts_and_removes_nothing():
    seed_operational_rows()
    before = (IdempotencyKey.objects.count(), LoginThrottle.objects.count())
    events = AuditEvent.objects.count()
    job = retention.run_retention_now(principal=SYSTEM, dry_run=True)
    assert job.result["dry_run"] is True and job.result["removed"]["idempotency_keys"] == 1
    assert (IdempotencyKey.objects.count(), LoginThrottle.objects.count()) == before
    assert AuditEvent.objects.count() == events


def test_only_platform_admins_run_retention_and_a_refusal_writes_nothing():
    tenant_admin = operator_principal(make_operator("ta", grants=[("acme:*:*", "admin")]))
    events = AuditEvent.objects.count()
    for call in (retention.start_retention, retention.run_retention_now):
        with pytest.raises(AccessDenied):
            call(principal=tenant_admin)
    assert not Job.objects.exists() and AuditEvent.objects.count() == events


def test_the_retention_task_is_queued_after_commit_and_runs(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = retention.start_retention(principal=SYSTEM)
    callbacks[0]()
    task = DBTaskResult.objects.get()
    assert task.task_path == "aetnaweb.tasks.retention_job" and task.args_kwargs["args"] == [job.pk]
    from aetnaweb.tasks import retention_job

    assert retention_job.call(job.pk) == "done"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_queued_retention_run_is_executed_by_a_worker_in_process():
    seed_operational_rows()
    job = retention.start_retention(principal=SYSTEM)
    call_command("db_worker", "--batch", "--no-startup-delay", stdout=io.StringIO())
    job.refresh_from_db()
    assert job.status == "done" and job.result["removed"]["idempotency_keys"] == 1


def test_the_command_runs_prints_counts_and_offers_a_dry_run():
    seed_operational_rows()
    out = io.StringIO()
    call_command("retention", "run", "--dry-run", stdout=out)
    assert "would remove 1 idempotency_keys" in out.getvalue()
    assert IdempotencyKey.objects.count() == 2
    out = io.StringIO()
    call_command("retention", "run", stdout=out)
    assert "removed 1 idempotency_keys" in out.getvalue() and IdempotencyKey.objects.count() == 1
    out = io.StringIO()
    call_command("retention", "policy", stdout=out)
    assert json.loads(out.getvalue())["export_days"] == 7


# -- the Maintenance page ---------------------------------------------------------------------


def test_the_maintenance_page_is_for_admins_only(client):
    url = reverse("maintenance:index")
    assert client.get(url).status_code == 302
    login_as(client, make_operator("aud", grants=[("platform:*:*", "auditor")]))
    assert client.get(url).status_code == 404
    login_as(client, make_operator("ta", grants=[("acme:*:*", "admin")]))
    page = client.get(url).content.decode()
    assert "only admins of <code>platform:*:*</code> start it" in page
    assert reverse("maintenance:retention") not in page


def test_a_platform_admin_starts_retention_and_sees_the_last_run(client):
    admin = make_operator("root", grants=[("platform:*:*", "admin")])
    login_as(client, admin)
    seed_operational_rows()
    response = client.post(reverse("maintenance:retention"), {"dry_run": "on"})
    job = Job.objects.get(kind="retention")
    assert response.status_code == 302 and response.url == reverse("jobs:detail", args=[job.pk])
    assert job.params["dry_run"] is True and job.started_by == "root"
    retention.run_retention(job.pk)
    page = client.get(reverse("maintenance:index")).content.decode()
    assert f"#{job.pk}" in page and "(dry run)" in page and "idempotency_keys" in page
    detail = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert "Dry run: nothing was removed" in detail


def test_a_tenant_admin_cannot_start_retention(client):
    login_as(client, make_operator("ta", grants=[("acme:*:*", "admin")]))
    assert client.post(reverse("maintenance:retention")).status_code == 404
    assert not Job.objects.exists()


def test_the_maintenance_page_query_count_is_bounded(client, django_assert_max_num_queries):
    login_as(client, make_operator("root", grants=[("platform:*:*", "admin")]))
    for _ in range(3):
        retention.run_retention_now(principal=SYSTEM, dry_run=True)
    with django_assert_max_num_queries(15):
        assert client.get(reverse("maintenance:index")).status_code == 200


def test_a_malformed_actor_is_refused_and_writes_nothing():
    from aetnaweb.text import UnstorableText

    for call in (retention.start_retention, retention.run_retention_now):
        with pytest.raises(UnstorableText):
            call(principal=SYSTEM, started_by="cron\x00")
    assert not Job.objects.exists()
