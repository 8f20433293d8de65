"""The Python client's subject export calls against a live server: start, poll, download the ZIP,
then Conflict while it runs and Gone (410) once it expired."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from datetime import timedelta

import pytest
from aetnaweb_client import AsyncClient, Conflict, Gone, NotFound
from django.utils import timezone

from jobs.models import Job
from memory.services.subject_export import run_subject_export
from tests.api.conftest import issue_token
from tests.memory.test_erase_subject import APOLLO, DANA, REFERENCE, seed

pytestmark = pytest.mark.django_db(transaction=True)


def test_export_poll_download_then_gone(make_client):
    # Given Dana's memories and a client whose token covers her whole subtree
    seed()
    mem = make_client(DANA)
    # When an export is started, Then it is queued and its file is not ready yet
    started = mem.export_subject(DANA, reference=REFERENCE)
    job_id = started["job_id"]
    assert started["status"] == "running" and started["total"] == 9
    with pytest.raises(Conflict) as early:
        mem.download_subject_export(job_id)
    assert early.value.code == "subject_export_not_ready"
    # When a worker has run it, Then polling ends done and the download is the ZIP
    run_subject_export(job_id)
    status = mem.wait_for_subject_export(job_id, poll=0.05, timeout=5)
    assert status["status"] == "done" and status["result"]["records"] == 4
    with zipfile.ZipFile(io.BytesIO(mem.download_subject_export(job_id))) as archive:
        assert json.loads(archive.read("export.json"))["reference"] == REFERENCE
    # When its keep-by has passed, Then the download raises Gone with the code
    Job.objects.filter(pk=job_id).update(finished_at=timezone.now() - timedelta(days=30))
    with pytest.raises(Gone) as gone:
        mem.download_subject_export(job_id)
    assert gone.value.code == "subject_export_expired" and gone.value.status == 410
    # And a token short of her whole subtree sees no such export
    with pytest.raises(NotFound):
        make_client(APOLLO).subject_export(job_id)


def test_the_async_client_starts_and_reads_an_export(server_url):
    seed()
    token = issue_token(DANA)

    async def scenario() -> tuple[dict, dict]:
        async with AsyncClient(server_url, token=token) as mem:
            started = await mem.export_subject(DANA, reference=REFERENCE)
            return started, await mem.subject_export(started["job_id"])

    started, status = asyncio.run(scenario())
    assert status["job_id"] == started["job_id"] and status["subtree"] == DANA
