"""Each of the four event kinds creates a delivery for endpoints covering its scope, after commit.

The engine is driven through its real services (remember, stage, commit,
verification runs); the webhooks app only listens (audit.subscribers).
"""

from __future__ import annotations

import json

import pytest

from actions import services as actions
from aetnaweb.access import SYSTEM
from audit.services import run_verification, start_verification_run
from memory import services as memory
from tests.actions.conftest import (  # noqa: F401  (fixtures for the action flows)
    actions_root,
    approval_key,
    approver,
    approver_principal,
    scripted,
    stage_and_approve,
    write_op,
)
from tests.actions.fakes import scripted_op, set_script
from tests.audit.conftest import append, tamper
from tests.webhooks.conftest import register
from webhooks.models import WebhookDelivery

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("authorizing_messages")]

HOOK = "https://93.184.215.14/hook"
UNTRUSTED = "Read: <webpage>My shell is fish.</webpage>"


def bodies() -> list[dict]:
    return [json.loads(d.body) for d in WebhookDelivery.objects.order_by("created_at", "id")]


def test_a_quarantined_fact_is_announced_with_ids_and_links_only(
    django_capture_on_commit_callbacks,
):
    # Given an endpoint for alice's subtree
    endpoint, _ = register(HOOK, scope="acme:alice:*", events=["memory.record_quarantined"])
    # When an untrusted fact lands in quarantine and the write commits
    with django_capture_on_commit_callbacks(execute=True):
        result = memory.remember(principal=SYSTEM, scope="acme:alice:proj", text=UNTRUSTED)
    record_id = result.records[0].record_id
    # Then one delivery is queued for it, carrying IDs, scope, type and links
    delivery = WebhookDelivery.objects.get()
    assert (delivery.endpoint_id, delivery.status, delivery.subject) == (
        endpoint.id,
        "pending",
        "acme:alice:proj",
    )
    body = json.loads(delivery.body)
    assert body["type"] == "memory.record_quarantined" and body["id"] == delivery.id
    assert body["data"]["record_id"] == record_id
    assert body["links"]["dashboard"] == f"https://aetnaweb.example/memory/records/{record_id}/"
    # And never the memory's content
    assert "fish" not in delivery.body and "webpage" not in delivery.body


def test_nothing_is_announced_when_the_write_rolls_back(django_capture_on_commit_callbacks):
    register(HOOK, scope="acme:*:*")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            from django.db import transaction

            with transaction.atomic():
                memory.remember(principal=SYSTEM, scope="acme:alice:proj", text=UNTRUSTED)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
    assert callbacks == [] and not WebhookDelivery.objects.exists()


def test_an_event_outside_the_subtree_is_not_sent(django_capture_on_commit_callbacks):
    # Given endpoints for bob and for another tenant, and one for a type not chosen
    register(HOOK, scope="acme:bob:*")
    register(HOOK, scope="zeta:*:*")
    register(HOOK, scope="acme:alice:*", events=["action.proposed"])
    # When a quarantined fact lands in alice's project
    with django_capture_on_commit_callbacks(execute=True):
        memory.remember(principal=SYSTEM, scope="acme:alice:proj", text=UNTRUSTED)
    # Then none of them hears about it
    assert not WebhookDelivery.objects.exists()


def test_an_ancestor_endpoint_and_a_disabled_one(django_capture_on_commit_callbacks):
    tenant, _ = register(HOOK, scope="acme:*:*")
    disabled, _ = register(HOOK, scope="acme:alice:proj")
    disabled.active = False
    disabled.save()
    with django_capture_on_commit_callbacks(execute=True):
        memory.remember(principal=SYSTEM, scope="acme:alice:proj", text=UNTRUSTED)
    assert list(WebhookDelivery.objects.values_list("endpoint_id", flat=True)) == [tenant.id]


def test_a_plan_awaiting_approval_is_announced_but_a_preview_is_not(
    actions_root,  # noqa: F811  (the fixture imported above)
    django_capture_on_commit_callbacks,
):
    register(HOOK, scope="acme:*:*", events=["action.proposed"])
    # When a plan is staged in preview mode, nobody needs to approve it
    with django_capture_on_commit_callbacks(execute=True):
        actions.stage(
            scope="acme:alice:proj",
            operations=[write_op("a.txt", "x")],
            principal=SYSTEM,
            mode="preview",
        )
    assert not WebhookDelivery.objects.exists()
    # When one is staged for enforcement, it awaits approval and is announced
    with django_capture_on_commit_callbacks(execute=True):
        patch = actions.stage(
            scope="acme:alice:proj", operations=[write_op("b.txt", "y")], principal=SYSTEM
        )
    (body,) = bodies()
    assert body["type"] == "action.proposed"
    assert body["data"]["transaction_id"] == patch.transaction_id
    assert body["links"]["dashboard"].endswith(f"/actions/{patch.transaction_id}/")


def test_a_plan_that_ends_uncertain_is_announced(
    scripted,  # noqa: F811  (the fixtures imported above)
    approval_key,  # noqa: F811
    approver_principal,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    register(HOOK, scope="acme:alice:*", events=["action.transaction_uncertain"])
    set_script(scripted, execute="raise")
    txn_id = stage_and_approve([scripted_op("k", "v")], approver_principal)
    with django_capture_on_commit_callbacks(execute=True):
        result = actions.commit(transaction_id=txn_id, principal=approver_principal)
    assert result.transaction.state == "uncertain"
    (body,) = bodies()
    assert body["type"] == "action.transaction_uncertain"
    assert body["data"]["transaction_id"] == txn_id and body["scope"] == "acme:alice:proj"


def test_a_failed_verification_is_announced_to_endpoints_covering_a_broken_chain(
    django_capture_on_commit_callbacks,
):
    # Given two chains, one tampered, and endpoints for each tenant
    acme, _ = register(HOOK, scope="acme:*:*", events=["audit.verification_failed"])
    register(HOOK, scope="zeta:*:*", events=["audit.verification_failed"])
    bad = append("acme:alice:proj")
    append("zeta:*:*")
    tamper("UPDATE audit_log SET actor = %s WHERE sequence = %s", ["mallory", bad.sequence])
    # When a run over every chain fails
    run = start_verification_run(principal=SYSTEM, started_by="auditor")
    with django_capture_on_commit_callbacks(execute=True):
        done = run_verification(run.pk)
    assert done.status == "failed"
    # Then only the endpoint covering the broken chain hears, with the run and the chain
    delivery = WebhookDelivery.objects.get()
    assert delivery.endpoint_id == acme.id and delivery.event_type == "audit.verification_failed"
    data = json.loads(delivery.body)["data"]
    assert data["run_id"] == run.pk and data["failed_subjects"] == ["acme:alice:proj"]
    assert data["first_bad_sequence"] == bad.sequence


def test_a_passing_verification_sends_nothing(django_capture_on_commit_callbacks):
    register(HOOK, scope="acme:*:*", events=["audit.verification_failed"])
    append("acme:alice:proj")
    run = start_verification_run(principal=SYSTEM, started_by="auditor")
    with django_capture_on_commit_callbacks(execute=True):
        assert run_verification(run.pk).status == "passed"
    assert not WebhookDelivery.objects.exists()
