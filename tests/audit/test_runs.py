"""Verification runs: recorded, executed after commit in the background, progress polled."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from aetnaweb import access
from aetnaweb.models import Role, ScopeGrant
from audit import services
from audit.models import VerificationRun
from audit.services import AuditError, run_verification, start_verification_run
from audit.verification import BAD_HASH
from tests.audit.conftest import append, tamper

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
    run = start_verification_run(started_by="auditor-1")
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
    done = run_verification(start_verification_run(started_by="auditor").pk)
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
    run = start_verification_run(subject="acme:*:*", started_by="auditor")
    assert (run.scope, run.tenant, run.scope_depth, run.total_events) == ("acme:*:*", "acme", 1, 2)
    done = run_verification(run.pk)
    assert (done.status, done.subjects_checked, done.events_checked) == ("passed", 2, 2)
    # platform:*:* means every chain
    assert start_verification_run(subject="platform:*:*", started_by="a").scope is None


def test_refusals_record_no_run(operator):
    with pytest.raises(AuditError, match="verification scope refused"):
        start_verification_run(subject="acme:alice", started_by="auditor")
    with pytest.raises(AuditError, match="actor must be"):
        start_verification_run(started_by="")
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
    run = run_verification(start_verification_run(started_by="auditor").pk)
    with pytest.raises(AuditError, match="already finished"):
        run_verification(run.pk)


def test_a_run_that_crashes_is_stored_as_error(monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(services, "verify_all", explode)
    run = start_verification_run(started_by="auditor")
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
    run = start_verification_run(started_by="auditor")
    seen = []
    original = services._ProgressWriter.__call__

    def spy(self, events_checked):
        original(self, events_checked)
        seen.append(VerificationRun.objects.get(pk=run.pk).events_checked)

    monkeypatch.setattr(services._ProgressWriter, "__call__", spy)
    run_verification(run.pk)
    assert seen == [2, 4, 5]


def test_a_silent_running_row_reads_as_stale():
    run = start_verification_run(started_by="auditor")
    assert not run.is_stale
    VerificationRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=VerificationRun.STALE_AFTER_SECONDS + 1)
    )
    run.refresh_from_db()
    assert run.is_stale


@pytest.mark.django_db(transaction=True)
def test_a_started_run_executes_in_the_background_after_commit():
    # Given committed chains, one of them tampered
    good = [append("acme:alice:proj") for _ in range(3)]
    bad = append("zeta:*:*")
    tamper("UPDATE audit_log SET payload = %s WHERE sequence = %s", ['{"x":1}', bad.sequence])
    # When runs are started (each commits, then a thread picks it up)
    passing = start_verification_run(subject="acme:*:*", started_by="auditor")
    failing = start_verification_run(started_by="auditor")
    # Then polling the rows shows their verdicts
    assert wait_for(passing.pk).status == "passed"
    done = wait_for(failing.pk)
    assert done.status == "failed" and done.first_bad_sequence == bad.sequence
    assert done.events_checked == len(good) + 1
