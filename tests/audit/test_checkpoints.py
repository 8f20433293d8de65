"""Checkpoints: issuing them, and the containment rule that catches a truncated chain."""

from __future__ import annotations

import json

import pytest

from access.models import Role, ScopeGrant
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.canonical import canonical_json, digest
from audit.checkpoints import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    checkpoint_digest,
    verify_checkpoints,
)
from audit.models import AuditSubject, Checkpoint
from audit.services import create_checkpoint
from audit.verification import verify_all
from tests.audit.conftest import append, tamper

pytestmark = pytest.mark.django_db


def grant(user, scope, role):
    tenant, who, project = scope.split(":")
    return ScopeGrant.objects.create(
        user=user,
        scope=scope,
        scope_tenant=tenant,
        scope_user=who,
        scope_project=project,
        role=role,
    )


def test_checkpoint_pins_every_chain_and_lands_in_the_sink_and_the_table(checkpoint_sink):
    # Given two chains
    a = [append("acme:alice:proj") for _ in range(3)]
    b = append("zeta:*:*")
    # When a checkpoint is created
    document = create_checkpoint(principal=SYSTEM, actor="auditor-1")
    # Then it pins each chain's newest event and count
    assert document["format"] == CHECKPOINT_FORMAT
    assert document["subjects"] == {
        "acme:alice:proj": {
            "sequence": a[-1].sequence,
            "event_hash": a[-1].event_hash,
            "event_count": 3,
        },
        "zeta:*:*": {"sequence": b.sequence, "event_hash": b.event_hash, "event_count": 1},
    }
    # And its digest covers everything but itself
    assert document["checkpoint_sha256"] == checkpoint_digest(document)
    unsigned = {k: v for k, v in document.items() if k != "checkpoint_sha256"}
    assert document["checkpoint_sha256"] == digest(unsigned)
    # And one canonical line was appended to the sink, the same bytes as stored
    line = canonical_json(document)
    assert checkpoint_sink.read_text() == line + "\n"
    stored = Checkpoint.objects.get()
    assert (stored.document, stored.created_by, stored.subject_count, stored.event_count) == (
        line,
        "auditor-1",
        2,
        4,
    )
    assert stored.checkpoint_sha256 == document["checkpoint_sha256"]
    # And a second checkpoint is appended, not overwritten
    create_checkpoint(principal=SYSTEM, actor="auditor-1")
    assert len(checkpoint_sink.read_text().splitlines()) == 2
    assert all(
        r.ok for r in verify_checkpoints(checkpoint_sink.read_text().splitlines(), principal=SYSTEM)
    )


def test_deleting_the_newest_events_is_caught_by_an_earlier_checkpoint(checkpoint_sink):
    # Given a chain pinned by a checkpoint kept elsewhere
    events = [append("acme:alice:proj") for _ in range(5)]
    create_checkpoint(principal=SYSTEM, actor="auditor")
    kept = checkpoint_sink.read_text().splitlines()
    # When the two newest events are deleted
    tamper("DELETE FROM audit_log WHERE sequence >= %s", [events[3].sequence])
    # Then the chain alone still holds (the documented limit) ...
    assert verify_all(principal=SYSTEM).ok
    # ... but the checkpoint's containment rule does not
    [result] = verify_checkpoints(kept, principal=SYSTEM)
    assert not result.ok
    assert result.failures[0] == (
        f"subject acme:alice:proj: pinned event at sequence {events[4].sequence} is missing"
    )
    # ... and neither does the Merkle log head it signed
    assert result.failures[1:] == [
        "audit_log holds fewer than the 5 events this checkpoint's log signed: "
        "the log was truncated"
    ]


def test_swapping_the_database_is_caught(checkpoint_sink):
    append("acme:alice:proj")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    kept = checkpoint_sink.read_text().splitlines()
    # A replacement database: same subject, a new (valid) chain
    tamper("DELETE FROM audit_log")
    AuditSubject.objects.all().delete()
    append("acme:alice:proj")
    assert verify_all(principal=SYSTEM).ok
    [result] = verify_checkpoints(kept, principal=SYSTEM)
    assert not result.ok
    failure = result.failures[0]
    assert failure.endswith(("is missing", "has a different event_hash"))
    # The new database's events no longer give the root the checkpoint signed
    assert result.failures[1:] == [
        "the log root at tree size 1, recomputed from audit_log, differs from the "
        "checkpoint's: the log was rewritten (a fork)"
    ]


def test_a_pinned_sequence_now_belonging_to_another_subject_is_caught(checkpoint_sink):
    event = append("acme:alice:proj")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    tamper(
        "UPDATE audit_log SET subject_id = %s WHERE sequence = %s",
        ["acme:bob:proj", event.sequence],
    )
    [result] = verify_checkpoints(checkpoint_sink.read_text().splitlines(), principal=SYSTEM)
    assert result.failures == [
        f"subject acme:alice:proj: pinned event at sequence {event.sequence} belongs to another subject"
    ]


def test_an_altered_checkpoint_is_refused(checkpoint_sink):
    # Given a checkpoint whose pin is edited to hide a deletion
    events = [append("acme:alice:proj") for _ in range(3)]
    document = create_checkpoint(principal=SYSTEM, actor="auditor")
    document["subjects"]["acme:alice:proj"]["sequence"] = events[0].sequence
    document["subjects"]["acme:alice:proj"]["event_hash"] = events[0].event_hash
    # Then the digest no longer matches and its pins are not trusted
    [result] = verify_checkpoints([canonical_json(document)], principal=SYSTEM)
    assert result.failures == ["checkpoint_sha256 does not match the checkpoint's content"]


def test_extra_fields_are_covered_by_the_digest_and_otherwise_ignored():
    event = append("acme:alice:proj")
    document = create_checkpoint(principal=SYSTEM, actor="auditor")
    document["signature"] = "detached-signature"
    document["subjects"]["acme:alice:proj"]["merkle"] = "root"
    document["checkpoint_sha256"] = checkpoint_digest(document)
    [result] = verify_checkpoints(
        [json.dumps(document, indent=2).replace("\n", " ")], principal=SYSTEM
    )
    assert result.ok, result.failures
    assert result.subject_count == 1 and event.sequence


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "checkpoint line 1 is not JSON"),
        ("[1, 2]", "checkpoint line 1 is not a JSON object"),
        ('{"format": "other"}', "format is not aetnamem-checkpoint-v1"),
        (
            '{"format": "aetnamem-checkpoint-v1", "created_at": "x", "checkpoint_sha256": "y"}',
            "subjects is missing",
        ),
        (
            '{"format": "aetnamem-checkpoint-v1", "checkpoint_sha256": "y", "subjects": {}}',
            "created_at is missing",
        ),
        (
            '{"format": "aetnamem-checkpoint-v1", "created_at": "x", "checkpoint_sha256": "y",'
            ' "subjects": {"a:*:*": {"sequence": "1", "event_hash": "h"}}}',
            "needs an integer sequence",
        ),
        (
            '{"format": "aetnamem-checkpoint-v1", "created_at": "x", "checkpoint_sha256": "y",'
            ' "subjects": {"a:*:*": {"sequence": true, "event_hash": "h"}}}',
            "needs an integer sequence",
        ),
        ('{"format": "aetnamem-checkpoint-v1", "n": NaN}', "is not JSON"),
    ],
)
def test_malformed_checkpoint_input_is_a_clear_error(line, message):
    with pytest.raises(CheckpointError, match=message):
        verify_checkpoints([line], principal=SYSTEM)


def test_blank_lines_are_skipped_and_lines_are_numbered(checkpoint_sink):
    append("acme:alice:proj")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    line = checkpoint_sink.read_text().strip()
    results = verify_checkpoints(["", line, "  ", line], principal=SYSTEM)
    assert [r.line_number for r in results] == [2, 4]
    with pytest.raises(CheckpointError, match="checkpoint line 3"):
        verify_checkpoints([line, "", "{"], principal=SYSTEM)


def test_an_auditor_checkpoints_only_the_chains_they_may_audit(operator, checkpoint_sink):
    append("acme:alice:proj")
    append("acme:bob:proj")
    append("zeta:*:*")
    grant(operator, "acme:alice:*", Role.AUDITOR)
    principal = access.operator_principal(operator)
    document = create_checkpoint(actor=principal.label, principal=principal)
    assert list(document["subjects"]) == ["acme:alice:proj"]
    # and may not check a checkpoint that pins chains outside their grant
    full = create_checkpoint(principal=SYSTEM, actor="system")
    with pytest.raises(access.AccessDenied):
        verify_checkpoints([canonical_json(full)], principal=principal)
    assert verify_checkpoints([canonical_json(document)], principal=principal)[0].ok


def test_a_principal_without_audit_may_not_checkpoint(operator):
    append("acme:alice:proj")
    grant(operator, "acme:*:*", Role.VIEWER)
    with pytest.raises(access.AccessDenied):
        create_checkpoint(actor="x", principal=access.operator_principal(operator))
    assert not Checkpoint.objects.exists()


def test_an_unwritable_sink_stores_nothing(tmp_path):
    append("acme:alice:proj")
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    with pytest.raises(CheckpointError, match="cannot append the checkpoint"):
        create_checkpoint(principal=SYSTEM, actor="auditor", sink=blocked / "checkpoints.jsonl")
    assert not Checkpoint.objects.exists()


def test_a_checkpoint_is_refused_when_the_index_disagrees_with_audit_log(checkpoint_sink):
    events = [append("acme:alice:proj") for _ in range(2)]
    tamper("DELETE FROM audit_log WHERE sequence = %s", [events[1].sequence])
    with pytest.raises(
        CheckpointError, match="does not hold the head recorded for acme:alice:proj"
    ):
        create_checkpoint(principal=SYSTEM, actor="auditor")
    assert not Checkpoint.objects.exists()
    assert not checkpoint_sink.exists()


def test_empty_log_checkpoints_nothing_and_verifies():
    document = create_checkpoint(principal=SYSTEM, actor="auditor")
    assert document["subjects"] == {}
    assert verify_checkpoints([canonical_json(document)], principal=SYSTEM)[0].ok
