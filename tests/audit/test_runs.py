"""Verification runs: recorded, queued after commit as a task, run by a worker, progress polled."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from access.models import Role, ScopeGrant
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit import services
from audit.errors import AuditError
from audit.models import VerificationRun
from audit.services import run_verification, start_verification_run
from audit.tasks import verify_run
from audit.verification import BAD_HASH
from tests.audit.conftest import append, tamper
from tests.mcp.conftest import REPO, subprocess_env

pytestmark = pytest.mark.django_db


def wait_for(run_id: int, timeout: float = 20.0) -> VerificationRun:
    """Poll the row like the dashboard does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = VerificationRun.objects.get(pk=run_id)
        if not run.is_running:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} still running after {timeout}s")


def test_a_run_records_its_verdict_and_counts():
    # Given three chains
    for subject in ("acme:alice:proj", "acme:bob:*", "zeta:*:*"):
        append(subject)
        append(subject)
    # When a run over every chain is started and executed
    run = start_verification_run(principal=SYSTEM, started_by="auditor-1")
    assert (run.status, run.scope, run.tenant, run.scope_depth) == ("running", None, None, 0)
    assert run.total_events == 6 and run.progress_percent == 0
    done = run_verification(run.pk)
    # Then it passed, with exact counts and no failures
    assert done.status == VerificationRun.Status.PASSED
    assert (done.subjects_checked, done.events_checked, done.first_bad_sequence) == (3, 6, None)
    assert done.failures == [] and done.finished_at is not None and done.progress_percent == 100


def test_a_failed_run_names_the_chain_and_first_bad_sequence():
    events = [append("acme:alice:proj") for _ in range(3)]
    append("acme:bob:*")
    tamper("UPDATE audit_log SET actor = %s WHERE sequence = %s", ["mallory", events[1].sequence])
    done = run_verification(start_verification_run(principal=SYSTEM, started_by="auditor").pk)
    assert done.status == VerificationRun.Status.FAILED
    assert done.first_bad_sequence == events[1].sequence
    assert done.failures == [
        {
            "subject_id": "acme:alice:proj",
            "ok": False,
            "events_checked": 3,
            "first_bad_sequence": events[1].sequence,
            "reasons": [f"sequence {events[1].sequence}: {BAD_HASH}"],
        }
    ]


def test_a_scoped_run_covers_only_that_subtree():
    append("acme:alice:proj")
    append("acme:*:*")
    bad = append("zeta:*:*")
    tamper("UPDATE audit_log SET actor = %s WHERE sequence = %s", ["mallory", bad.sequence])
    run = start_verification_run(principal=SYSTEM, subject="acme:*:*", started_by="auditor")
    assert (run.scope, run.tenant, run.scope_depth, run.total_events) == ("acme:*:*", "acme", 1, 2)
    done = run_verification(run.pk)
    assert (done.status, done.subjects_checked, done.events_checked) == ("passed", 2, 2)
    # platform:*:* means every chain
    assert (
        start_verification_run(principal=SYSTEM, subject="platform:*:*", started_by="a").scope
        is None
    )


def test_refusals_record_no_run(operator):
    with pytest.raises(AuditError, match="verification scope refused"):
        start_verification_run(principal=SYSTEM, subject="acme:alice", started_by="auditor")
    with pytest.raises(AuditError, match="actor must be"):
        start_verification_run(principal=SYSTEM, started_by="")
    ScopeGrant.objects.create(
        user=operator,
        scope="acme:*:*",
        scope_tenant="acme",
        scope_user="*",
        scope_project="*",
        role=Role.AUDITOR,
    )
    principal = access.operator_principal(operator)
    with pytest.raises(access.AccessDenied):
        start_verification_run(started_by="x", principal=principal)  # every chain
    with pytest.raises(access.AccessDenied):
        start_verification_run(subject="zeta:*:*", started_by="x", principal=principal)
    assert not VerificationRun.objects.exists()
    assert start_verification_run(subject="acme:bob:*", started_by="x", principal=principal)


def test_a_finished_run_is_not_run_again():
    run = run_verification(start_verification_run(principal=SYSTEM, started_by="auditor").pk)
    with pytest.raises(AuditError, match="already finished"):
        run_verification(run.pk)


def test_a_run_that_crashes_is_stored_as_error(monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(services, "verify_all", explode)
    run = start_verification_run(principal=SYSTEM, started_by="auditor")
    with pytest.raises(RuntimeError):
        run_verification(run.pk)
    run.refresh_from_db()
    assert run.status == VerificationRun.Status.ERROR
    assert run.failures == [{"error": "verification did not finish: RuntimeError"}]


def test_progress_is_written_while_the_run_works(monkeypatch):
    monkeypatch.setattr("audit.verification.CHUNK_SIZE", 2)
    monkeypatch.setattr(services, "PROGRESS_INTERVAL_SECONDS", 0)
    for _ in range(5):
        append("acme:alice:proj")
    run = start_verification_run(principal=SYSTEM, started_by="auditor")
    seen = []
    original = services._ProgressWriter.__call__

    def spy(self, events_checked):
        original(self, events_checked)
        seen.append(VerificationRun.objects.get(pk=run.pk).events_checked)

    monkeypatch.setattr(services._ProgressWriter, "__call__", spy)
    run_verification(run.pk)
    assert seen == [2, 4, 5]


def test_a_silent_running_row_reads_as_stale():
    run = start_verification_run(principal=SYSTEM, started_by="auditor")
    assert not run.is_stale
    VerificationRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=VerificationRun.STALE_AFTER_SECONDS + 1)
    )
    run.refresh_from_db()
    assert run.is_stale


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_started_run_is_executed_by_a_real_task_worker():
    # Given committed chains, one of them tampered
    good = [append("acme:alice:proj") for _ in range(3)]
    bad = append("zeta:*:*")
    tamper("UPDATE audit_log SET payload = %s WHERE sequence = %s", ['{"x":1}', bad.sequence])
    # When runs are started (each commits, then is queued as a task row)
    passing = start_verification_run(principal=SYSTEM, subject="acme:*:*", started_by="auditor")
    failing = start_verification_run(principal=SYSTEM, started_by="auditor")
    # Then they wait for a worker, visibly
    assert VerificationRun.objects.get(pk=passing.pk).is_queued
    queued = DBTaskResult.objects.filter(task_path="audit.tasks.verify_run")
    assert sorted(row.args_kwargs["args"][0] for row in queued) == [passing.pk, failing.pk]
    # And when the worker command processes the queue
    done = subprocess.run(
        [sys.executable, "manage.py", "db_worker", "--batch", "--no-startup-delay"],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Then polling the rows shows their verdicts, as the dashboard does
    assert wait_for(passing.pk).status == "passed"
    failed = wait_for(failing.pk)
    assert failed.status == "failed" and failed.first_bad_sequence == bad.sequence
    assert failed.events_checked == len(good) + 1
    assert set(queued.values_list("status", flat=True)) == {"SUCCESSFUL"}


def test_starting_a_run_queues_a_task_after_commit_only(django_capture_on_commit_callbacks):
    # Given a chain
    append("acme:alice:proj")
    # When a run is started but its transaction has not committed
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = start_verification_run(principal=SYSTEM, started_by="auditor")
    # Then nothing is queued yet
    assert not DBTaskResult.objects.exists() and len(callbacks) == 1
    # And when it commits, exactly one task names the run, and the run reads as queued
    callbacks[0]()
    task = DBTaskResult.objects.get()
    assert task.task_path == "audit.tasks.verify_run" and task.args_kwargs["args"] == [run.pk]
    assert VerificationRun.objects.get(pk=run.pk).is_queued


def test_the_task_executes_the_run_and_leaves_queued(django_capture_on_commit_callbacks):
    # Given a queued run
    append("acme:alice:proj")
    run = start_verification_run(principal=SYSTEM, started_by="auditor")
    # When the task body runs (what the worker calls)
    assert verify_run.call(run.pk) == "passed"
    # Then the run is finished and no longer reads as queued
    done = VerificationRun.objects.get(pk=run.pk)
    assert done.status == "passed" and not done.is_queued


def test_a_run_that_cannot_be_queued_says_so_at_once(
    monkeypatch, django_capture_on_commit_callbacks
):
    # Given a task backend that refuses the task
    def refuse(*args, **kwargs):
        raise RuntimeError("no backend")

    monkeypatch.setattr(DatabaseBackend, "enqueue", refuse)
    append("acme:alice:proj")
    # When a run is started and commits
    with django_capture_on_commit_callbacks(execute=True):
        run = start_verification_run(principal=SYSTEM, started_by="auditor")
    # Then the run is an error with a reason, not "running" forever
    done = VerificationRun.objects.get(pk=run.pk)
    assert done.status == "error" and "could not be queued" in done.failures[0]["error"]


IMMEDIATE_RUN = """
import django
django.setup()
from django.db import transaction
from aetnaweb.access import SYSTEM
from audit.services import start_verification_run
from audit.models import VerificationRun
with transaction.atomic():
    run = start_verification_run(principal=SYSTEM, started_by="auditor")
print(VerificationRun.objects.get(pk=run.pk).status)
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_with_the_immediate_backend_a_run_finishes_inline_after_commit():
    # Given a chain and a process configured like `make run` (one process, no worker)
    append("acme:alice:proj")
    # When it starts a run
    done = subprocess.run(
        [sys.executable, "-c", IMMEDIATE_RUN],
        cwd=REPO,
        env=subprocess_env() | {"AETNAWEB_TASKS_BACKEND": "immediate"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Then the run has finished by the time the commit returns, and nothing was queued
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "passed"
    assert not DBTaskResult.objects.exists()
