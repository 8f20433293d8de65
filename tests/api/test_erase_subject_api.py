"""Erase a subject over the API (issue 32, item 1): preview, start (202), progress, certificate."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from jobs.models import Job
from memory import services
from memory.models import Record
from memory.services.erasure import run_subject_erasure
from tests.memory.test_erase_subject import APOLLO, DANA, REFERENCE, SIBLING, seed

pytestmark = pytest.mark.django_db


def test_preview_start_progress_and_certificate(make_api):
    # Given Dana's memories and a token holding every token capability on her subtree
    seed()
    api = make_api(DANA)
    # When the erasure is previewed
    preview = api.post("/memory/erase-subject/preview", {"scope": DANA})
    # Then it counts per scope and wrote nothing
    assert preview.status_code == 200, preview.data
    assert [row["scope"] for row in preview.data["scopes"]] == [DANA, APOLLO]
    assert (preview.data["records"], preview.data["confirmation"]) == (4, DANA)
    assert not Job.objects.exists()
    # When it is started with the reference and the typed confirmation
    started = api.post(
        "/memory/erase-subject", {"scope": DANA, "reference": REFERENCE, "confirm": DANA}
    )
    # Then a job is queued (202) and nothing is erased until a worker runs it
    assert started.status_code == 202, started.data
    job_id = started.data["job_id"]
    assert started.data["status"] == "running" and started.data["queued"] is True
    assert started.data["certificate_url"] is None
    run_subject_erasure(job_id)
    # And its progress page then says done, with the certificate's address
    done = api.get(f"/memory/erasures/{job_id}")
    assert done.data["status"] == "done" and done.data["done"] == done.data["total"] == 9
    assert done.data["reference"] == REFERENCE
    certificate = api.get(done.data["certificate_url"].removeprefix("/api/v1"))
    assert certificate.status_code == 200
    assert certificate.data["format"] == "aetnaweb-erasure-certificate-v1"
    assert len(certificate.data["receipts"]) == 2
    assert not Record.objects.filter(user="dana").exclude(status="tombstoned").exists()


@pytest.mark.parametrize(
    ("scope", "capabilities"),
    [
        (DANA, ["read", "write", "forget"]),  # a forget key is not an erasure key
        (APOLLO, None),  # every capability, on one project only
        (SIBLING, None),
    ],
)
def test_a_token_short_of_the_whole_subtree_gets_404_and_nothing_is_written(
    make_api, scope, capabilities
):
    seed()
    api = make_api(scope, capabilities)
    for path, body in (
        ("/memory/erase-subject/preview", {"scope": DANA}),
        ("/memory/erase-subject", {"scope": DANA, "reference": REFERENCE, "confirm": DANA}),
    ):
        response = api.post(path, body)
        assert response.status_code in (403, 404), response.data
    assert not Job.objects.exists()
    assert not Record.objects.filter(status="tombstoned").exists()


def test_a_wrong_confirmation_is_a_400_naming_the_subtree(make_api):
    seed()
    response = make_api(DANA).post(
        "/memory/erase-subject", {"scope": DANA, "reference": REFERENCE, "confirm": "acme:dana"}
    )
    assert response.status_code == 400
    assert response.data["error"] == "subject_erasure_refused"
    assert "type the subtree acme:dana:*" in response.data["detail"]
    assert not Job.objects.exists()


def test_another_subjects_erasure_is_404(make_api):
    seed()
    services.remember(principal=SYSTEM, scope=SIBLING, text="My pet is a zqcatzq.")
    other = make_api(SIBLING).post(
        "/memory/erase-subject", {"scope": SIBLING, "reference": "R-1", "confirm": SIBLING}
    )
    assert other.status_code == 202
    assert make_api(DANA).get(f"/memory/erasures/{other.data['job_id']}").status_code == 404
    assert (
        make_api(DANA).get(f"/memory/erasures/{other.data['job_id']}/certificate").status_code
        == 404
    )
