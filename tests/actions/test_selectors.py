"""Selectors: visibility built in, key pagination, the reviewer's detail, queues and counts."""

from __future__ import annotations

import pytest

from access.models import Role
from actions import selectors, services
from aetnaweb import access
from aetnaweb.access import SYSTEM
from tests.actions.conftest import grant, stage_and_approve, write_op
from tests.actions.fakes import scripted_op, set_script

pytestmark = pytest.mark.django_db


def _stage(scope: str, path: str = "a.txt", content: str = "x") -> str:
    return services.stage(
        principal=SYSTEM, scope=scope, operations=[write_op(path, content)]
    ).transaction_id


def _operator(django_user_model, name: str, *grants: tuple[str, str]) -> access.Principal:
    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-operator-1")
    for scope, role in grants:
        grant(user, scope, role)
    return access.operator_principal(user)


def test_lists_only_what_the_principal_may_see(actions_root, django_user_model):
    # Given plans in a project, a sibling user, and a prefix-twin tenant
    mine = _stage("acme:alice:proj")
    _stage("acme:bob:proj")
    _stage("acmecorp:alice:proj")
    alice_viewer = _operator(django_user_model, "vic", ("acme:alice:*", Role.VIEWER))
    # When the viewer lists, Then only their subtree comes back
    page = selectors.list_transactions(alice_viewer)
    assert [item["transaction_id"] for item in page.items] == [mine]
    nobody = _operator(django_user_model, "nobody")
    assert selectors.list_transactions(nobody).items == []
    assert len(selectors.list_transactions(access.system_principal()).items) == 3


def test_key_pagination_scope_and_state_filters(actions_root, approval_key, approver_principal):
    ids = [_stage("acme:alice:proj", f"f{i}.txt") for i in range(5)]
    services.abort(transaction_id=ids[0], principal=approver_principal)
    everyone = access.system_principal()
    first = selectors.list_transactions(everyone, limit=2)
    assert [i["transaction_id"] for i in first.items] == ids[::-1][:2]
    second = selectors.list_transactions(everyone, limit=2, after=first.next_after)
    third = selectors.list_transactions(everyone, limit=2, after=second.next_after)
    seen = [i["transaction_id"] for page in (first, second, third) for i in page.items]
    assert seen == ids[::-1] and third.next_after is None
    assert [
        i["transaction_id"] for i in selectors.list_transactions(everyone, states=["aborted"]).items
    ] == [ids[0]]
    assert selectors.list_transactions(everyone, scope="acme:bob:*").items == []
    assert len(selectors.list_transactions(everyone, scope="acme:*:*").items) == 5
    assert selectors.list_transactions(everyone, after="act_unknown").items == []


def test_list_query_count_is_bounded(actions_root, django_assert_max_num_queries):
    for i in range(30):
        _stage("acme:alice:proj", f"f{i}.txt")
    with django_assert_max_num_queries(3):  # the page, then its operations and their paths
        page = selectors.list_transactions(access.system_principal(), limit=20)
    assert len(page.items) == 20


def test_detail_for_a_reviewer(actions_root, approval_key, approver_principal):
    # Given an existing file and an approved plan rewriting it, with mixed evidence
    (actions_root / "notes.txt").write_text("alpha\nbeta\n")
    op = write_op("notes.txt", "alpha\ngamma\n")
    op["evidence"].append({"kind": "web", "ref_id": "https://example.org", "digest": "a" * 64})
    txn_id = stage_and_approve([op], approver_principal)
    detail = selectors.transaction_detail(approver_principal, txn_id)
    operation = detail.operations[0]
    # Then the diff, preview and evidence split are there
    assert "-beta" in operation.diff and "+gamma" in operation.diff
    assert operation.target == "notes.txt" and operation.payload == "kept"
    assert operation.preview["after_exists"] is True
    assert [e["kind"] for e in detail.evidence["authorized_by"]] == ["episode"]
    assert detail.evidence["authorized_by"][0]["authority"]["resolved"] is True
    assert [e["kind"] for e in detail.evidence["informed_by"]] == ["web"]
    approval = detail.approvals[0]
    assert approval.approver == "ada" and approval.expired is False and approval.expires_at
    assert detail.permissions.commit and not detail.permissions.approve
    assert detail.receipt is None
    # When it is committed and purged, Then the receipt shows and the content is gone
    services.commit(transaction_id=txn_id, principal=approver_principal)
    services.purge_payloads(transaction_id=txn_id, principal=approver_principal)
    detail = selectors.transaction_detail(approver_principal, txn_id)
    assert detail.receipt["terminal_state"] == "committed"
    assert detail.attempts[0].state == "verified"
    assert detail.operations[0].diff == "" and detail.operations[0].payload == "purged"
    assert detail.payloads_purged is True
    assert detail.permissions.purge


def test_detail_is_404_out_of_reach(actions_root, django_user_model):
    txn_id = _stage("acme:alice:proj")
    cases = ((("acme:bob:*", Role.APPROVER),), (("acmecorp:*:*", Role.ADMIN),), ())
    for index, grants in enumerate(cases):
        principal = _operator(django_user_model, f"user{index}", *grants)
        with pytest.raises(access.AccessDenied):
            selectors.transaction_detail(principal, txn_id)
    with pytest.raises(access.AccessDenied):
        selectors.transaction_detail(access.system_principal(), "act_missing")


def test_detail_flags_self_proposed_plans(actions_root, approval_key, django_user_model):
    admin = _operator(django_user_model, "root", ("acme:*:*", Role.ADMIN))
    txn_id = services.stage(
        scope="acme:alice:proj", operations=[write_op("a.txt", "x")], principal=admin
    ).transaction_id
    detail = selectors.transaction_detail(admin, txn_id)
    assert detail.self_proposed is True and detail.permissions.approve is False


def test_detail_query_count_is_bounded(
    actions_root, approval_key, approver_principal, django_assert_max_num_queries
):
    ops = [write_op(f"f{i}.txt", "x", key=f"k{i}") for i in range(10)]
    txn_id = stage_and_approve(ops, approver_principal)
    with django_assert_max_num_queries(10):
        detail = selectors.transaction_detail(approver_principal, txn_id)
    assert len(detail.operations) == 10


def test_approval_queue_only_where_principal_may_approve(
    actions_root, approver_principal, django_user_model
):
    waiting = _stage("acme:alice:proj")
    _stage("globex:bob:proj")
    services.stage(
        principal=SYSTEM,
        scope="acme:alice:proj",
        operations=[write_op("p.txt", "x")],
        mode="preview",
    )
    queue = selectors.approval_queue(approver_principal)
    assert [item["transaction_id"] for item in queue] == [waiting]
    assert queue[0]["operation_count"] == 1
    viewer = _operator(django_user_model, "vic", ("acme:*:*", Role.VIEWER))
    assert selectors.approval_queue(viewer) == []


def test_attention_queue_says_what_to_check(scripted, approval_key, approver_principal):
    # Given an uncertain transaction (a write undone, then an effect of unknown outcome)
    set_script(scripted, execute="raise")
    uncertain = stage_and_approve(
        [write_op("report.txt", "x", key="w"), scripted_op("k", "v", depends_on=["w"])],
        approver_principal,
    )
    services.commit(transaction_id=uncertain, principal=approver_principal)
    # And a fenced one
    fenced = stage_and_approve([write_op("other.txt", "y")], approver_principal)
    from actions.models import ActionOperation, ActionTransaction

    ActionTransaction.objects.filter(pk=fenced).update(state="committing")
    ActionOperation.objects.filter(transaction_id=fenced).update(state="executing")
    services.recover(transaction_id=fenced, principal=approver_principal)
    queue = {item["transaction_id"]: item for item in selectors.attention_queue(approver_principal)}
    assert set(queue) == {uncertain, fenced}
    checks = " ".join(queue[uncertain]["what_to_check"])
    assert "Check whether scripted set" in checks and "report.txt was undone" in checks
    fenced_checks = queue[fenced]["what_to_check"]
    assert "stopped mid-way" in fenced_checks[0]
    assert "Check whether filesystem write_text on other.txt happened" in fenced_checks[1]
    detail = selectors.transaction_detail(approver_principal, fenced)
    assert list(detail.attention) == fenced_checks


def test_counts_by_tenant(actions_root, approval_key, approver_principal, django_user_model):
    _stage("acme:alice:proj")
    _stage("acme:bob:proj")
    _stage("globex:x:y")
    aborted = _stage("acme:alice:proj", "z.txt")
    services.abort(transaction_id=aborted, principal=approver_principal)
    assert selectors.counts_by_tenant(access.system_principal()) == {
        "acme": {"pending_approvals": 2, "uncertain": 0, "recovery_required": 0},
        "globex": {"pending_approvals": 1, "uncertain": 0, "recovery_required": 0},
    }
    bob_viewer = _operator(django_user_model, "bv", ("acme:bob:*", Role.VIEWER))
    assert selectors.counts_by_tenant(bob_viewer) == {
        "acme": {"pending_approvals": 1, "uncertain": 0, "recovery_required": 0}
    }


def test_detail_json_keeps_the_keys_of_approvals_attempts_and_resolution(
    actions_root, approval_key, approver_principal, monkeypatch
):
    # Given an approved plan whose write fails with its effect unknown, then resolved
    txn_id = stage_and_approve([write_op("a.txt", "x")], approver_principal)
    monkeypatch.setattr(
        "actions.adapters.filesystem.FilesystemAdapter.execute",
        lambda self, prepared, key: (_ for _ in ()).throw(RuntimeError("disk went away")),
    )
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    services.record_resolution(
        transaction_id=txn_id,
        principal=approver_principal,
        outcome="applied",
        note="seen",
        owner="ops",
    )
    # When the detail is read as JSON
    detail = selectors.transaction_detail(approver_principal, txn_id)
    data = detail.as_dict()
    # Then each part answers the keys (and order) it answered as a dict, typed on the way
    assert list(data["approvals"][0]) == [
        "approval_id",
        "approver",
        "decision",
        "plan_hash",
        "issued_at",
        "expires_at",
        "expired",
        "approval_digest",
        "created_at",
    ]
    assert list(data["attempts"][0]) == [
        "attempt_id",
        "operation_id",
        "phase",
        "attempt_number",
        "state",
        "idempotency_key",
        "provider_request_id",
        "error_code",
        "error_digest",
        "started_at",
        "finished_at",
    ]
    assert data["resolution"] == {
        "outcome": "applied",
        "outcome_label": detail.resolution.outcome_label,
        "note": "seen",
        "owner": "ops",
        "resolved_by": approver_principal.label,
        "audit_event_id": detail.resolution.audit_event_id,
        "created_at": detail.resolution.created_at,
    }
    assert data["attention"] == list(detail.attention) and data["attention"]
    assert data["receipt"]["terminal_state"] == detail.receipt["terminal_state"]
