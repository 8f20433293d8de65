"""The selector additions the actions pages rely on: ``visible_transaction``, the exact plan,
and whether the content a reviewer is shown is bound to the plan hash."""

from __future__ import annotations

import json

import pytest

from actions import selectors, services
from actions.models import ActionPayload
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.canonical import canonical_json
from tests.actions.conftest import SCOPE, write_op
from tests.factories import make_operator


@pytest.mark.django_db
def test_visible_transaction_returns_the_summary_for_the_right_capability(actions_root):
    # Given a staged plan and an approver on the tenant
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "one")])
    ada = access.operator_principal(make_operator("ada", [("acme:*:*", "approver")]))
    # When the approver asks for it with the approve capability
    summary = selectors.visible_transaction(ada, patch.transaction_id, access.APPROVE)
    # Then they get its summary
    assert summary["transaction_id"] == patch.transaction_id
    assert summary["plan_hash"] == patch.plan_hash
    assert summary["self_proposed"] is False


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("grants", "capability"),
    [
        ([], access.READ),
        ([("acme:bob:*", "approver")], access.READ),
        ([("acmecorp:*:*", "approver")], access.READ),
        ([("acme:alice:projx", "approver")], access.READ),
        ([("acme:alice:proj", "viewer")], access.APPROVE),
    ],
)
def test_visible_transaction_refuses_everyone_else(actions_root, grants, capability):
    # Given a staged plan at acme:alice:proj
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "one")])
    someone = access.operator_principal(make_operator("someone", grants))
    # When someone without the grant (or the capability) asks, then it is AccessDenied
    with pytest.raises(access.AccessDenied):
        selectors.visible_transaction(someone, patch.transaction_id, capability)
    # And an unknown ID is the same refusal
    with pytest.raises(access.AccessDenied):
        selectors.visible_transaction(access.system_principal(), "act_" + "0" * 32)


@pytest.mark.django_db
def test_detail_shows_the_exact_plan_and_binds_the_preview(actions_root):
    # Given a staged write
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "one\n")])
    # When the detail is read
    detail = selectors.transaction_detail(access.system_principal(), patch.transaction_id)
    # Then the plan shown is the exact hashed body, and it hashes to the plan hash
    assert detail.plan["format"] == "aetna-world-patch-v1"
    assert detail.plan["operations"] == list(patch.operations)
    assert detail.plan_matches_hash is True
    # And the content shown is the content the digests bind
    assert detail.operations[0].payload_bound is True


@pytest.mark.django_db
def test_detail_flags_a_payload_that_no_longer_matches_its_digest(actions_root):
    # Given a staged write whose stored payload was altered behind the engine's back
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "one\n")])
    row = ActionPayload.objects.get(transaction_id=patch.transaction_id, kind="prepared")
    payload = json.loads(row.payload)
    payload["arguments"]["content"] = "something else\n"
    ActionPayload.objects.filter(pk=row.pk).update(payload=canonical_json(payload))
    # When the detail is read
    detail = selectors.transaction_detail(access.system_principal(), patch.transaction_id)
    # Then the reviewer is told the content shown is not what the plan hash binds
    assert detail.operations[0].payload_bound is False
    assert detail.plan_matches_hash is True  # the hashed digests themselves are intact


@pytest.mark.django_db
def test_detail_of_a_purged_plan_has_no_binding_to_show(actions_root, approval_key):
    # Given an aborted plan whose payloads were purged
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "one\n")])
    services.abort(principal=SYSTEM, transaction_id=patch.transaction_id)
    services.purge_payloads(principal=SYSTEM, transaction_id=patch.transaction_id)
    # When the detail is read, then there is no content and no binding claim
    op = selectors.transaction_detail(access.system_principal(), patch.transaction_id).operations[0]
    assert op.payload == "purged"
    assert op.payload_bound is None
    assert op.diff == ""
