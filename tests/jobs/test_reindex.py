"""Semantic reindex from the dashboard: admins queue it, a worker runs it, it resumes where it stopped."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from jobs.models import Job
from jobs.services import JobError
from memory import services, vectors
from memory.reindexing import run_reindex, start_reindex
from memory.tasks import reindex_job
from tests.factories import login_as, make_operator
from tests.memory.test_semantic import model_fails  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

ALICE = "acme:alice:*"
BOB = "acme:bob:*"


def unindexed(scope: str, text: str) -> None:
    with override_settings(AETNAWEB_SEMANTIC_RECALL=False):
        services.remember(principal=SYSTEM, scope=scope, text=text)


def test_a_reindex_job_indexes_one_scope_and_reports_progress():
    unindexed(ALICE, "I avoid beef at business dinners.")
    unindexed(BOB, "My editor is helix.")
    job = start_reindex(principal=SYSTEM, scope=BOB)
    assert job.total == 1 and job.is_queued
    done = run_reindex(job.pk)
    assert done.status == "done" and done.result == {"indexed": 1} and done.done == 1
    assert vectors.missing_count(BOB) == 0 and vectors.missing_count() == 1


def test_a_stopped_reindex_resumes_where_it_stopped(monkeypatch):
    # Given three records without vectors and a reindex that dies after the first batch
    for text in ("My editor is helix.", "I live in Lisbon.", "My favourite colour is teal."):
        unindexed(ALICE, text)
    monkeypatch.setattr("memory.reindexing.BATCH", 1)
    original = vectors.index_records
    calls = []

    def dies_on_second(rows):
        calls.append(rows)
        if len(calls) == 2:
            raise RuntimeError("worker killed")
        original(rows)

    monkeypatch.setattr(vectors, "index_records", dies_on_second)
    first = start_reindex(principal=SYSTEM)
    with pytest.raises(RuntimeError):
        run_reindex(first.pk)
    first.refresh_from_db()
    assert first.status == "error" and first.may_retry and vectors.missing_count() == 2
    # When it is started again (the Retry button posts the same request)
    monkeypatch.setattr(vectors, "index_records", original)
    second = run_reindex(start_reindex(principal=SYSTEM).pk)
    # Then only what was left is indexed
    assert second.result == {"indexed": 2} and vectors.missing_count() == 0


def test_reindex_refusals_write_nothing(model_fails):  # noqa: F811
    tenant_admin = operator_principal(make_operator("ta", grants=[("acme:*:*", "admin")]))
    auditor = operator_principal(make_operator("aud", grants=[("platform:*:*", "auditor")]))
    for principal, scope, error in (
        (tenant_admin, "zeta:*:*", AccessDenied),  # not their tenant
        (tenant_admin, None, AccessDenied),  # every scope: platform admins only
        (auditor, ALICE, AccessDenied),  # not an admin
        (SYSTEM, "acme:*:x", JobError),  # malformed
        (SYSTEM, ALICE, JobError),  # the model cannot load here
    ):
        with pytest.raises(error):
            start_reindex(principal=principal, scope=scope)
    assert not Job.objects.exists() and not DBTaskResult.objects.exists()


def test_the_task_is_queued_after_commit_and_the_body_runs_it(django_capture_on_commit_callbacks):
    unindexed(ALICE, "My editor is helix.")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = start_reindex(principal=SYSTEM, scope=ALICE)
    callbacks[0]()
    assert DBTaskResult.objects.get().task_path == "memory.tasks.reindex_job"
    assert reindex_job.call(job.pk) == "done"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_queued_reindex_is_executed_by_a_worker_in_process():
    unindexed(ALICE, "My editor is helix.")
    job = start_reindex(principal=SYSTEM)
    call_command("db_worker", "--batch", "--no-startup-delay", stdout=io.StringIO())
    job.refresh_from_db()
    assert job.status == "done" and job.result == {"indexed": 1}


def test_the_shell_command_still_reindexes_synchronously():
    unindexed(ALICE, "My editor is helix.")
    out = io.StringIO()
    call_command("memory", "reindex", stdout=out, stderr=io.StringIO())
    assert "indexed 1 record(s)" in out.getvalue() and not Job.objects.exists()


# -- the Maintenance page ---------------------------------------------------------------------


def test_a_scope_admin_queues_a_reindex_of_their_scope(client):
    login_as(client, make_operator("ta", grants=[("acme:*:*", "admin")]))
    response = client.post(reverse("maintenance:reindex"), {"scope": ALICE})
    job = Job.objects.get()
    assert response.status_code == 302 and response.url == reverse("jobs:detail", args=[job.pk])
    assert (job.kind, job.scope, job.started_by) == ("reindex", ALICE, "ta")
    page = client.get(response.url).content.decode()
    assert "Semantic reindex" in page and "queued" in page


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"scope": "zeta:*:*"}, 404),  # outside their grants
        ({"scope": ""}, 404),  # every scope
        ({"scope": "acme:*:x"}, 400),  # malformed: a form error
        ({"scope": "acme:al\x00ice:*"}, 400),
    ],
)
def test_a_refused_reindex_writes_nothing(client, data, status):
    login_as(client, make_operator("ta", grants=[("acme:*:*", "admin")]))
    response = client.post(reverse("maintenance:reindex"), data)
    assert response.status_code == status and not Job.objects.exists()
    if status == 400:
        assert b'class="errorlist"' in response.content


def test_others_see_no_reindex_job_and_a_stale_one_offers_a_retry(client):
    job = start_reindex(principal=SYSTEM, scope=ALICE)
    url = reverse("jobs:detail", args=[job.pk])
    login_as(client, make_operator("viewer", grants=[(ALICE, "viewer")]))
    assert client.get(url).status_code == 404
    login_as(client, make_operator("bobadmin", grants=[(BOB, "admin")]))
    assert client.get(url).status_code == 404
    login_as(client, make_operator("ta", grants=[("acme:*:*", "admin")]))
    Job.objects.filter(pk=job.pk).update(
        started_at=timezone.now() - timezone.timedelta(minutes=10),
        heartbeat_at=timezone.now() - timezone.timedelta(minutes=9),
    )
    page = client.get(url).content.decode()
    assert "interrupted" in page and "stopped reporting" in page
    assert reverse("maintenance:reindex") in page and "picks up where this one stopped" in page


def test_the_maintenance_page_says_a_reindex_also_splits_big_scopes(client):
    # On SQLite the page tells the admin that big scopes are split, from what size,
    # and how a job the system queued for that is named.
    login_as(client, make_operator("ta", grants=[("acme:*:*", "admin")]))
    page = client.get(reverse("maintenance:index")).content.decode()
    if vectors.status().engine == "sqlite-vec":
        assert "splits every scope of 20,000 records or more" in page
        assert "system: vector cells" in page
    else:
        assert "system: vector cells" not in page
