"""A5 approve, F-2 approvals, decisions 5 and 6 (separation of duties, the key)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from access.models import ApiToken, Role
from actions import formats, services
from actions.approvals import ApprovalAuthority, configured_authority
from actions.errors import (
    ActionInputError,
    ActionStateError,
    ApprovalInvalid,
    ApprovalUnavailable,
    SeparationOfDutiesError,
    TransactionNotFound,
)
from actions.models import ActionApproval, ActionTransaction
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.canonical import digest
from audit.models import AuditEvent
from tests.actions.conftest import APPROVAL_KEY, SCOPE, grant, sha, table_counts, write_op


@pytest.fixture
def staged(actions_root) -> str:
    return services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id


def _authority() -> ApprovalAuthority:
    return ApprovalAuthority(APPROVAL_KEY.encode())


@pytest.mark.django_db
def test_approve_records_row_state_and_event_ap5(staged, approval_key, approver_principal):
    # When the approver approves
    result = services.approve(transaction_id=staged, principal=approver_principal)
    # Then the state moved, one row records the signed approval, one event says so
    assert result.state == "approved"
    row = ActionApproval.objects.get()
    document = row.as_approval()
    assert row.id == "apr_" + row.nonce and len(row.nonce) == 32
    assert (row.decision, row.approver_principal) == ("approved", "ada")
    assert row.approval_digest == formats.approval_digest(document) == digest(document)
    assert _authority().verify(document, transaction_id=staged, plan_hash=row.plan_hash)
    event = AuditEvent.objects.get(event_type="action.approved")
    assert event.actor == "ada"
    assert json.loads(event.payload) == {
        "transaction_id": staged,
        "approval_id": row.id,
        "plan_hash": row.plan_hash,
        "approval_digest": row.approval_digest,
        "approver": "ada",
        "expires_at": row.expires_at,
    }
    assert APPROVAL_KEY not in event.payload and row.signature not in event.payload


@pytest.mark.django_db
def test_approval_without_key_is_disabled_with_clear_message_ap1_decision6(
    staged, settings, approver_principal
):
    settings.AETNAWEB_APPROVAL_KEY = ""
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    before = table_counts()
    with pytest.raises(ApprovalUnavailable, match="approval is disabled: no approval key"):
        services.approve(transaction_id=staged, principal=approver_principal)
    assert isinstance(ApprovalUnavailable("x"), RuntimeError)
    assert table_counts() == before
    assert ActionTransaction.objects.get().state == "awaiting_approval"


@pytest.mark.django_db
def test_short_key_is_refused_ap6(staged, settings, approver_principal):
    settings.AETNAWEB_APPROVAL_KEY = "too-short"
    with pytest.raises(ApprovalUnavailable, match="at least 32 bytes"):
        services.approve(transaction_id=staged, principal=approver_principal)
    assert ActionApproval.objects.count() == 0


@pytest.mark.django_db
def test_key_file_is_read_and_stripped(staged, settings, tmp_path, approver_principal):
    key_file = tmp_path / "key"
    key_file.write_text("\n  " + "f" * 32 + "  \n")
    settings.AETNAWEB_APPROVAL_KEY = ""
    settings.AETNAWEB_APPROVAL_KEY_FILE = str(key_file)
    services.approve(transaction_id=staged, principal=approver_principal)
    row = ActionApproval.objects.get()
    assert ApprovalAuthority(b"f" * 32).signature_valid(row.as_approval())


def test_authority_issue_rules_ap6():
    with pytest.raises(ValueError, match="at least 32 bytes"):
        ApprovalAuthority(b"x" * 31)
    with pytest.raises(ValueError, match="ttl_seconds must be positive"):
        ApprovalAuthority(b"x" * 32, ttl_seconds=0)
    authority = ApprovalAuthority(b"x" * 32, ttl_seconds=60)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    approval = authority.issue(transaction_id="act_1", plan_hash="a" * 64, approver="ada", now=now)
    assert set(approval) == {
        "transaction_id",
        "plan_hash",
        "approver",
        "issued_at",
        "expires_at",
        "nonce",
        "signature",
        "format",
    }
    assert approval["format"] == "aetna-action-approval-v1"
    assert re.fullmatch(r"[0-9a-f]{32}", approval["nonce"])
    again = authority.issue(transaction_id="act_1", plan_hash="a" * 64, approver="ada", now=now)
    assert again["nonce"] != approval["nonce"]  # fresh per approval: a replay is detectable
    assert datetime.fromisoformat(approval["expires_at"]) - now == timedelta(seconds=60)
    assert approval["issued_at"] == now.isoformat()
    assert "ApprovalAuthority" in repr(authority) and "x" * 32 not in repr(authority)


def test_verify_checks_every_field_ap4():
    authority = ApprovalAuthority(b"x" * 32, ttl_seconds=60)
    now = datetime.now(UTC)
    good = authority.issue(transaction_id="act_1", plan_hash="a" * 64, approver="ada", now=now)
    assert authority.verify(good, transaction_id="act_1", plan_hash="a" * 64)
    assert not authority.verify(good, transaction_id="act_2", plan_hash="a" * 64)
    assert not authority.verify(good, transaction_id="act_1", plan_hash="b" * 64)
    assert not ApprovalAuthority(b"y" * 32).verify(good, transaction_id="act_1", plan_hash="a" * 64)
    assert not authority.verify(
        {**good, "approver": "eve"}, transaction_id="act_1", plan_hash="a" * 64
    )
    assert not authority.verify(
        good, transaction_id="act_1", plan_hash="a" * 64, at=now + timedelta(seconds=61)
    )
    assert not authority.verify(
        good, transaction_id="act_1", plan_hash="a" * 64, at=now - timedelta(seconds=1)
    )
    broken = {**good, "issued_at": "yesterday"}
    broken["signature"] = authority.sign(broken)
    assert not authority.verify(broken, transaction_id="act_1", plan_hash="a" * 64)


@pytest.mark.django_db
def test_unknown_transaction_is_a_key_error_ap2(approval_key, approver_principal):
    with pytest.raises(KeyError):
        services.approve(transaction_id="act_" + "0" * 32, principal=approver_principal)
    assert issubclass(TransactionNotFound, KeyError)


@pytest.mark.django_db
def test_wrong_plan_approval_is_rejected(staged, approval_key, approver_principal):
    # T-4: an approval signed over the wrong plan hash
    forged = _authority().issue(transaction_id=staged, plan_hash="0" * 64, approver="ada")
    before = table_counts()
    with pytest.raises(ValueError, match="invalid"):
        services.approve(transaction_id=staged, principal=approver_principal, approval=forged)
    assert ActionTransaction.objects.get().state == "awaiting_approval"
    assert table_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["wrong_key", "expired", "future", "other_approver"])
def test_invalid_approvals_change_nothing_ap4(staged, approval_key, approver_principal, case):
    plan_hash = ActionTransaction.objects.get().plan_hash
    now = datetime.now(UTC)
    authority = _authority()
    if case == "wrong_key":
        approval = ApprovalAuthority(b"z" * 32).issue(
            transaction_id=staged, plan_hash=plan_hash, approver="ada"
        )
    elif case == "expired":
        approval = authority.issue(
            transaction_id=staged, plan_hash=plan_hash, approver="ada", now=now - timedelta(hours=1)
        )
    elif case == "future":
        approval = authority.issue(
            transaction_id=staged,
            plan_hash=plan_hash,
            approver="ada",
            now=now + timedelta(minutes=5),
        )
    else:
        approval = authority.issue(transaction_id=staged, plan_hash=plan_hash, approver="mallory")
    before = table_counts()
    with pytest.raises(ApprovalInvalid, match="signature, scope, plan hash, or expiry is invalid"):
        services.approve(transaction_id=staged, principal=approver_principal, approval=approval)
    assert table_counts() == before


@pytest.mark.django_db
def test_approval_nonce_cannot_be_replayed(staged, approval_key, approver_principal):
    # T-5: Given a valid approval that has been applied once
    plan_hash = ActionTransaction.objects.get().plan_hash
    approval = _authority().issue(transaction_id=staged, plan_hash=plan_hash, approver="ada")
    services.approve(transaction_id=staged, principal=approver_principal, approval=approval)
    # When it is re-submitted, Then it is refused by the state check
    with pytest.raises(ActionStateError, match="not awaiting_approval"):
        services.approve(transaction_id=staged, principal=approver_principal, approval=approval)
    assert ActionApproval.objects.count() == 1


@pytest.mark.django_db
def test_staged_preview_plans_cannot_be_approved_ap3(
    actions_root, approval_key, approver_principal
):
    op = write_op("a.txt", "x")
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[op], mode="preview"
    ).transaction_id
    with pytest.raises(ActionStateError, match="is staged, not awaiting_approval"):
        services.approve(transaction_id=txn_id, principal=approver_principal)


@pytest.mark.django_db
def test_self_approval_is_refused_decision5(actions_root, approval_key, django_user_model):
    # Given an admin (who may both stage and approve) proposes a plan
    user = django_user_model.objects.create_user(username="root", password="pw-root-admin-1")
    grant(user, "acme:*:*", Role.ADMIN)
    principal = access.operator_principal(user)
    txn_id = services.stage(
        scope=SCOPE, operations=[write_op("a.txt", "x")], principal=principal
    ).transaction_id
    before = table_counts()
    # When they try to approve it, Then separation of duties refuses
    with pytest.raises(SeparationOfDutiesError, match="another approver must approve it"):
        services.approve(transaction_id=txn_id, principal=principal)
    assert table_counts() == before


@pytest.mark.django_db
def test_agent_owner_may_not_approve_its_agents_plan_decision5(
    actions_root, approval_key, django_user_model
):
    from django.utils import timezone

    owner = django_user_model.objects.create_user(username="owen", password="pw-owen-owner-1")
    grant(owner, "acme:*:*", Role.APPROVER)
    token = ApiToken.objects.create(
        name="bot",
        owner=owner,
        scope="acme:alice:*",
        scope_tenant="acme",
        scope_user="alice",
        scope_project="*",
        capabilities=["stage"],
        token_prefix="p3",
        token_hash=sha("t3"),
        expires_at=timezone.now() + timedelta(days=1),
    )
    txn_id = services.stage(
        scope=SCOPE, operations=[write_op("a.txt", "x")], principal=access.token_principal(token)
    ).transaction_id
    with pytest.raises(SeparationOfDutiesError):
        services.approve(transaction_id=txn_id, principal=access.operator_principal(owner))
    assert ActionApproval.objects.count() == 0


@pytest.mark.django_db
def test_operator_named_like_the_proposing_actor_is_refused(
    actions_root, approval_key, django_user_model
):
    user = django_user_model.objects.create_user(username="agent", password="pw-agent-user-1")
    grant(user, "acme:*:*", Role.APPROVER)
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    with pytest.raises(SeparationOfDutiesError):
        services.approve(transaction_id=txn_id, principal=access.operator_principal(user))


@pytest.mark.django_db
def test_only_approvers_on_the_scope_may_approve_decision5(staged, approval_key, django_user_model):
    # Given a viewer on the scope, an approver on a sibling, and an approver on a prefix twin
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-viewer-1")
    grant(viewer, "acme:*:*", Role.VIEWER)
    sibling = django_user_model.objects.create_user(username="sib", password="pw-sib-approver-1")
    grant(sibling, "acme:bob:*", Role.APPROVER)
    twin = django_user_model.objects.create_user(username="twin", password="pw-twin-approver-1")
    grant(twin, "acmecorp:*:*", Role.APPROVER)
    before = table_counts()
    for user in (viewer, sibling, twin):
        with pytest.raises(access.AccessDenied):
            services.approve(transaction_id=staged, principal=access.operator_principal(user))
    assert table_counts() == before


@pytest.mark.django_db
def test_only_a_signed_in_person_may_approve_decision5(staged, approval_key):
    with pytest.raises(SeparationOfDutiesError, match="signed-in person"):
        services.approve(transaction_id=staged, principal=access.system_principal("ops"))
    assert ActionApproval.objects.count() == 0


def test_configured_authority_is_optional_when_not_required(settings):
    settings.AETNAWEB_APPROVAL_KEY = ""
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    assert configured_authority(required=False) is None
    settings.AETNAWEB_APPROVAL_KEY_FILE = "/nonexistent/key"
    with pytest.raises(ApprovalUnavailable, match="cannot read the approval key file"):
        configured_authority(required=False)


@pytest.mark.django_db
def test_the_service_refuses_a_reason_over_the_cap_and_writes_nothing(staged, approval_key):
    # Given a staged plan and a reason one character over the cap, sent past any form
    too_long = "r" * (services.MAX_REASON_LENGTH + 1)
    before = (AuditEvent.objects.count(), ActionTransaction.objects.get(pk=staged).state)
    # When abort and deny are called directly with it
    for verb in (services.abort, services.deny):
        with pytest.raises(ActionInputError, match=f"at most {services.MAX_REASON_LENGTH}"):
            verb(transaction_id=staged, reason=too_long, principal=access.system_principal())
    # Then nothing changed; a reason of exactly the cap is accepted
    assert (AuditEvent.objects.count(), ActionTransaction.objects.get(pk=staged).state) == before
    exact = "r" * services.MAX_REASON_LENGTH
    services.abort(transaction_id=staged, reason=exact, principal=access.system_principal())
    assert ActionTransaction.objects.get(pk=staged).abort_reason == exact
