"""Erase a person from the dashboard (issue 32, item 1): preview page, typed confirmation,
progress page and the certificate download; a permission matrix and query bounds."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from jobs.models import Job
from memory.models import Record
from memory.services.erasure import run_subject_erasure
from tests.factories import make_operator
from tests.memory.test_erase_subject import APOLLO, DANA, REFERENCE, SIBLING, TENANT, seed

pytestmark = pytest.mark.django_db


def signed_in(client, grants):
    client.force_login(make_operator("op", grants))
    return client


def test_preview_confirm_progress_and_download(client, django_assert_max_num_queries):
    # Given Dana's memories and an admin of her subtree
    seed()
    signed_in(client, [(DANA, "admin")])
    url = reverse("memory:erase_subject", args=[DANA])
    # When the page is opened, Then it counts per scope and writes nothing
    with django_assert_max_num_queries(20):
        page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert APOLLO in text and "4 records" in text and f"Type <code>{DANA}</code>" in text
    assert not Job.objects.exists()
    # When the confirmation is mistyped, Then nothing is erased and the page says why
    wrong = client.post(url, {"reference": REFERENCE, "confirm": "acme:dana"})
    assert wrong.status_code == 400 and "Nothing was erased" in wrong.content.decode()
    assert not Job.objects.exists()
    # When confirmed, Then it goes to the erasure's progress page, queued
    started = client.post(url, {"reference": REFERENCE, "confirm": DANA})
    job = Job.objects.get(kind=Job.Kind.ERASURE)
    assert started.status_code == 302 and started["Location"] == reverse(
        "memory:erasure", args=[job.pk]
    )
    progress = client.get(started["Location"])
    assert progress.status_code == 200 and "hx-trigger" in progress.content.decode()
    # And when the worker has run it, the page shows counts and the certificate to download
    run_subject_erasure(job.pk)
    with django_assert_max_num_queries(15):
        done = client.get(started["Location"]).content.decode()
    assert "Download erasure-certificate" in done and REFERENCE in done
    download = client.get(reverse("memory:erasure_certificate", args=[job.pk]))
    certificate = json.loads(b"".join(download.streaming_content))
    assert certificate["subtree"] == DANA and len(certificate["receipts"]) == 2
    assert not Record.objects.filter(user="dana").exclude(status="tombstoned").exists()


@pytest.mark.parametrize(
    ("grants", "status"),
    [
        (None, 302),  # anonymous: to the sign-in page
        ([], 404),
        ([(SIBLING, "admin")], 404),
        ([(DANA, "reviewer")], 404),
        ([(APOLLO, "admin")], 404),
        ([(DANA, "admin")], 200),
        ([(TENANT, "admin")], 200),
    ],
)
def test_the_pages_answer_only_admins_of_the_whole_subtree(client, grants, status):
    seed()
    if grants is not None:
        signed_in(client, grants)
    url = reverse("memory:erase_subject", args=[DANA])
    assert client.get(url).status_code == status
    posted = client.post(url, {"reference": REFERENCE, "confirm": DANA})
    assert posted.status_code == (302 if status in (200, 302) else status)
    if status != 200:
        assert not Job.objects.exists()


def test_another_subjects_erasure_and_certificate_are_404(client):
    seed()
    signed_in(client, [(SIBLING, "admin")])
    job = Job.objects.create(
        kind=Job.Kind.ERASURE, scope=DANA, started_by="x", started_at="2026-01-01T00:00Z",
        heartbeat_at="2026-01-01T00:00Z",
    )  # fmt: skip
    assert client.get(reverse("memory:erasure", args=[job.pk])).status_code == 404
    assert client.get(reverse("memory:erasure_certificate", args=[job.pk])).status_code == 404


def test_the_scope_page_offers_erasure_to_admins_only(client):
    seed()
    signed_in(client, [(DANA, "reviewer")])
    assert (
        "Erase this person" not in client.get(reverse("memory:scope", args=[DANA])).content.decode()
    )
    client.logout()
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    assert "Erase this person" in client.get(reverse("memory:scope", args=[DANA])).content.decode()
