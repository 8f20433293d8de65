"""Webhooks for memory changes: created, superseded, forgotten, expired (issue 35 item 6).

Driven through the real services (remember, correct, promote, consolidate,
forget) and the retention purge (a ``memory.forget`` whose mode is ``expired``). Payloads hold IDs, digests and the audit
event's hash: the content never reaches a body.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import corrections, search
from memory import services as memory
from memory.models import Record
from memory.services import retention
from memory.services.retention import purge_lapsed
from tests.webhooks.conftest import register
from tests.webhooks.test_signing import docs_verifier
from webhooks import services
from webhooks.events import EXPIRED_MODE
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db

HOOK = "https://93.184.215.14/hook"
ALICE = "acme:alice:proj"
CHANGES = [
    "memory.record_created",
    "memory.record_superseded",
    "memory.record_forgotten",
    "memory.record_expired",
]


@pytest.fixture
def announced(django_capture_on_commit_callbacks):
    """Run the block, then what the webhooks subscriber was scheduled to do after its commit.

    Only the subscriber's callbacks run: a forget's own after-commit work (an
    SQLite checkpoint) cannot run inside the test's transaction.
    """

    @contextlib.contextmanager
    def run() -> Iterator[None]:
        with django_capture_on_commit_callbacks() as callbacks:
            yield
        for callback in callbacks:
            if getattr(callback, "func", None) is services.on_audit_event:
                callback()

    return run


def deliveries(event_type: str | None = None) -> list[WebhookDelivery]:
    rows = WebhookDelivery.objects.order_by("created_at", "id")
    return list(rows.filter(event_type=event_type) if event_type else rows)


def body_of(delivery: WebhookDelivery) -> dict:
    return json.loads(delivery.body)


def event_of(event_type: str) -> AuditEvent:
    return AuditEvent.objects.filter(event_type=event_type).order_by("-sequence").first()


def test_a_stored_record_is_announced_with_ids_digests_and_the_event_hash(announced):
    # Given an endpoint for alice's subtree that chose record_created
    endpoint, _ = register(HOOK, scope="acme:alice:*", events=["memory.record_created"])
    # When a fact is remembered and the write commits
    with announced():
        stored = memory.remember(
            principal=SYSTEM, scope=ALICE, text="My backup email is alice@example.org"
        )
    record_id = stored.record_ids[0]
    # Then one delivery carries the record, its digests and the audit event's hash
    (delivery,) = deliveries()
    assert (delivery.endpoint_id, delivery.event_type, delivery.subject) == (
        endpoint.id,
        "memory.record_created",
        ALICE,
    )
    body = body_of(delivery)
    audit = event_of("memory.record_created")
    committed = json.loads(audit.payload)
    assert body["type"] == "memory.record_created" and body["scope"] == ALICE
    assert body["data"] == {
        "event_id": audit.event_id,
        "sequence": audit.sequence,
        "audit_event_type": "memory.record_created",
        "audit_event_hash": audit.event_hash,
        "record_id": record_id,
        "episode_id": stored.episode_id,
        "digests": committed["digests"],
        "content_sha256": committed["content_sha256"],
        "fact_key_sha256": committed["fact_key_sha256"],
    }
    assert body["links"]["dashboard"] == f"https://aetnaweb.example/memory/records/{record_id}/"
    # And never the content, the key or the message
    for secret in ("alice@example.org", "backup email", "My backup"):
        assert secret not in delivery.body


def test_a_new_value_supersedes_the_old_one_and_both_are_announced(announced):
    register(HOOK, scope="acme:*:*", events=CHANGES)
    old = memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is bash.").record_ids[0]
    WebhookDelivery.objects.all().delete()
    # When a new value of the same fact is remembered
    with announced():
        new = memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is fish.").record_ids[0]
    # Then a creation and a supersession are announced, from the one audit event
    by_type = {d.event_type: d for d in deliveries()}
    assert sorted(by_type) == ["memory.record_created", "memory.record_superseded"]
    created, superseded = by_type["memory.record_created"], by_type["memory.record_superseded"]
    data = body_of(superseded)["data"]
    assert data["record_ids"] == [old]
    assert data["superseded"] == [{"record_id": old, "superseded_by": new}]
    assert data["event_id"] == body_of(created)["data"]["event_id"]
    assert "fish" not in superseded.body and "bash" not in superseded.body


def test_a_correction_announces_the_corrected_record_once(announced):
    register(HOOK, scope="acme:*:*", events=["memory.record_superseded"])
    note = memory.remember(
        principal=SYSTEM, scope=ALICE, text="I usually work from the Lisbon office.", force=True
    ).record_ids[0]
    # When the note is corrected
    with announced():
        result = corrections.correct_record(
            record_id=note, content="I usually work from the Porto office.", principal=SYSTEM
        )
    # Then exactly one supersession names the note and what replaced it
    (delivery,) = deliveries()
    data = body_of(delivery)["data"]
    assert data["audit_event_type"] == "memory.record_corrected"
    assert data["superseded"] == [{"record_id": note, "superseded_by": result.record.record_id}]
    assert "Lisbon" not in delivery.body and "Porto" not in delivery.body


def test_a_keyed_correction_announces_the_replaced_value_once(announced):
    register(HOOK, scope="acme:*:*", events=["memory.record_superseded"])
    old = memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is bash.").record_ids[0]
    # When the fact is corrected (its new record takes the slot and replaces the old value)
    with announced():
        result = corrections.correct_record(
            record_id=old, content="My shell is zsh.", principal=SYSTEM
        )
    # Then the old value is announced superseded exactly once, across both audit events
    named = [item for delivery in deliveries() for item in body_of(delivery)["data"]["superseded"]]
    assert named == [{"record_id": old, "superseded_by": result.record.record_id}]


def test_a_consolidation_announces_what_it_superseded(announced):
    register(HOOK, scope="acme:*:*", events=["memory.record_superseded"])
    a = memory.remember_fact(principal=SYSTEM, scope=ALICE, key="desk", value="4B").record_ids[0]
    b = memory.remember_fact(principal=SYSTEM, scope=ALICE, key="desk", value="5C").record_ids[0]
    # Given two active values for one key (as if written before supersession existed)
    Record.objects.filter(record_id=a).update(status="active", superseded_by=None)
    search.index_records([(Record.objects.get(record_id=a).pk, a, ALICE, "User's desk is 4B.")])
    WebhookDelivery.objects.all().delete()
    # When consolidated
    with announced():
        assert memory.consolidate(principal=SYSTEM, scope=ALICE).changed
    # Then the retired value is announced with the one kept
    (delivery,) = deliveries()
    data = body_of(delivery)["data"]
    assert data["audit_event_type"] == "memory.consolidated"
    assert data["superseded"] == [{"record_id": a, "superseded_by": b}]


def test_a_forget_is_announced_with_ids_and_a_receipt_link(announced):
    register(HOOK, scope="acme:alice:*", events=["memory.record_forgotten"])
    stored = memory.remember(principal=SYSTEM, scope=ALICE, text="My bank PIN is 4321.")
    # When it is forgotten
    with announced():
        receipt = memory.forget(principal=SYSTEM, scope=ALICE, selector="PIN")
    # Then the delivery lists what was purged, the receipt's event and its hash
    (delivery,) = deliveries()
    body = body_of(delivery)
    assert body["type"] == "memory.record_forgotten"
    assert body["data"]["record_ids"] == receipt["purged_record_ids"] == stored.record_ids
    assert body["data"]["episode_ids"] == receipt["purged_episode_ids"] == [stored.episode_id]
    assert body["data"]["count"] == 1 and body["data"]["mode"] == "selector"
    assert body["data"]["event_id"] == receipt["audit_event_id"]
    assert body["data"]["audit_event_hash"] == receipt["audit_event_hash"]
    assert body["data"]["selector_sha256"] == receipt["selector_sha256"]
    assert body["links"]["receipt"] == (
        f"https://aetnaweb.example/memory/receipts/{receipt['audit_event_id']}/"
    )
    assert "4321" not in delivery.body and "PIN" not in delivery.body


def test_a_retention_purge_is_announced_as_expired_not_forgotten(announced):
    # Given endpoints for expiries and for forgets, and a record that lapses in an hour
    expiries, _ = register(HOOK, scope="acme:alice:*", events=["memory.record_expired"])
    register(HOOK, scope="acme:alice:*", events=["memory.record_forgotten"])
    lapses = timezone.now() + timedelta(hours=1)
    result = memory.remember(
        principal=SYSTEM, scope=ALICE, text="My gate code is 4321.", expires_at=lapses
    )
    # When the retention run purges what lapsed, two hours later
    with announced():
        purge_lapsed(actor="system:retention", now=lapses + timedelta(hours=1))
    # Then only the expiry endpoint heard it, with the purged IDs and the receipt link
    (delivery,) = deliveries()
    data = body_of(delivery)["data"]
    assert (delivery.endpoint_id, delivery.event_type) == (expiries.id, "memory.record_expired")
    assert result.record_ids[0] in data["record_ids"] and data["mode"] == "expired"
    event = AuditEvent.objects.get(event_id=data["event_id"])
    assert (event.event_type, data["audit_event_hash"]) == ("memory.forget", event.event_hash)
    assert "receipt" in body_of(delivery)["links"]
    assert "4321" not in delivery.body and "gate code" not in delivery.body


def test_the_expired_mode_is_the_one_retention_writes():
    assert EXPIRED_MODE == retention.EXPIRED_MODE


def test_memory_changes_are_opt_in_per_endpoint_and_per_event(announced):
    # Given an endpoint with the default events (those that need a person), and one for
    # forgets only
    register(HOOK, scope="acme:*:*")
    forgets, _ = register(HOOK, scope="acme:*:*", events=["memory.record_forgotten"])
    # When facts are stored, replaced and forgotten
    with announced():
        memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is bash.")
        memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is fish.")
        memory.forget(principal=SYSTEM, scope=ALICE, selector="fish")
    # Then only the forget was sent, and only to the endpoint that chose it
    assert [(d.endpoint_id, d.event_type) for d in deliveries()] == [
        (forgets.id, "memory.record_forgotten")
    ]


def test_a_sibling_scopes_endpoint_never_hears_another_scopes_changes(announced):
    # Given endpoints for bob, for another tenant, for alice and for the tenant
    register(HOOK, scope="acme:bob:*", events=CHANGES)
    register(HOOK, scope="zeta:*:*", events=CHANGES)
    register(HOOK, scope="acme:alice:other", events=CHANGES)
    alice, _ = register(HOOK, scope="acme:alice:*", events=CHANGES)
    tenant, _ = register(HOOK, scope="acme:*:*", events=CHANGES)
    # When alice's memory changes in every way
    with announced():
        memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is bash.")
        memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is fish.")
        memory.forget(principal=SYSTEM, scope=ALICE, selector="fish")
        memory.remember(
            principal=SYSTEM,
            scope=ALICE,
            text="My locker is 12.",
            expires_at=timezone.now() + timedelta(hours=1),
        )
        purge_lapsed(actor="system:retention", now=timezone.now() + timedelta(hours=2))
    # Then only the endpoints covering alice's scope heard it, each of every change
    heard = {(d.endpoint_id, d.event_type) for d in deliveries()}
    assert {endpoint for endpoint, _ in heard} == {alice.id, tenant.id}
    assert heard == {(e, name) for e in (alice.id, tenant.id) for name in CHANGES}


def test_a_memory_change_reaches_the_receiver_signed_and_without_content(receiver, announced):
    # Given a real receiver registered for creations
    _endpoint, secret = register(receiver.url, scope="acme:*:*", events=["memory.record_created"])
    # When a fact is stored and its delivery attempted
    with announced():
        memory.remember(principal=SYSTEM, scope=ALICE, text="My locker code is 8812.")
    (delivery,) = deliveries()
    services.deliver(delivery.id)
    # Then the receiver got the body, signed with the endpoint's secret, without the content
    (request,) = receiver.requests
    assert request.headers["Webhook-Event"] == "memory.record_created"
    assert docs_verifier()(secret, request.headers["Webhook-Signature"], request.body)
    assert b"8812" not in request.body and b"locker" not in request.body
    assert WebhookDelivery.objects.get().status == "delivered"


def test_with_nobody_listening_a_write_reads_no_payload(django_assert_num_queries):
    # Given an endpoint that hears only what needs a person
    register(HOOK, scope="acme:*:*")
    stored = memory.remember(principal=SYSTEM, scope=ALICE, text="My shell is bash.")
    event = AuditEvent.objects.get(record_id=stored.record_ids[0])
    # When the creation is announced / Then one query finds nobody and nothing is created
    with django_assert_num_queries(1):
        services.on_audit_event(event)
    assert not WebhookDelivery.objects.exists()
