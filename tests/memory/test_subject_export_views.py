"""Export a person from the dashboard (issue 32, item 2): the form starts a job, its page shows
progress then the download, an expired download answers 410 with the next step; a permission
matrix, refusals that write nothing and query bounds."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from jobs.models import Job
from memory.services.subject_export import run_subject_export, start_subject_export
from tests.factories import make_operator
from tests.memory.test_erase_subject import APOLLO, DANA, REFERENCE, SIBLING, TENANT, erase, seed

pytestmark = pytest.mark.django_db


def done_export() -> Job:
    job = start_subject_export(subtree=DANA, reference=REFERENCE, principal=SYSTEM, queue=False)
    return run_subject_export(job.pk)


def test_start_progress_and_download(client, django_assert_max_num_queries):
    # Given Dana's memories and an admin of her subtree
    seed()
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    url = reverse("memory:export_subject", args=[DANA])
    # When the export page is opened, Then it writes nothing
    with django_assert_max_num_queries(15):
        page = client.get(url)
    assert page.status_code == 200 and "Start the export" in page.content.decode()
    assert not Job.objects.exists()
    # When it is started, Then it goes to the job's page, queued and polling
    started = client.post(url, {"reference": REFERENCE})
    job = Job.objects.get(kind=Job.Kind.SUBJECT_EXPORT)
    assert started.status_code == 302
    assert started["Location"] == reverse("memory:subject_export", args=[job.pk])
    progress = client.get(started["Location"]).content.decode()
    assert "hx-trigger" in progress and "0 of about 9" in progress
    # And when the worker has run it, the page shows counts and the download
    run_subject_export(job.pk)
    with django_assert_max_num_queries(15):
        finished = client.get(started["Location"]).content.decode()
    assert "Exported 4 records" in finished and "Download subject-export" in finished
    assert "kept until" in finished
    download = client.get(reverse("memory:subject_export_download", args=[job.pk]))
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    body = b"".join(download.streaming_content)
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert "records.csv" in archive.namelist()
    # And the export page lists it
    assert f"#{job.pk}" in client.get(url).content.decode()


def test_an_expired_download_answers_410_with_the_next_step(client, settings):
    seed()
    job = done_export()
    Job.objects.filter(pk=job.pk).update(finished_at=timezone.now() - timedelta(days=8))
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    gone = client.get(reverse("memory:subject_export_download", args=[job.pk]))
    text = gone.content.decode()
    assert gone.status_code == 410 and "This export has expired" in text
    assert reverse("memory:export_subject", args=[DANA]) in text
    page = client.get(reverse("memory:subject_export", args=[job.pk])).content.decode()
    assert "Start a new export" in page and "Download subject-export" not in page


def test_an_erased_subject_export_answers_410(client):
    seed()
    job = done_export()
    erase()
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    gone = client.get(reverse("memory:subject_export_download", args=[job.pk]))
    assert gone.status_code == 410 and "was purged" in gone.content.decode()


def test_the_jobs_pages_send_a_subject_export_to_its_own_pages(client):
    seed()
    job = done_export()
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    answer = client.get(reverse("jobs:download", args=[job.pk]))
    assert answer.status_code == 302
    assert answer["Location"] == reverse("memory:subject_export_download", args=[job.pk])
    page = client.get(reverse("jobs:detail", args=[job.pk]))
    assert page["Location"] == reverse("memory:subject_export", args=[job.pk])


def test_a_refused_start_writes_nothing(client):
    seed()
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    events = AuditEvent.objects.count()
    url = reverse("memory:export_subject", args=[DANA])
    for reference in ("", "two\nlines"):
        answer = client.post(url, {"reference": reference})
        assert answer.status_code == 400
    assert "Nothing was exported" in answer.content.decode()
    assert not Job.objects.exists() and AuditEvent.objects.count() == events


@pytest.mark.parametrize(
    ("grants", "expected"),
    [
        (None, "login"),  # anonymous
        ([], 404),  # no grant
        ([(SIBLING, "admin")], 404),  # a sibling's admin
        ([(APOLLO, "admin")], 404),  # one project only
        ([(DANA, "reviewer")], 404),  # not an admin
        ([(DANA, "admin")], 200),
        ([(TENANT, "admin")], 200),  # the tenant's admin covers her
    ],
)
def test_permission_matrix(client, grants, expected):
    seed()
    job = done_export()
    if grants is not None:
        client.force_login(make_operator("op", grants))
    urls = [
        reverse("memory:export_subject", args=[DANA]),
        reverse("memory:subject_export", args=[job.pk]),
        reverse("memory:subject_export_download", args=[job.pk]),
    ]
    for url in urls:
        answer = client.get(url)
        if expected == "login":
            assert answer.status_code == 302 and "login" in answer["Location"], url
        else:
            assert answer.status_code == expected, url
    # And a refused POST starts nothing
    jobs = Job.objects.count()
    client.post(urls[0], {"reference": REFERENCE})
    assert Job.objects.count() == jobs + (1 if expected == 200 else 0)
