"""Export a subject (issue 32, item 2): everything under a person's subtree with a manifest bound
to the log; and the round trip: export, erase, check the certificate and the manifest offline."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from aetnaweb.retention import run_retention_now
from audit.models import AuditEvent
from jobs.models import Job
from jobs.services import exports_dir
from memory.errors import (
    SubjectErasureError,
    SubjectExportError,
    SubjectExportExpired,
    SubjectExportNotReady,
)
from memory.services.holds import set_legal_hold
from memory.services.subject_export import (
    expires_at,
    export_csv,
    export_subject,
    run_subject_export,
    start_subject_export,
    subject_export_file,
)
from tests.audit.conftest import tool
from tests.factories import make_operator
from tests.memory.test_erase_subject import (
    APOLLO,
    DANA,
    REFERENCE,
    SIBLING,
    certificate_file,
    erase,
    run_tool,
    seed,
    signer,  # noqa: F401 (fixture)
)

pytestmark = pytest.mark.django_db


def test_the_export_holds_every_record_message_and_event_under_the_subtree(signer):  # noqa: F811
    # Given Dana's memories (every status, a project below) and her neighbours'
    words = seed()
    # When her subtree is exported
    document = export_subject(subtree=DANA, reference=REFERENCE, principal=SYSTEM)
    # Then every record of hers is there with status, provenance, supersession and dates
    records = document["records"]
    assert {r["scope"] for r in records} == {DANA, APOLLO}
    assert sorted(r["status"] for r in records) == ["active", "active", "quarantined", "superseded"]
    superseded = next(r for r in records if r["status"] == "superseded")
    assert words["old"] in superseded["content"] and superseded["superseded_by_id"]
    assert all(r["created_at"] and r["source_type"] and r["trust_tier"] for r in records)
    # And every stored message, and the audit events of her scopes; nothing of the sibling's
    assert len(document["episodes"]) == 5
    assert {e["subject_id"] for e in document["audit_events"]} == {DANA, APOLLO}
    assert words["sibling"] not in json.dumps(document)
    # And the chain records the export by its manifest's digest
    event = AuditEvent.objects.get(event_type="memory.subject_exported")
    assert event.subject_id == DANA and REFERENCE not in event.payload
    # And the CSV carries the same rows
    rows = list(csv.DictReader(io.StringIO(export_csv(document, "records"))))
    assert [r["record_id"] for r in rows] == [r["record_id"] for r in records]


def test_the_round_trip_export_erase_then_check_both_offline(signer, tmp_path):  # noqa: F811
    # Given an export of Dana's subtree, then its erasure
    seed()
    document = export_subject(subtree=DANA, reference=REFERENCE, principal=SYSTEM)
    export_path = tmp_path / "export.json"
    export_path.write_text(json.dumps(document))
    certificate = certificate_file(erase())
    key = signer.verifier.text()
    # When both are checked offline with the log's key, Then both hold
    assert run_tool("--subject-export", str(export_path), "--public-key", key) == 0
    assert run_tool("--erasure-certificate", str(certificate), "--public-key", key) == 0
    # And the erasure purged every record the export listed
    erased = {
        rid
        for r in json.loads(certificate.read_text())["receipts"]
        for rid in r["purged_record_ids"]
    }
    assert erased == {r["record_id"] for r in document["records"]}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d["records"].pop(), "records differs from the manifest"),
        (lambda d: d["episodes"][0].update(text="edited"), "episodes differs"),
        (
            lambda d: (d["manifest"]["records"].update(count=0), d["records"].clear()),
            "does not commit this manifest",
        ),
        (lambda d: d.update(reference="other"), "reference is not the manifest's"),
    ],
)
def test_a_changed_export_fails_offline(signer, tmp_path, capsys, change, reason):  # noqa: F811
    seed()
    document = export_subject(subtree=DANA, reference=REFERENCE, principal=SYSTEM)
    change(document)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    assert run_tool("--subject-export", str(path), "--public-key", signer.verifier.text()) == 1
    assert reason in capsys.readouterr().out


def test_a_refused_export_writes_nothing():
    seed()
    reviewer = operator_principal(make_operator("rev", [(DANA, "reviewer")]))
    sibling = operator_principal(make_operator("sib", [(SIBLING, "admin")]))
    events = AuditEvent.objects.count()  # granting the roles was audited
    with pytest.raises(SubjectErasureError, match="reference"):
        export_subject(subtree=DANA, reference=" ", principal=SYSTEM)
    for principal in (reviewer, sibling):
        with pytest.raises(AccessDenied):
            export_subject(subtree=DANA, reference=REFERENCE, principal=principal)
    assert AuditEvent.objects.count() == events


def test_the_command_runs_the_job_and_writes_zip_json_and_csv(tmp_path, capsys):
    # Given Dana's memories
    seed()
    # When she is exported at a shell
    out, archive = tmp_path / "dana.json", tmp_path / "dana.zip"
    call_command(
        "memory", "export-subject", DANA, "--reference", REFERENCE, "--out", str(out),
        "--zip", str(archive), "--csv-dir", str(tmp_path / "csv"),
    )  # fmt: skip
    # Then the job ran here, its ZIP is kept in the exports directory and copied out
    job = Job.objects.get(kind=Job.Kind.SUBJECT_EXPORT)
    assert job.status == Job.Status.DONE and (exports_dir() / job.file_name).is_file()
    assert json.loads(out.read_text())["manifest"]["records"]["count"] == 4
    assert (tmp_path / "csv" / "episodes.csv").read_text().count("\n") == 6
    assert (tmp_path / "csv" / "audit_events.csv").is_file()
    said = capsys.readouterr().out
    assert "exported 4 records" in said and f"subject export {job.pk}" in said
    assert "kept until" in said
    # And the copied ZIP and its export.json check offline
    assert run_tool("--subject-export", str(archive), "--no-signature-check") == 0
    assert tool.verify_subject_export(json.loads(out.read_text()), None)[0] == []


def test_the_command_refuses_without_a_reference_and_writes_nothing():
    seed()
    events = AuditEvent.objects.count()
    with pytest.raises(CommandError, match="reference"):
        call_command("memory", "export-subject", DANA, "--reference", "")
    assert not Job.objects.exists() and AuditEvent.objects.count() == events


# -- as a job ------------------------------------------------------------------------------


def members(job: Job) -> dict[str, bytes]:
    with zipfile.ZipFile(exports_dir() / job.file_name) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_the_job_writes_one_zip_with_json_and_csv_bound_to_the_manifest(signer, tmp_path):  # noqa: F811
    # Given Dana's memories
    seed()
    # When an export job is started, Then nothing is read or recorded until a worker runs it
    job = start_subject_export(subtree=DANA, reference=REFERENCE, principal=SYSTEM, queue=False)
    assert job.total == 4 + 5 and job.is_queued
    assert not AuditEvent.objects.filter(event_type="memory.subject_exported").exists()
    # When it runs
    job = run_subject_export(job.pk)
    # Then every record and message was counted as progress, and the file is one ZIP
    assert (job.status, job.done, job.total) == (Job.Status.DONE, 9, 9)
    files = members(job)
    assert set(files) == {"export.json", "records.csv", "episodes.csv", "audit_events.csv"}
    document = json.loads(files["export.json"])
    assert job.result["records"] == 4 and job.result["episodes"] == 5
    assert (
        job.result["manifest_sha256"]
        == document["manifest_proof"]["event"]["payload"]["manifest_sha256"]
    )
    # And each CSV file is the manifest's, byte for byte; the audit events have one row each
    events_csv = list(csv.DictReader(io.StringIO(files["audit_events.csv"].decode())))
    assert [int(row["sequence"]) for row in events_csv] == [
        e["sequence"] for e in document["audit_events"]
    ]
    # And the whole ZIP checks offline against the signed checkpoint
    path = tmp_path / "export.zip"
    path.write_bytes((exports_dir() / job.file_name).read_bytes())
    assert run_tool("--subject-export", str(path), "--public-key", signer.verifier.text()) == 0


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda f: f.update({"records.csv": f["records.csv"] + b"x,y\r\n"}), "records.csv differs"),
        (lambda f: f.pop("episodes.csv"), "archive has no episodes.csv"),
        (lambda f: f.update({"extra.csv": b"a\r\n"}), "manifest does not list"),
    ],
)
def test_a_changed_zip_fails_offline(signer, tmp_path, capsys, change, reason):  # noqa: F811
    seed()
    job = run_subject_export(
        start_subject_export(subtree=DANA, reference=REFERENCE, principal=SYSTEM, queue=False).pk
    )
    files = members(job)
    change(files)
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, body in files.items():
            archive.writestr(name, body)
    assert run_tool("--subject-export", str(path), "--public-key", signer.verifier.text()) == 1
    assert reason in capsys.readouterr().out


@pytest.mark.parametrize(
    ("subtree", "reference", "who", "refusal"),
    [
        (DANA, " ", "system", SubjectExportError),
        (DANA, "two\nlines", "system", SubjectExportError),
        ("acme:*:*", REFERENCE, "system", SubjectExportError),  # above one person
        (DANA, REFERENCE, "reviewer", AccessDenied),
        (DANA, REFERENCE, "sibling admin", AccessDenied),
    ],
)
def test_a_refused_export_job_writes_no_job_and_no_event(subtree, reference, who, refusal):
    seed()
    principal = {
        "system": SYSTEM,
        "reviewer": operator_principal(make_operator("rev", [(DANA, "reviewer")])),
        "sibling admin": operator_principal(make_operator("sib", [(SIBLING, "admin")])),
    }[who]
    events = AuditEvent.objects.count()
    with pytest.raises(refusal) as caught:
        start_subject_export(subtree=subtree, reference=reference, principal=principal)
    if refusal is SubjectExportError:
        assert caught.value.code == "subject_export_refused"
    assert not Job.objects.exists() and AuditEvent.objects.count() == events


def test_the_file_is_refused_before_the_job_finished():
    seed()
    job = start_subject_export(subtree=DANA, reference=REFERENCE, principal=SYSTEM, queue=False)
    with pytest.raises(SubjectExportNotReady, match="has not finished"):
        subject_export_file(job_id=job.pk, principal=SYSTEM)


def finished(days_ago: float) -> Job:
    job = run_subject_export(
        start_subject_export(subtree=DANA, reference=REFERENCE, principal=SYSTEM, queue=False).pk
    )
    Job.objects.filter(pk=job.pk).update(finished_at=timezone.now() - timedelta(days=days_ago))
    job.refresh_from_db()
    return job


def test_the_file_expires_after_the_keep_days_and_the_retention_run_purges_it(settings):
    # Given an export finished just within and one just past the keep-by
    settings.AETNAWEB_RETENTION_EXPORT_DAYS = 7
    seed()
    fresh, old = finished(6.9), finished(7.1)
    # Then the fresh one is served, the old one answers "expired" though still on disk
    assert subject_export_file(job_id=fresh.pk, principal=SYSTEM)[1].is_file()
    assert expires_at(fresh) == fresh.finished_at + timedelta(days=7)
    with pytest.raises(SubjectExportExpired, match="start a new export of acme:dana"):
        subject_export_file(job_id=old.pk, principal=SYSTEM)
    assert (exports_dir() / old.file_name).is_file()
    # When the retention run passes
    run = run_retention_now(principal=SYSTEM)
    # Then the old file is purged, its job row stays and says when; the fresh one is kept
    assert run.result["removed"]["export_files"] == 1
    old.refresh_from_db()
    assert old.file_removed_at is not None and not (exports_dir() / old.file_name).exists()
    assert (exports_dir() / fresh.file_name).is_file()
    with pytest.raises(SubjectExportExpired, match="was purged"):
        subject_export_file(job_id=old.pk, principal=SYSTEM)


def test_a_held_subtree_keeps_its_expired_export_file_on_disk(settings):
    seed()
    old = finished(30)
    set_legal_hold(scope=DANA, reference="CASE-1", principal=SYSTEM)
    run_retention_now(principal=SYSTEM)
    old.refresh_from_db()
    assert old.file_removed_at is None and (exports_dir() / old.file_name).is_file()


def test_the_round_trip_as_jobs_export_erase_then_check_both_offline(signer, tmp_path):  # noqa: F811
    # Given an export job of Dana's subtree, downloaded by the operator
    seed()
    job = run_subject_export(
        start_subject_export(subtree=DANA, reference=REFERENCE, principal=SYSTEM, queue=False).pk
    )
    _, path = subject_export_file(job_id=job.pk, principal=SYSTEM)
    sent = tmp_path / "subject-export.zip"
    sent.write_bytes(path.read_bytes())
    # When the subtree is then erased
    erasure = erase()
    # Then the server's copy of the export went with it (the download answers "expired")
    assert erasure.result["export_files_removed"] == 1 and not path.exists()
    with pytest.raises(SubjectExportExpired):
        subject_export_file(job_id=job.pk, principal=SYSTEM)
    # And the certificate and the sent export both check offline against signed checkpoints
    key = signer.verifier.text()
    assert (
        run_tool("--erasure-certificate", str(certificate_file(erasure)), "--public-key", key) == 0
    )
    assert run_tool("--subject-export", str(sent), "--public-key", key) == 0
    # And the erasure purged exactly the records the export listed
    with zipfile.ZipFile(sent) as archive:
        document = json.loads(archive.read("export.json"))
    erased = {
        rid
        for r in json.loads(certificate_file(erasure).read_text())["receipts"]
        for rid in r["purged_record_ids"]
    }
    assert erased == {r["record_id"] for r in document["records"]}
