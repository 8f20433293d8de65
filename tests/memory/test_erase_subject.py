"""Erase a subject (issue 32, item 1): everything under one person's subtree, as a job, with a
certificate that tools/verify_audit.py checks offline."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from audit import notes
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from audit.verification import verify_subject
from jobs.models import Job
from jobs.services import exports_dir, record_job
from memory import services
from memory.errors import SubjectErasureError
from memory.models import Episode, Record, RetrievalEvent
from memory.services.erasure import (
    ERASE_CHUNK,
    erasure_certificate,
    run_subject_erasure,
    start_subject_erasure,
    subject_erasure_preview,
)
from tests.audit.conftest import tool
from tests.factories import make_operator
from tests.memory.test_forget_residue import rows_holding
from webhooks.models import WebhookDelivery, WebhookEndpoint

DANA = "acme:dana:*"
APOLLO = "acme:dana:apollo"
SIBLING = "acme:danny:*"
TENANT = "acme:*:*"
REFERENCE = "DSR-2026-0042"


def token() -> str:
    return "zq" + uuid.uuid4().hex + "zq"


@pytest.fixture
def signer(tmp_path, settings) -> notes.SignerKey:
    key = notes.SignerKey.generate("aetnaweb.test/erasure")
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


def seed() -> dict[str, str]:
    """Dana's facts at her user scope and a project below it (active, superseded, quarantined, an
    ignored message), a sibling's and the tenant's facts, each value a unique word."""
    words = {name: token() for name in ("old", "new", "web", "note", "apollo", "sibling", "tenant")}
    services.remember(principal=SYSTEM, scope=DANA, text=f"My backup email is {words['old']}.")
    services.remember(
        principal=SYSTEM, scope=DANA, text=f"Use {words['new']} as my backup email from now on."
    )
    services.remember(
        principal=SYSTEM,
        scope=DANA,
        text=f"<webpage>My favourite colour is {words['web']}.</webpage>",
    )
    services.remember(principal=SYSTEM, scope=DANA, text=f"The office wifi is {words['note']}?")
    services.remember(principal=SYSTEM, scope=APOLLO, text=f"My role is {words['apollo']}.")
    services.recall(principal=SYSTEM, scope=APOLLO, query=f"what is {words['apollo']}")
    services.remember(principal=SYSTEM, scope=SIBLING, text=f"My role is {words['sibling']}.")
    services.remember(principal=SYSTEM, scope=TENANT, text=f"Our motto is {words['tenant']}.")
    return words


def erase(principal=SYSTEM, subtree: str = DANA) -> Job:
    job = start_subject_erasure(
        subtree=subtree, reference=REFERENCE, confirmation=subtree, principal=principal
    )
    return run_subject_erasure(job.pk)


def certificate_file(job: Job) -> Path:
    return exports_dir() / job.file_name


def run_tool(*args: str) -> int:
    return int(tool.main(list(args)))


# -- preview -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_preview_counts_per_scope_below_the_subject_and_writes_nothing(rows):
    # Given Dana's memories at her scope and one project below it, and neighbours'
    seed()
    before = rows()
    # When the erasure is previewed
    preview = subject_erasure_preview(subtree=DANA, principal=SYSTEM)
    # Then each scope of the subtree is counted, by status, and nothing else
    by_scope = {row["scope"]: row for row in preview.scopes}
    assert set(by_scope) == {DANA, APOLLO}
    assert by_scope[DANA]["records"] == {"active": 1, "superseded": 1, "quarantined": 1}
    assert by_scope[DANA]["episodes"] == 4
    assert by_scope[APOLLO]["records"] == {"active": 1}
    assert by_scope[APOLLO]["recall_events"] == 0  # query text is not stored by default
    assert (preview.records, preview.episodes, preview.confirmation) == (4, 5, DANA)
    assert rows() == before


# -- refusals ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("subtree", "reference", "confirmation", "message"),
    [
        (DANA, REFERENCE, "acme:dana", r"type the subtree acme:dana:\* exactly"),
        (DANA, REFERENCE, "", "type the subtree"),
        (DANA, "", DANA, "give the request's reference"),
        (DANA, "two\nlines", DANA, "one line"),
        (TENANT, REFERENCE, TENANT, "above one person"),
        ("platform:*:*", REFERENCE, "platform:*:*", "above one person"),
        ("acme:nobody:*", REFERENCE, "acme:nobody:*", "nothing is stored under"),
    ],
)
def test_a_refused_erasure_writes_nothing(rows, subtree, reference, confirmation, message):
    # Given Dana's memories
    seed()
    before, jobs = rows(), Job.objects.count()
    # When an erasure is asked without its confirmation, reference, of a tenant, or of nobody
    with pytest.raises(SubjectErasureError, match=message):
        start_subject_erasure(
            subtree=subtree, reference=reference, confirmation=confirmation, principal=SYSTEM
        )
    # Then no job, no purge and no audit row was written
    assert (rows(), Job.objects.count()) == (before, jobs)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("grants", "allowed"),
    [
        ([(DANA, "reviewer")], False),  # may forget there, but erasure is an admin's act
        ([(APOLLO, "admin")], False),  # admin of one project only
        ([(SIBLING, "admin")], False),
        ([(DANA, "admin")], True),
        ([(TENANT, "admin")], True),
    ],
)
def test_only_an_admin_of_the_whole_subtree_may_erase_it(rows, grants, allowed):
    seed()
    principal = operator_principal(make_operator(f"op{uuid.uuid4().hex[:8]}", grants))
    before = rows()
    if allowed:
        assert subject_erasure_preview(subtree=DANA, principal=principal).records == 4
        assert erase(principal).status == Job.Status.DONE
        return
    with pytest.raises(AccessDenied):
        subject_erasure_preview(subtree=DANA, principal=principal)
    with pytest.raises(AccessDenied):
        start_subject_erasure(
            subtree=DANA, reference=REFERENCE, confirmation=DANA, principal=principal
        )
    assert rows() == before and not Job.objects.exists()


# -- the erasure ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_erasure_purges_every_scope_below_and_nothing_beside(signer):
    # Given Dana's memories and her neighbours'
    seed()
    # When her subtree is erased
    job = erase()
    # Then every record under it is tombstoned in any status, every message emptied
    assert job.status == Job.Status.DONE and job.params["reference"] == REFERENCE
    assert set(
        Record.objects.filter(tenant="acme", user="dana").values_list("status", "content")
    ) == {("tombstoned", "")}
    assert set(Episode.objects.filter(tenant="acme", user="dana").values_list("text")) == {("",)}
    # And the sibling's and the tenant's stay
    assert Record.objects.get(scope=SIBLING).status == "active"
    assert Record.objects.get(scope=TENANT).status == "active"
    # And the result counts per scope, one receipt per scope
    assert job.result["scopes"] == {
        DANA: {"records": 3, "episodes": 4},
        APOLLO: {"records": 1, "episodes": 1},
    }
    assert (job.done, job.result["receipts"]) == (9, 2)
    # And each receipt holds against the database, as a forget's does
    certificate = erasure_certificate(job_id=job.pk, principal=SYSTEM)
    assert certificate["reference"] == REFERENCE and certificate["subtree"] == DANA
    for receipt in certificate["receipts"]:
        assert verify_deletion_receipt(receipt, principal=SYSTEM) == []
    # And the chain records the purge as memory.forget events naming the job, no reference text
    events = AuditEvent.objects.filter(subject_id__in=[DANA, APOLLO], event_type="memory.forget")
    assert events.count() == 2
    assert all(REFERENCE not in e.payload and '"erase_subject"' in e.payload for e in events)
    # And every verifier still agrees with the rows: no erased row keeps a digest salt
    assert set(
        Episode.objects.filter(tenant="acme", user="dana").values_list("digest_salt", flat=True)
    ) == {""}
    for scope in (DANA, APOLLO):
        assert verify_subject(scope, principal=SYSTEM).ok


@pytest.mark.django_db
def test_a_large_scope_is_erased_in_bounded_receipts(monkeypatch):
    # Given more records at one scope than one receipt lists
    monkeypatch.setattr("memory.services.erasure.ERASE_CHUNK", 2)
    for number in range(5):
        services.remember_fact(principal=SYSTEM, scope=APOLLO, key=f"k{number}", value=token())
    # When erased
    job = erase()
    # Then every record went, in receipts of at most the chunk each
    receipts = erasure_certificate(job_id=job.pk, principal=SYSTEM)["receipts"]
    assert [len(r["purged_record_ids"]) for r in receipts] == [2, 2, 1]
    assert not Record.objects.exclude(status="tombstoned").exists()
    assert ERASE_CHUNK >= 100


@pytest.mark.django_db
def test_the_erasure_reaches_webhook_bodies_recall_queries_and_export_files(settings):
    # Given stored recall query text, webhook deliveries and an export file about Dana
    settings.AETNAWEB_STORE_RECALL_QUERIES = True
    # A recall asked before anything was stored: no purged record was its candidate and its
    # words are no stored value's, so only the subtree-wide clearing reaches its text
    services.recall(principal=SYSTEM, scope="acme:dana:zeus", query=f"weather in {token()}")
    words = seed()
    services.recall(principal=SYSTEM, scope=APOLLO, query=f"my role {words['apollo']}")
    now = timezone.now()
    endpoint = WebhookEndpoint.objects.create(
        id="whe_1", url="https://example.test/", scope="acme:*:*", scope_tenant="acme",
        scope_user="*", scope_project="*", secret_salt="s", created_by="t", created_at=now,
        updated_at=now,
    )  # fmt: skip
    for number, subject in enumerate((APOLLO, DANA, SIBLING)):
        WebhookDelivery.objects.create(
            id=f"whd_{number}", endpoint=endpoint, event_type="memory.record_created",
            subject=subject, body='{"x": 1}', created_at=now,
        )  # fmt: skip
    exports_dir().mkdir(parents=True, exist_ok=True)
    files = {}
    for scope in (APOLLO, SIBLING):
        export = record_job(kind=Job.Kind.EXPORT, scope=scope, started_by="t")
        name = f"export-{export.pk}.jsonl"
        (exports_dir() / name).write_text("{}")
        Job.objects.filter(pk=export.pk).update(status=Job.Status.DONE, file_name=name)
        files[scope] = exports_dir() / name
    assert RetrievalEvent.objects.filter(scope=APOLLO).exclude(query_text="").exists()
    # When Dana's subtree is erased
    job = erase()
    # Then no recall query text stays under it, her deliveries and export files are gone
    assert not RetrievalEvent.objects.filter(user="dana").exclude(query_text="").exists()
    assert set(WebhookDelivery.objects.values_list("subject", flat=True)) == {SIBLING}
    assert not files[APOLLO].exists() and files[SIBLING].exists()
    assert job.result["export_files_removed"] == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_no_table_and_no_database_byte_holds_an_erased_value(settings):
    # Given Dana's values, recalled with query text stored
    settings.AETNAWEB_STORE_RECALL_QUERIES = True
    words = seed()
    services.recall(principal=SYSTEM, scope=DANA, query=f"is {words['new']} my backup email")
    # When her subtree is erased (committed)
    erase()
    dana = [words[name] for name in ("old", "new", "web", "note", "apollo")]
    # Then no table holds any of her values; the neighbours' stay (so the scan reads them)
    assert {w: rows_holding(w) for w in dana} == {w: [] for w in dana}
    assert rows_holding(words["sibling"]) and rows_holding(words["tenant"])
    if connection.vendor != "sqlite":
        return
    # And on SQLite no byte of them is in the database file, its log or shared memory
    database = Path(connection.settings_dict["NAME"])
    hits = {
        f"{path.name}:{w[:10]}": path.read_bytes().count(w.encode())
        for path in (Path(f"{database}{suffix}") for suffix in ("", "-wal", "-shm"))
        if path.exists()
        for w in dana
    }
    assert set(hits.values()) == {0}, hits


# -- the certificate, offline --------------------------------------------------------------


@pytest.mark.django_db
def test_the_certificate_verifies_offline_with_the_public_key(signer, tmp_path, capsys):
    # Given a finished erasure and the log's public key
    seed()
    path = certificate_file(erase())
    key = signer.verifier.text()
    # When the standalone tool checks the certificate with the key
    # Then it exits 0, listing each receipt as verified
    assert run_tool("--erasure-certificate", str(path), "--public-key", key) == 0
    out = capsys.readouterr().out
    assert out.count("signature verified") == 2 and "OK erasure certificate" in out
    # And without the key it says nothing proves who made it (exit 3)
    assert run_tool("--erasure-certificate", str(path)) == 3


@pytest.mark.django_db
def test_an_unsigned_or_foreign_signed_certificate_fails_with_the_key(signer, tmp_path, settings):
    seed()
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = ""  # receipts carry no signed checkpoint
    unsigned = certificate_file(erase())
    assert (
        run_tool("--erasure-certificate", str(unsigned), "--public-key", signer.verifier.text())
        == 1
    )
    other = notes.SignerKey.generate("aetnaweb.test/other").verifier.text()
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(tmp_path / "checkpoint_key")
    services.remember(principal=SYSTEM, scope=DANA, text="My pet is a zqcatzq.")
    signed = certificate_file(erase())
    assert run_tool("--erasure-certificate", str(signed), "--public-key", other) == 1


def _rewritten(path: Path, change) -> Path:
    certificate = json.loads(path.read_text())
    change(certificate)
    certificate.pop("certificate_sha256")
    certificate["certificate_sha256"] = tool.digest(certificate)
    out = path.with_name("changed-" + path.name)
    out.write_text(json.dumps(certificate))
    return out


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda c: c["receipts"].clear(), "bundles no receipt"),
        (lambda c: c["receipts"].pop(), "not the set its closing event commits"),
        (lambda c: c.update(reference="another request"), "names a different reference"),
        (lambda c: c.pop("closing_proof"), "no closing_proof"),
        (lambda c: c.update(erasure_job=c["erasure_job"] + 1), "not this subtree's erasure"),
        (lambda c: c.update(subtree=SIBLING), "outside the erased subtree"),
        (lambda c: c["receipts"].append(c["receipts"][0]), "appears twice"),
        (lambda c: c.update(note="x"), "does not define: note"),
        (lambda c: c["receipts"][0].update(created_at="2020-01-01T00:00:00Z"), "receipt"),
    ],
)
def test_a_changed_certificate_fails(signer, capsys, change, reason):
    seed()
    path = _rewritten(certificate_file(erase()), change)
    assert run_tool("--erasure-certificate", str(path), "--public-key", signer.verifier.text()) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and reason in out


@pytest.mark.django_db
def test_a_certificate_with_its_digest_unchanged_after_an_edit_fails(signer, capsys):
    seed()
    path = certificate_file(erase())
    certificate = json.loads(path.read_text())
    certificate["reference"] = "someone else's request"
    path.write_text(json.dumps(certificate))
    assert run_tool("--erasure-certificate", str(path), "--public-key", signer.verifier.text()) == 1
    assert "certificate_sha256 does not match" in capsys.readouterr().out


# -- the command ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_command_previews_then_erases_and_writes_the_certificate(tmp_path, capsys, rows):
    seed()
    before = rows()
    call_command("memory", "erase-subject", DANA, "--preview")
    out = capsys.readouterr().out
    assert APOLLO in out and "4 records" in out and rows() == before
    with pytest.raises(CommandError, match="type the subtree"):
        call_command("memory", "erase-subject", DANA, "--reference", REFERENCE, "--confirm", "x")
    assert rows() == before and not Job.objects.exists()
    target = tmp_path / "certificate.json"
    call_command(
        "memory", "erase-subject", DANA, "--reference", REFERENCE, "--confirm", DANA,
        "--certificate", str(target),
    )  # fmt: skip
    certificate = json.loads(target.read_text())
    assert certificate["subtree"] == DANA and len(certificate["receipts"]) == 2
    assert not Record.objects.filter(user="dana").exclude(status="tombstoned").exists()
