"""A4 stage: rejections, ordering, IDs, digests, what one transaction writes (P-*, AE-1, E-1)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from access.models import ApiToken, Role
from actions import formats, services
from actions.errors import ActionInputError, AdapterNotRegistered
from actions.models import (
    ActionDependency,
    ActionEvidence,
    ActionOperation,
    ActionPayload,
    ActionTransaction,
)
from actions.verification import recompute_plan
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.canonical import digest
from audit.models import AuditEvent
from tests.actions.conftest import SCOPE, audit_dump, grant, sha, table_counts, write_op
from tests.factories import authorizing_episode_id


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("operations", "mode", "message"),
    [
        ([write_op("a.txt", "x")], "off", "disabled in off mode"),
        ([], "enforce", "at least one operation"),
        ([write_op("a.txt", "x"), write_op("b.txt", "y")], "enforce", "keys must be unique"),
        (
            [write_op("a.txt", "x", depends_on=["nope"])],
            "enforce",
            "unknown operation dependencies",
        ),
        (
            [
                write_op("a.txt", "x", key="a", depends_on=["b"]),
                write_op("b.txt", "y", key="b", depends_on=["a"]),
            ],
            "enforce",
            "contains a cycle",
        ),
        ([write_op("a.txt", "x", key="a", depends_on=["a"])], "enforce", "cannot be ordered"),
    ],
)
def test_rejections_in_order_write_nothing_p1_p6(actions_root, operations, mode, message):
    before = table_counts()
    with pytest.raises(ValueError, match=message):
        services.stage(principal=SYSTEM, scope=SCOPE, operations=operations, mode=mode)
    assert table_counts() == before


@pytest.mark.django_db
def test_unknown_adapter_is_a_key_error_p4(actions_root):
    op = {**write_op("a.txt", "x"), "adapter": "teleporter"}
    with pytest.raises(KeyError, match="no guarded-action adapter registered as 'teleporter'"):
        services.stage(principal=SYSTEM, scope=SCOPE, operations=[op])
    assert issubclass(AdapterNotRegistered, KeyError)
    assert ActionTransaction.objects.count() == 0


@pytest.mark.django_db
def test_adapter_prepare_failure_writes_nothing_p6(actions_root):
    before = table_counts()
    with pytest.raises(ValueError, match="escapes the configured root"):
        services.stage(
            principal=SYSTEM,
            scope=SCOPE,
            operations=[write_op("ok.txt", "x", key="a"), write_op("../x", "y", key="b")],
        )
    assert table_counts() == before


@pytest.mark.django_db
def test_mismatched_prepared_operation_is_refused_p4(actions_root):
    from actions.adapters import FilesystemAdapter, registered_adapter

    class Renaming(FilesystemAdapter):
        def prepare(self, proposal, context):
            prepared = super().prepare(proposal, context)
            return type(prepared)(**{**prepared.__dict__, "operation": "delete_file"})

    with (
        registered_adapter("filesystem", lambda: Renaming(actions_root)),
        pytest.raises(ActionInputError, match="mismatched prepared operation"),
    ):
        services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")])
    assert ActionTransaction.objects.count() == 0


@pytest.mark.django_db
def test_stable_dependency_order_and_ordinals_p2(actions_root):
    # Given c depends on b, and a/d are free: caller order is kept where allowed
    ops = [
        write_op("c.txt", "c", key="c", depends_on=["b"]),
        write_op("a.txt", "a", key="a"),
        write_op("b.txt", "b", key="b"),
        write_op("d.txt", "d", key="d"),
    ]
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=ops)
    assert [op["key"] for op in patch.operations] == ["a", "b", "c", "d"]
    assert [op["ordinal"] for op in patch.operations] == [0, 1, 2, 3]
    by_key = {op["key"]: op for op in patch.operations}
    # depends_on lists operation IDs, not keys (F-1)
    assert by_key["c"]["depends_on"] == [by_key["b"]["id"]]
    assert ActionDependency.objects.get().depends_on_operation_id == by_key["b"]["id"]


@pytest.mark.django_db
def test_ids_digests_and_idempotency_keys_p3_p5_c3(actions_root):
    (actions_root / "a.txt").write_text("old")
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("./a.txt", "new")])
    txn_id = patch.transaction_id
    assert txn_id.startswith("act_") and len(txn_id) == 4 + 32
    op = ActionOperation.objects.get(transaction_id=txn_id)
    assert op.id.startswith("op_") and len(op.id) == 3 + 32
    prepared = json.loads(ActionPayload.objects.get(operation=op, kind="prepared").payload)
    # The stored path is normalized, and the digests cover the prepared payload
    assert prepared["arguments"] == {"path": "a.txt", "content": "new"}
    assert op.arguments_digest == digest(prepared["arguments"])
    assert op.preview_digest == digest(prepared["preview"])
    assert op.precondition_digest == digest(prepared["preconditions"])
    assert prepared["preconditions"]["content_b64"]  # the before-image is kept (not audited)
    assert prepared["sensitive_fields"] == ["content"]
    expected_key = digest(
        {
            "transaction_id": txn_id,
            "operation_id": op.id,
            "adapter": "filesystem",
            "operation": "write_text",
            "arguments_digest": op.arguments_digest,
        }
    )
    assert op.idempotency_key == expected_key
    assert op.compensation_key == expected_key + ":compensate"
    assert (op.state, op.selected) == ("staged", True)
    evidence = ActionEvidence.objects.get(operation=op)
    assert evidence.id.startswith("evi_") and len(evidence.id) == 4 + 32


@pytest.mark.django_db
def test_plan_hash_is_over_the_world_patch_body_p7_f1(actions_root):
    patch = services.stage(
        principal=SYSTEM,
        scope=SCOPE,
        operations=[write_op("a.txt", "x")],
        session_id="s1",
        turn_id=3,
    )
    txn = ActionTransaction.objects.get(pk=patch.transaction_id)
    body = recompute_plan(txn)
    assert set(body) == {
        "format",
        "transaction_id",
        "subject_id",
        "actor_id",
        "mode",
        "plan_version",
        "policy_hash",
        "operations",
    }
    assert body["format"] == "aetna-world-patch-v1" and body["plan_version"] == 1
    assert digest(body) == txn.plan_hash == patch.plan_hash
    assert set(body["operations"][0]) == {
        "id",
        "key",
        "ordinal",
        "adapter",
        "operation",
        "effect_class",
        "arguments_digest",
        "preview_digest",
        "precondition_digest",
        "manifest_digest",
        "depends_on",
        "evidence",
    }
    assert body["operations"][0]["evidence"] == [
        {
            "kind": "episode",
            "ref_id": authorizing_episode_id("msg-1"),
            "digest": sha("msg-1"),
            "relation": "authorized_by",
            "trust_tier": "trusted_user",
            "attested": True,
        }
    ]


@pytest.mark.django_db
def test_evidence_is_sorted_in_the_plan_f1(actions_root):
    op = write_op("a.txt", "x")
    op["evidence"] = [
        {"kind": "web", "ref_id": "z", "digest": sha("z")},
        {"kind": "doc", "ref_id": "b", "digest": sha("b")},
        op["evidence"][0],
    ]
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[op])
    relations = [(e["relation"], e["kind"]) for e in patch.operations[0]["evidence"]]
    assert relations == [
        ("authorized_by", "episode"),
        ("informed_by", "doc"),
        ("informed_by", "web"),
    ]


@pytest.mark.django_db
def test_one_transaction_writes_rows_and_proposed_event_p8_ae1(actions_root):
    patch = services.stage(
        principal=SYSTEM,
        scope=SCOPE,
        operations=[write_op("a.txt", "top secret words")],
        session_id="sess",
        turn_id=7,
    )
    txn = ActionTransaction.objects.get(pk=patch.transaction_id)
    assert txn.state == "awaiting_approval" and txn.mode == "enforce"
    assert txn.created_at == txn.updated_at and txn.terminal_at is None
    assert (txn.session_id, txn.turn_id, txn.actor_id) == ("sess", "t7", "agent")  # P-9
    event = AuditEvent.objects.get(event_type="action.proposed")
    payload = json.loads(event.payload)
    assert (event.subject_id, event.actor, event.session_id, event.turn_id) == (
        SCOPE,
        "agent",
        "sess",
        "t7",
    )
    assert set(payload) == {
        "transaction_id",
        "format",
        "mode",
        "state",
        "plan_hash",
        "policy_hash",
        "operations",
        "evidence",
    }
    assert "evidence" not in payload["operations"][0]
    assert payload["evidence"][0]["operation_id"] == payload["operations"][0]["id"]
    assert payload["evidence"][0]["id"].startswith("evi_")
    # C-5: no content in the audit table
    assert "top secret words" not in audit_dump()


@pytest.mark.django_db
def test_turn_id_string_is_kept_p9(actions_root):
    patch = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")], turn_id="turn-9"
    )
    assert ActionTransaction.objects.get(pk=patch.transaction_id).turn_id == "turn-9"


@pytest.mark.django_db
def test_world_patch_return_value_p10(actions_root):
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")])
    # The JSON the API and the command emit: P-10's keys, in this order
    assert list(patch.as_dict()) == [
        "transaction_id",
        "subject_id",
        "mode",
        "state",
        "plan_version",
        "plan_hash",
        "operations",
        "created_at",
    ]


@pytest.mark.django_db
def test_observe_records_patch_and_evidence_only_preview_keeps_payload_e1_decision7(actions_root):
    # Given informed_by evidence only (enough outside enforce mode)
    op = write_op("a.txt", "x")
    op["evidence"] = [{"kind": "doc", "ref_id": "d", "digest": sha("d")}]
    observed = services.stage(principal=SYSTEM, scope=SCOPE, operations=[op], mode="observe")
    previewed = services.stage(principal=SYSTEM, scope=SCOPE, operations=[op], mode="preview")
    # Then both are staged, neither awaits approval
    assert observed.state == previewed.state == "staged"
    # And observe keeps no prepared payload, preview does (the reviewer's diff)
    assert not ActionPayload.objects.filter(transaction_id=observed.transaction_id).exists()
    assert ActionPayload.objects.filter(
        transaction_id=previewed.transaction_id, kind="prepared"
    ).exists()
    assert (
        ActionEvidence.objects.filter(operation__transaction_id=observed.transaction_id).count()
        == 1
    )


@pytest.mark.django_db
def test_read_only_in_enforce_needs_no_authority_but_awaits_approval_po2(scripted):
    from tests.actions.fakes import scripted_op

    op = scripted_op("k", "v", effect_class="read_only")
    op["evidence"] = []
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[op])
    assert patch.state == "awaiting_approval"


@pytest.mark.django_db
def test_unknown_effect_class_from_adapter_fails_closed_po2(scripted):
    from actions.errors import ActionPolicyViolation
    from tests.actions.fakes import scripted_op

    with pytest.raises(ActionPolicyViolation, match="unknown effects fail closed"):
        services.stage(
            principal=SYSTEM,
            scope=SCOPE,
            operations=[scripted_op("k", "v", effect_class="unknown_blocked")],
        )
    assert ActionTransaction.objects.count() == 0


@pytest.mark.django_db
def test_stage_needs_stage_capability_and_writes_nothing(actions_root, approver):
    # Given an approver (who may approve but not stage) and a token on a sibling scope
    principal = access.operator_principal(approver)
    with pytest.raises(access.AccessDenied):
        services.stage(scope=SCOPE, operations=[write_op("a.txt", "x")], principal=principal)
    token = ApiToken.objects.create(
        name="bot",
        scope="acme:bob:*",
        scope_tenant="acme",
        scope_user="bob",
        scope_project="*",
        capabilities=["stage"],
        token_prefix="p1",
        token_hash=sha("t1"),
        expires_at=timezone.now() + timedelta(days=1),
    )
    with pytest.raises(access.AccessDenied):
        services.stage(
            scope=SCOPE,
            operations=[write_op("a.txt", "x")],
            principal=access.token_principal(token),
        )
    assert ActionTransaction.objects.count() == 0 and AuditEvent.objects.count() == 0


@pytest.mark.django_db
def test_token_stage_records_agent_label_and_owner(actions_root, django_user_model):
    owner = django_user_model.objects.create_user(username="owen", password="pw-owen-owner-1")
    token = ApiToken.objects.create(
        name="bot",
        owner=owner,
        scope="acme:alice:*",
        scope_tenant="acme",
        scope_user="alice",
        scope_project="*",
        capabilities=["stage", "read"],
        token_prefix="p2",
        token_hash=sha("t2"),
        expires_at=timezone.now() + timedelta(days=1),
    )
    # When the token stages, naming a different actor
    patch = services.stage(
        scope=SCOPE,
        operations=[write_op("a.txt", "x")],
        principal=access.token_principal(token),
        actor="someone-else",
    )
    txn = ActionTransaction.objects.get(pk=patch.transaction_id)
    # Then the actor is the token's own label, and its owner is recorded
    assert txn.actor_id == "agent:bot"
    assert (txn.proposer_kind, txn.proposed_by_user_id, txn.proposed_by_token_id) == (
        "token",
        owner.pk,
        token.pk,
    )


@pytest.mark.django_db
def test_operator_with_admin_role_may_stage(actions_root, django_user_model):
    user = django_user_model.objects.create_user(username="root", password="pw-root-admin-1")
    grant(user, "acme:*:*", Role.ADMIN)
    patch = services.stage(
        scope=SCOPE, operations=[write_op("a.txt", "x")], principal=access.operator_principal(user)
    )
    txn = ActionTransaction.objects.get(pk=patch.transaction_id)
    assert (txn.actor_id, txn.proposed_by_user_id) == ("root", user.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("scope", ["acme:alice", "acme:*:secret", "platform:bob:*", 42])
def test_invalid_scope_is_refused(actions_root, scope):
    with pytest.raises(ValueError):
        services.stage(principal=SYSTEM, scope=scope, operations=[write_op("a.txt", "x")])
    assert ActionTransaction.objects.count() == 0


@pytest.mark.django_db
def test_mode_must_be_known(actions_root):
    with pytest.raises(ActionInputError, match="unknown mode"):
        services.stage(
            principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")], mode="yolo"
        )
    assert formats.MODES == ("off", "observe", "preview", "enforce")
