"""Export a subject (issue 32, item 2): everything under a person's subtree with a manifest bound
to the log; and the round trip: export, erase, check the certificate and the manifest offline."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command

from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from audit.models import AuditEvent
from memory.errors import SubjectErasureError
from memory.services.subject_export import export_csv, export_subject
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


def test_the_command_writes_json_and_csv(tmp_path, capsys):
    seed()
    out = tmp_path / "dana.json"
    call_command(
        "memory", "export-subject", DANA, "--reference", REFERENCE, "--out", str(out),
        "--csv-dir", str(tmp_path / "csv"),
    )  # fmt: skip
    assert json.loads(out.read_text())["manifest"]["records"]["count"] == 4
    assert (tmp_path / "csv" / "episodes.csv").read_text().count("\n") == 6
    assert "exported 4 records" in capsys.readouterr().out
    assert tool.verify_subject_export(json.loads(out.read_text()), None)[0] == []
