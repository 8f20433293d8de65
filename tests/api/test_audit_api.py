"""Auditor tokens: verify, export and checkpoint, only ever over their own subtree's chains."""

from __future__ import annotations

import json

import pytest

from aetnaweb.access import SYSTEM
from audit.checkpoints import verify_checkpoints
from audit.models import AuditEvent, Checkpoint
from memory import services

OWN = ["acme:alice:proj", "acme:alice:*"]
FOREIGN = ["acme:bob:proj", "acmecorp:*:*", "acme:*:*"]


@pytest.fixture
def chains(settings, tmp_path):
    settings.AETNAWEB_CHECKPOINT_SINK = str(tmp_path / "sink" / "checkpoints.jsonl")
    for scope in OWN + FOREIGN:
        services.remember(principal=SYSTEM, scope=scope, text="My lucky number is 7")


@pytest.fixture
def auditor(make_api):
    return make_api("acme:alice:*", ["audit"])


def body_lines(response) -> list[str]:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return [line for line in content.decode().splitlines() if line]


@pytest.mark.django_db
def test_verify_covers_exactly_the_tokens_chains(auditor, chains):
    response = auditor.get("/audit/verify")
    assert response.status_code == 200
    assert response.data["ok"] is True
    assert sorted(s["subject_id"] for s in response.data["subjects"]) == sorted(OWN)
    assert response.data["events_checked"] == AuditEvent.objects.filter(subject_id__in=OWN).count()
    narrowed = auditor.get("/audit/verify", {"scope": "acme:alice:proj"})
    assert [s["subject_id"] for s in narrowed.data["subjects"]] == ["acme:alice:proj"]


@pytest.mark.django_db
def test_verify_reports_a_tampered_chain(auditor, chains):
    # Given an edited payload in alice's project chain
    event = AuditEvent.objects.filter(subject_id="acme:alice:proj").order_by("sequence").first()
    AuditEvent.objects.filter(pk=event.pk).update(payload=event.payload.replace("}", ',"x":1}'))
    # Then verification fails and names the first bad sequence
    response = auditor.get("/audit/verify")
    assert response.data["ok"] is False
    assert response.data["first_bad_sequence"] == event.sequence
    [bad] = [s for s in response.data["subjects"] if not s["ok"]]
    assert bad["subject_id"] == "acme:alice:proj"
    assert bad["reasons"]


@pytest.mark.django_db
def test_export_streams_only_the_tokens_chains(auditor, chains):
    response = auditor.get("/audit/export")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/jsonl"
    assert "attachment" in response["Content-Disposition"]
    rows = [json.loads(line) for line in body_lines(response)]
    assert {row["subject_id"] for row in rows} == set(OWN)
    assert [row["sequence"] for row in rows] == sorted(row["sequence"] for row in rows)
    assert set(rows[0]) >= {"sequence", "event_id", "event_hash", "prev_hash", "payload"}
    one = auditor.get("/audit/export", {"subject": "acme:alice:proj"})
    assert {json.loads(line)["subject_id"] for line in body_lines(one)} == {"acme:alice:proj"}


@pytest.mark.django_db
def test_checkpoint_pins_the_tokens_chains_and_verifies(auditor, chains, settings):
    response = auditor.post("/audit/checkpoint", {})
    assert response.status_code == 201
    assert response["Content-Type"] == "application/jsonl"
    [line] = body_lines(response)
    document = json.loads(line)
    assert document["format"] == "aetnamem-checkpoint-v1"
    assert sorted(document["subjects"]) == sorted(OWN)
    assert all(result.ok for result in verify_checkpoints([line], principal=SYSTEM))
    stored = Checkpoint.objects.get()
    assert stored.created_by == "agent:test-agent"
    with open(settings.AETNAWEB_CHECKPOINT_SINK) as sink:
        assert sink.read().strip() == line


@pytest.mark.django_db
@pytest.mark.parametrize("scope", FOREIGN)
def test_foreign_chains_are_404(auditor, chains, scope):
    before = (AuditEvent.objects.count(), Checkpoint.objects.count())
    assert auditor.get("/audit/verify", {"scope": scope}).status_code == 404
    assert auditor.get("/audit/export", {"subject": scope}).status_code == 404
    assert (AuditEvent.objects.count(), Checkpoint.objects.count()) == before


@pytest.mark.django_db
def test_audit_endpoints_need_the_audit_capability(make_api, chains):
    api = make_api("acme:alice:*", ["read", "write"])
    for response in (
        api.get("/audit/verify"),
        api.get("/audit/export"),
        api.post("/audit/checkpoint", {}),
    ):
        assert response.status_code == 403
        assert "'audit'" in response.data["detail"]
    assert not Checkpoint.objects.exists()


@pytest.mark.django_db
def test_bad_audit_parameters_are_400(auditor, chains):
    response = auditor.get("/audit/export", {"subject": "acme:alice"})
    assert response.status_code == 400
    assert response.data["field"] == "subject"
    response = auditor.get("/audit/verify", {"scope": "acme:*:x"})
    assert response.status_code == 400
    assert response.data["field"] == "scope"
