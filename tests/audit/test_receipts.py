"""The receipt rule for aetnamem-deletion-receipt-v1."""

from __future__ import annotations

import pytest
from django.db import transaction

from access.models import Role, ScopeGrant
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.canonical import digest, sha256_text
from audit.receipts import build_deletion_receipt, verify_deletion_receipt
from audit.services import append_event
from tests.audit.conftest import append, tamper

pytestmark = pytest.mark.django_db

SELECTOR = sha256_text("backup email")


def forget(subject="acme:alice:proj", records=("rec_1", "rec_2"), episodes=("epi_1",)):
    """A purge event and its receipt, built in one transaction as the memory engine does."""
    with transaction.atomic():
        event = append_event(
            subject=subject,
            event_type="memory.forget",
            actor="alice",
            payload={
                "selector_sha256": SELECTOR,
                "purged_record_ids": list(records),
                "purged_episode_ids": list(episodes),
                "purged_count": len(records),
            },
        )
        return event, build_deletion_receipt(
            event=event,
            selector_sha256=SELECTOR,
            purged_record_ids=list(records),
            purged_episode_ids=list(episodes),
        )


def resign(receipt):
    receipt = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
    receipt["receipt_sha256"] = digest(receipt)
    return receipt


def test_a_valid_receipt_holds():
    append("acme:alice:proj")
    event, receipt = forget()
    append("acme:alice:proj")
    assert receipt["audit_event_id"] == event.event_id
    assert receipt["audit_event_hash"] == event.event_hash
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []
    # ID order is not part of the claim
    reordered = resign(receipt | {"purged_record_ids": ["rec_2", "rec_1"]})
    assert verify_deletion_receipt(reordered, principal=SYSTEM) == []


def test_an_altered_receipt_is_refused():
    _, receipt = forget()
    altered = receipt | {"purged_record_ids": ["rec_1"]}
    assert verify_deletion_receipt(altered, principal=SYSTEM) == [
        "receipt_sha256 does not match the receipt's content"
    ]


def test_a_receipt_bound_to_the_wrong_event_is_refused():
    other = append("acme:alice:proj")
    event, receipt = forget()
    forged = resign(receipt | {"audit_event_id": other.event_id})
    assert verify_deletion_receipt(forged, principal=SYSTEM) == [
        f"audit event {other.event_id} is a memory.recall event, not a purge "
        "(memory.forget or memory.record_rejected)",
        f"audit event {other.event_id} has a different event_hash than the receipt names",
        f"audit event {other.event_id} payload lists different purged record IDs",
        f"audit event {other.event_id} payload lists different purged episode IDs",
        f"audit event {other.event_id} payload names a different selector_sha256",
        f"receipt created_at {receipt['created_at']} is not the time of audit event "
        f"{other.event_id} ({other.created_at}): the receipt was changed after it was issued",
    ]
    forged_hash = resign(receipt | {"audit_event_hash": "0" * 64})
    failures = verify_deletion_receipt(forged_hash, principal=SYSTEM)
    assert failures[0] == (
        f"audit event {event.event_id} has a different event_hash than the receipt names"
    )
    # The embedded log proof no longer matches the named hash either
    assert failures[1] == "log_proof event does not recompute to the receipt's audit_event_hash"
    assert failures[2].startswith("log_proof inclusion proof does not verify")


def test_a_receipt_for_another_subject_or_a_missing_event_is_refused():
    event, receipt = forget()
    moved = resign(receipt | {"subject_id": "acme:bob:proj"})
    assert verify_deletion_receipt(moved, principal=SYSTEM) == [
        f"audit event {event.event_id} is not in subject acme:bob:proj's chain"
    ]
    missing = resign(receipt | {"audit_event_id": "aud_" + "f" * 32})
    assert verify_deletion_receipt(missing, principal=SYSTEM) == [
        f"audit event aud_{'f' * 32} is not in subject acme:alice:proj's chain"
    ]
    malformed = resign(receipt | {"subject_id": "acme:bob"})
    assert verify_deletion_receipt(malformed, principal=SYSTEM) == [
        "receipt subject_id is not a canonical scope string"
    ]


def test_event_payload_ids_that_differ_are_caught():
    event, receipt = forget()
    claims_more = resign(receipt | {"purged_record_ids": ["rec_1", "rec_2", "rec_3"]})
    assert verify_deletion_receipt(claims_more, principal=SYSTEM) == [
        f"audit event {event.event_id} payload lists different purged record IDs"
    ]
    claims_other_episodes = resign(receipt | {"purged_episode_ids": []})
    assert verify_deletion_receipt(claims_other_episodes, principal=SYSTEM) == [
        f"audit event {event.event_id} payload lists different purged episode IDs"
    ]
    other_selector = resign(receipt | {"selector_sha256": sha256_text("something else")})
    assert verify_deletion_receipt(other_selector, principal=SYSTEM) == [
        f"audit event {event.event_id} payload names a different selector_sha256"
    ]


def test_a_tampered_purge_event_fails_its_receipt():
    event, receipt = forget()
    tamper(
        "UPDATE audit_log SET payload = %s WHERE sequence = %s",
        ['{"purged_episode_ids":["epi_1"],"purged_record_ids":["rec_1"]}', event.sequence],
    )
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == [
        f"audit event {event.event_id} does not recompute to its event_hash",
        f"audit event {event.event_id} payload lists different purged record IDs",
        f"audit event {event.event_id} payload names a different selector_sha256",
    ]


@pytest.mark.parametrize(
    ("receipt", "failure"),
    [
        ([], "receipt is not a JSON object"),
        ({"format": "other"}, "receipt format is not aetnamem-deletion-receipt-v1"),
        (
            {"purged_record_ids": [1]},
            "receipt field purged_record_ids is missing or has the wrong type",
        ),
        ({"audit_event_id": None}, "receipt field audit_event_id is missing or has the wrong type"),
    ],
)
def test_malformed_receipts_are_named(receipt, failure):
    _, valid = forget()
    candidate = receipt if isinstance(receipt, list) else valid | receipt
    assert failure in verify_deletion_receipt(candidate, principal=SYSTEM)


def test_an_auditor_needs_audit_on_the_receipts_subject(operator):
    _, receipt = forget()
    ScopeGrant.objects.create(
        user=operator,
        scope="acme:bob:*",
        scope_tenant="acme",
        scope_user="bob",
        scope_project="*",
        role=Role.AUDITOR,
    )
    with pytest.raises(access.AccessDenied):
        verify_deletion_receipt(receipt, principal=access.operator_principal(operator))


def purge_shaped(event_type: str, records=("rec_1",)):
    with transaction.atomic():
        event = append_event(
            subject="acme:alice:proj",
            event_type=event_type,
            actor="agent:bot",
            payload={
                "selector_sha256": SELECTOR,
                "purged_record_ids": list(records),
                "purged_episode_ids": [],
            },
        )
    return event, build_deletion_receipt(
        event=event,
        selector_sha256=SELECTOR,
        purged_record_ids=list(records),
        purged_episode_ids=[],
    )


@pytest.mark.parametrize(
    "event_type", ["agent.memory_forget", "agent.log.memory_forget", "memory.forget_rejected"]
)
def test_a_receipt_binds_only_to_a_purge_event(event_type):
    # Given an event that carries a purge's payload but is not a purge
    event, receipt = purge_shaped(event_type)
    # Then its receipt is refused, on the service and in the standalone tool alike
    expected = [
        f"audit event {event.event_id} is a {event_type} event, not a purge "
        "(memory.forget or memory.record_rejected)"
    ]
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == expected


def test_a_rejection_receipt_holds():
    _, receipt = purge_shaped("memory.record_rejected")
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []
