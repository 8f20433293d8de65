"""Journey: an admin answers "send me everything you keep about me": from the person's scope page
they start an export, watch it run, download the ZIP and check it offline; once the file has
expired, its page and its download say so and offer a new export."""

from __future__ import annotations

import zipfile
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from jobs.models import Job
from tests.audit.conftest import tool
from tests.e2e.conftest import login, screenshot
from tests.factories import make_operator
from tests.memory.test_erase_subject import DANA, REFERENCE, seed


def test_export_a_person_then_download_then_expired(page, tmp_path: Path, task_worker):
    # Given Dana's memories and an admin of her subtree
    seed()
    make_operator("ada", [(DANA, "admin")])
    login(page, "ada")

    # When they open her scope, choose "Export this person" and give the request's reference
    page.goto(f"/memory/scope/{DANA}/")
    page.get_by_role("link", name="Export this person…").click()
    page.get_by_label("Request reference").fill(REFERENCE)
    screenshot(page, "subject-export-start", narrow=True)
    page.get_by_role("button", name="Start the export").click()

    # Then the job's page polls until it is done and offers the ZIP
    assert "/memory/subject-exports/" in page.url
    download_link = page.get_by_role("link", name="Download subject-export-")
    download_link.wait_for(timeout=30_000)
    assert "Exported 4 records" in page.locator(".run-progress").inner_text()
    screenshot(page, "subject-export-done", narrow=True)

    # And the downloaded ZIP holds the JSON and CSV files and checks offline
    with page.expect_download() as download_info:
        download_link.click()
    saved = tmp_path / "subject-export.zip"
    download_info.value.save_as(saved)
    with zipfile.ZipFile(saved) as archive:
        assert {"export.json", "records.csv", "episodes.csv"} <= set(archive.namelist())
    assert tool.main(["--subject-export", str(saved), "--no-signature-check"]) == 0

    # When its keep-by has passed, Then the page says so and offers a new export
    job = Job.objects.get(kind=Job.Kind.SUBJECT_EXPORT)
    Job.objects.filter(pk=job.pk).update(finished_at=timezone.now() - timedelta(days=30))
    page.reload()
    assert page.get_by_role("link", name="Download subject-export-").count() == 0
    assert "Start a new export" in page.locator(".run-progress").inner_text()
    # And the old download address answers 410 with the next step
    answer = page.goto(f"/memory/subject-exports/{job.pk}/download/")
    assert answer is not None and answer.status == 410
    screenshot(page, "subject-export-expired", narrow=True)
    page.get_by_role("link", name=f"Start a new export of {DANA}").click()
    assert page.url.endswith(f"/memory/scope/{DANA}/export/")
