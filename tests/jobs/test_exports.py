"""Audit exports on the task queue: requested, written by a worker, polled, downloaded with a digest."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from access.models import ScopeGrant
from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from audit.exports import ExportError, run_export, start_export
from audit.models import AuditEvent
from audit.tasks import export_job
from jobs.models import Job
from jobs.selectors import file_path
from tests.audit.conftest import append
from tests.factories import htmx_headers, login_as, make_operator

pytestmark = pytest.mark.django_db

ALICE = "acme:alice:*"


def seed() -> None:
    for subject in ("acme:alice:*", "acme:alice:web", "acme:bob:*", "zeta:*:*"):
        append(subject)
        append(subject)


def exported(job: Job) -> list[dict]:
    path = file_path(job)
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines()]


def nothing_written(export_dir) -> bool:
    return not Job.objects.exists() and not (export_dir.exists() and any(export_dir.iterdir()))


# -- the service and the task ------------------------------------------------------------


def test_an_export_writes_the_subtree_oldest_first_with_its_digest(_export_dir):
    # Given chains inside and outside alice's subtree
    seed()
    # When alice's subtree is exported and the task body runs
    job = start_export(principal=SYSTEM, scope=ALICE, started_by="auditor")
    assert job.is_queued and job.total == 4
    done = run_export(job.pk)
    # Then the file holds exactly alice's chains, by ascending sequence, as canonical rows
    rows = exported(done)
    assert {row["subject_id"] for row in rows} == {"acme:alice:*", "acme:alice:web"}
    assert [row["sequence"] for row in rows] == sorted(row["sequence"] for row in rows)
    assert len(rows) == 4 and done.result == {"events": 4} and done.done == 4
    # And the stored SHA-256 and size are the file's own
    raw = file_path(done).read_bytes()
    assert done.file_sha256 == hashlib.sha256(raw).hexdigest() and done.file_bytes == len(raw)
    # And the file is private to the server's user, under the configured directory
    assert file_path(done).parent == _export_dir and (file_path(done).stat().st_mode & 0o077) == 0


def test_a_range_bounds_the_events_by_creation_time():
    # Given events on three days
    for day in (1, 2, 3):
        event = append(ALICE)
        AuditEvent.objects.filter(pk=event.pk).update(created_at=f"2026-11-0{day}T12:00:00+00:00")
    # When exporting from the 2nd (inclusive) until the 3rd (exclusive)
    job = start_export(
        principal=SYSTEM,
        scope=ALICE,
        since=datetime(2026, 11, 2, tzinfo=UTC),
        until=datetime(2026, 11, 3, tzinfo=UTC),
    )
    # Then only the 2nd's event is in the file
    rows = exported(run_export(job.pk))
    assert [row["created_at"][:10] for row in rows] == ["2026-11-02"]


def test_refusals_write_nothing(_export_dir):
    auditor = operator_principal(make_operator("aud", grants=[(ALICE, "auditor")]))
    viewer = operator_principal(make_operator("viewer", grants=[(ALICE, "viewer")]))
    Job.objects.all().delete()
    moment = timezone.now()
    cases = [
        (ExportError, {"principal": SYSTEM, "scope": "acme:*:x"}),
        (ExportError, {"principal": SYSTEM, "scope": ALICE, "since": moment, "until": moment}),
        (ExportError, {"principal": SYSTEM, "scope": ALICE, "since": datetime(2026, 1, 1)}),
        (AccessDenied, {"principal": auditor, "scope": "acme:bob:*"}),
        (AccessDenied, {"principal": auditor, "scope": None}),  # every chain
        (AccessDenied, {"principal": viewer, "scope": ALICE}),  # no AUDIT capability
        (ValueError, {"principal": SYSTEM, "scope": ALICE, "started_by": "bad\x00actor"}),
    ]
    for error, arguments in cases:
        with pytest.raises(error):
            start_export(**arguments)
    assert nothing_written(_export_dir)


def test_the_task_is_queued_after_commit_only(django_capture_on_commit_callbacks):
    append(ALICE)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = start_export(principal=SYSTEM, scope=ALICE)
    assert not DBTaskResult.objects.exists() and len(callbacks) == 1
    callbacks[0]()
    task = DBTaskResult.objects.get()
    assert task.task_path == "audit.tasks.export_job" and task.args_kwargs["args"] == [job.pk]
    # And the task body (what the worker calls) finishes it
    assert export_job.call(job.pk) == "done"


def test_with_the_immediate_backend_the_export_is_written_on_commit(
    settings, django_capture_on_commit_callbacks
):
    # Given the backend `make run` uses (one process, no worker)
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    append(ALICE)
    # When an export is asked for and commits
    with django_capture_on_commit_callbacks(execute=True):
        job = start_export(principal=SYSTEM, scope=ALICE)
    # Then it is done by the time the commit returns, and nothing was queued
    job.refresh_from_db()
    assert job.status == "done" and job.has_file and not DBTaskResult.objects.exists()


def test_a_failing_export_is_an_error_with_a_reason_and_no_half_file(monkeypatch, _export_dir):
    append(ALICE)
    job = start_export(principal=SYSTEM, scope=ALICE)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("audit.exports.canonical_json", broken)
    with pytest.raises(OSError):
        run_export(job.pk)
    job.refresh_from_db()
    assert job.status == "error" and "No space left" in job.error and job.may_retry
    assert not any(_export_dir.iterdir())


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_database_queued_export_is_written_by_a_worker_run_in_process():
    # Given committed chains and an export queued on the database backend
    seed()
    job = start_export(principal=SYSTEM, scope="acme:*:*")
    assert DBTaskResult.objects.filter(task_path="audit.tasks.export_job").count() == 1
    # When the worker command processes the queue in this process
    call_command("db_worker", "--batch", "--no-startup-delay", stdout=io.StringIO())
    # Then the job is done, its task successful, and the file holds acme's six rows
    job.refresh_from_db()
    assert job.status == "done" and len(exported(job)) == 6
    assert DBTaskResult.objects.get().status == "SUCCESSFUL"


# -- the command --------------------------------------------------------------------------


def test_the_command_queues_an_export_and_refuses_bad_input(_export_dir):
    append(ALICE)
    out = io.StringIO()
    call_command("audit", "export", "--async", "--scope", ALICE, stdout=out)
    job = Job.objects.get()
    assert f"queued export job {job.pk}" in out.getvalue() and job.scope == ALICE
    Job.objects.all().delete()
    for args in (
        ("--async", "--scope", "acme:*:x"),
        ("--async", "--since", "yesterday"),
        ("--async", "--out", "x.jsonl"),
        ("--scope", ALICE),  # a subtree needs --async
    ):
        with pytest.raises(CommandError) as refused:
            call_command("audit", "export", *args, stdout=io.StringIO())
        assert "\n" not in str(refused.value)
    assert nothing_written(_export_dir)


# -- the pages ----------------------------------------------------------------------------


@pytest.fixture
def auditor(client):
    user = make_operator("auditor", grants=[(ALICE, "auditor")])
    login_as(client, user)
    return user


def test_the_exports_page_needs_an_audit_grant(client):
    url = reverse("audit:exports")
    assert client.get(url).status_code == 302  # anonymous: to the login page
    login_as(client, make_operator("viewer", grants=[(ALICE, "viewer")]))
    assert client.get(url).status_code == 404
    login_as(client, make_operator("aud2", grants=[(ALICE, "auditor")]))
    assert client.get(url).status_code == 200


def test_asking_for_an_export_redirects_to_its_progress(client, auditor):
    append(ALICE)
    response = client.post(reverse("audit:exports"), {"scope": ALICE})
    job = Job.objects.get()
    assert response.status_code == 302 and response.url == reverse("jobs:detail", args=[job.pk])
    assert job.requested_by_id == auditor.pk and job.started_by == "auditor"
    # The page says it waits for a worker, and polls while running
    page = client.get(response.url).content.decode()
    assert (
        "queued" in page and "Waiting for a task worker" in page and 'hx-trigger="every 1s"' in page
    )
    # Once done, the fragment shows the digest and the download
    run_export(job.pk)
    fragment = client.get(response.url, headers=htmx_headers()).content.decode()
    job.refresh_from_db()
    assert job.file_sha256 in fragment and reverse("jobs:download", args=[job.pk]) in fragment
    assert "every 1s" not in fragment


@pytest.mark.parametrize(
    "data",
    [
        {"scope": "acme:bob:*"},  # not theirs
        {"scope": ""},  # every chain: not theirs either
        {"scope": "acme:*:x"},  # malformed
        {"scope": ALICE, "since": "2026-11-03T00:00", "until": "2026-11-02T00:00"},
        {"scope": ALICE, "since": "not a time"},
        {"scope": "acme:al\x00ice:*"},  # a NUL
    ],
)
def test_a_refused_request_is_a_form_error_and_writes_nothing(client, auditor, data, _export_dir):
    response = client.post(reverse("audit:exports"), data)
    assert response.status_code == 400 and b'class="errorlist"' in response.content
    assert nothing_written(_export_dir)


def test_only_the_requester_downloads_and_only_while_they_audit_the_scope(client, auditor):
    # Given alice's finished export
    append(ALICE)
    job = run_export(start_export(principal=operator_principal(auditor), scope=ALICE).pk)
    url = reverse("jobs:download", args=[job.pk])
    # Then the requester gets the file, with its digest in a header
    response = client.get(url)
    body = b"".join(response.streaming_content)
    assert response.status_code == 200 and hashlib.sha256(body).hexdigest() == job.file_sha256
    assert response["X-Content-SHA256"] == job.file_sha256
    assert 'attachment; filename="audit-export-' in response["Content-Disposition"]
    # And another auditor of the same scope, a viewer, and an anonymous client do not
    for other in (
        make_operator("other", grants=[(ALICE, "auditor")]),
        make_operator("view", grants=[(ALICE, "viewer")]),
    ):
        login_as(client, other)
        assert client.get(url).status_code == 404
        assert client.get(reverse("jobs:detail", args=[job.pk])).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302
    # And the requester loses it with their grant
    ScopeGrant.objects.filter(user=auditor).delete()
    login_as(client, auditor)
    assert client.get(url).status_code == 404


def test_a_removed_file_is_said_so_and_not_served(client, auditor):
    append(ALICE)
    job = run_export(start_export(principal=operator_principal(auditor), scope=ALICE).pk)
    file_path(job).unlink()
    assert client.get(reverse("jobs:download", args=[job.pk])).status_code == 404
    page = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert "The file is missing" in page


def test_a_stale_or_failed_export_offers_a_retry_with_the_same_request(client, auditor):
    append(ALICE)
    job = start_export(
        principal=operator_principal(auditor),
        scope=ALICE,
        since=datetime(2026, 11, 2, tzinfo=UTC),
    )
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=job.started_at - timedelta(seconds=Job.STALE_AFTER_SECONDS + 1)
    )
    page = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert "interrupted" in page and "No task worker picked it up" not in page
    assert "Retry" in page and 'value="2026-11-02T00:00:00+00:00"' in page
    # When the retry form is posted as shown
    response = client.post(
        reverse("audit:exports"), {"scope": ALICE, "since": "2026-11-02T00:00:00+00:00"}
    )
    # Then a new job asks for the same range
    retried = Job.objects.exclude(pk=job.pk).get()
    assert response.status_code == 302 and retried.params == job.params


def test_the_exports_page_lists_only_your_own_exports(client, auditor):
    append(ALICE)
    mine = start_export(principal=operator_principal(auditor), scope=ALICE)
    theirs = start_export(
        principal=operator_principal(make_operator("x", grants=[(ALICE, "auditor")])), scope=ALICE
    )
    page = client.get(reverse("audit:exports")).content.decode()
    assert reverse("jobs:detail", args=[mine.pk]) in page
    assert reverse("jobs:detail", args=[theirs.pk]) not in page


def test_the_exports_page_query_count_is_bounded(client, auditor, django_assert_max_num_queries):
    for _ in range(5):
        start_export(principal=operator_principal(auditor), scope=ALICE)
    with django_assert_max_num_queries(12):
        assert client.get(reverse("audit:exports")).status_code == 200


def test_the_job_page_query_count_is_bounded(client, auditor, django_assert_max_num_queries):
    append(ALICE)
    job = run_export(start_export(principal=operator_principal(auditor), scope=ALICE).pk)
    with django_assert_max_num_queries(8):
        assert client.get(reverse("jobs:detail", args=[job.pk])).status_code == 200
