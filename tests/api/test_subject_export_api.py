"""Export a subject over the API (issue 32, item 2): start (202), status, download (ZIP), 409
before it finished, 410 with a code once expired; refusals write nothing."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from jobs.models import Job
from memory.services.subject_export import run_subject_export
from tests.memory.test_erase_subject import APOLLO, DANA, REFERENCE, SIBLING, seed

pytestmark = pytest.mark.django_db


def test_start_status_download_then_expired(make_api):
    # Given Dana's memories and a token holding every token capability on her subtree
    seed()
    api = make_api(DANA)
    # When the export is started, Then a job is queued (202) and nothing is exported yet
    started = api.post("/memory/export-subject", {"scope": DANA, "reference": REFERENCE})
    assert started.status_code == 202, started.data
    job_id = started.data["job_id"]
    assert started.data["queued"] is True and started.data["download_url"] is None
    assert started.data["total"] == 9 and started.data["reference"] == REFERENCE
    # And its download answers 409 until a worker ran it
    early = api.get(f"/memory/subject-exports/{job_id}/download")
    assert early.status_code == 409 and early.data["error"] == "subject_export_not_ready"
    run_subject_export(job_id)
    # Then its status says done, with counts, the expiry and the download's address
    status = api.get(f"/memory/subject-exports/{job_id}")
    assert status.status_code == 200 and status.data["status"] == "done"
    assert status.data["result"]["records"] == 4 and status.data["expired"] is False
    assert status.data["expires_at"] and status.data["file_sha256"]
    download = api.client.get(
        "/api/v1" + status.data["download_url"].removeprefix("/api/v1"),
        headers={"Authorization": f"Bearer {api.secret}"},
    )
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))) as archive:
        document = json.loads(archive.read("export.json"))
    assert document["manifest"]["records"]["count"] == 4
    # When the keep-by has passed, Then the download is 410 with a code saying what to do
    Job.objects.filter(pk=job_id).update(finished_at=timezone.now() - timedelta(days=30))
    gone = api.get(f"/memory/subject-exports/{job_id}/download")
    assert gone.status_code == 410 and gone.data["error"] == "subject_export_expired"
    assert "start a new export" in gone.data["detail"]
    after = api.get(f"/memory/subject-exports/{job_id}")
    assert after.data["expired"] is True and after.data["download_url"] is None


@pytest.mark.parametrize(
    ("scope", "capabilities"),
    [
        (DANA, ["read", "write", "forget"]),  # a forget key is not an export key
        (APOLLO, None),  # every capability, on one project only
        (SIBLING, None),
    ],
)
def test_a_token_short_of_the_whole_subtree_gets_404_and_nothing_is_written(
    make_api, scope, capabilities
):
    seed()
    job = make_api(DANA).post("/memory/export-subject", {"scope": DANA, "reference": REFERENCE})
    run_subject_export(job.data["job_id"])
    api = make_api(scope, capabilities)  # (issuing the token is audited)
    events, jobs = AuditEvent.objects.count(), Job.objects.count()
    started = api.post("/memory/export-subject", {"scope": DANA, "reference": REFERENCE})
    assert started.status_code == 404 and started.data["error"] == "not_found"
    for path in ("", "/download"):
        answer = api.get(f"/memory/subject-exports/{job.data['job_id']}{path}")
        assert answer.status_code == 404, path
    assert (AuditEvent.objects.count(), Job.objects.count()) == (events, jobs)


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"scope": DANA, "reference": " "}, "subject_export_refused", "reference"),
        ({"scope": DANA}, "missing_field", "reference"),
        ({"scope": "acme:dana", "reference": REFERENCE}, "invalid_scope", "scope"),
    ],
)
def test_bad_input_is_400_with_a_code_and_writes_nothing(make_api, body, code, field):
    seed()
    api = make_api(DANA)
    events = AuditEvent.objects.count()
    answer = api.post("/memory/export-subject", body)
    assert answer.status_code == 400, answer.data
    assert (answer.data["error"], answer.data["field"]) == (code, field)
    assert not Job.objects.exists() and AuditEvent.objects.count() == events


def test_an_unknown_export_is_404(make_api):
    assert make_api(DANA).get("/memory/subject-exports/999999").status_code == 404
