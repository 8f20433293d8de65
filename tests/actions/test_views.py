"""The guarded-actions pages: a permission matrix for every page and POST, and query bounds.

Behaviour of each decision (approve, deny, commit, abort, recover, purge, verify) is in
``test_views_decisions.py``; the helpers here are shared with it.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from actions import services
from actions.models import ActionOperation, ActionPayload, ActionTransaction
from aetnaweb import access
from aetnaweb.access import SYSTEM
from tests.actions.conftest import SCOPE, write_op
from tests.factories import access_matrix, make_operator

AGENT = "agent:deploy-bot"


def stage_write(path: str = "notes.txt", content: str = "hello\n", scope: str = SCOPE) -> str:
    """An agent (not any dashboard user) stages a file write; returns the transaction ID."""
    patch = services.stage(
        principal=SYSTEM, scope=scope, operations=[write_op(path, content)], actor=AGENT
    )
    return patch.transaction_id


def other_approver(username: str = "olga") -> access.Principal:
    """An approver on the tenant who is neither the agent nor the user under test."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        user = make_operator(username, [("acme:*:*", "approver")])
    return access.operator_principal(user)


def approved_write(path: str = "notes.txt", content: str = "hello\n") -> str:
    txn_id = stage_write(path, content)
    services.approve(transaction_id=txn_id, principal=other_approver())
    return txn_id


def aborted_write() -> str:
    txn_id = stage_write()
    services.abort(principal=SYSTEM, transaction_id=txn_id, reason="not needed")
    return txn_id


def interrupted_write() -> str:
    """An approved write whose commit process "died" mid-effect (as T-14 forces it)."""
    txn_id = approved_write()
    ActionTransaction.objects.filter(pk=txn_id).update(state="committing")
    ActionOperation.objects.filter(transaction_id=txn_id).update(state="executing")
    return txn_id


def state_of(txn_id: str) -> str:
    return ActionTransaction.objects.get(pk=txn_id).state


# -- pages about one transaction --------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_detail_permissions(client, actions_root, approval_key, case):
    # Given a plan awaiting approval at acme:alice:proj
    txn_id = stage_write()
    case.sign_in(client)
    # When the plan page is opened
    response = client.get(reverse("actions:detail", args=[txn_id]))
    # Then only a grant that reaches the scope shows it; everything else is the plain 404
    case.check(response)
    if case.allowed:
        assert txn_id.encode() in response.content
        assert (
            b'<td class="ln">1</td><td class="sign">+</td><td class="code">hello</td>'
            in response.content
        )


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer", ok_grant="acme:*:*"))
def test_detail_permissions_through_a_tenant_grant(client, actions_root, approval_key, case):
    # Given a plan, when someone with a grant on the whole tenant opens it, they see it
    txn_id = stage_write()
    case.sign_in(client)
    case.check(client.get(reverse("actions:detail", args=[txn_id])))


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_verify_permissions(client, actions_root, approval_key, case):
    # Given a plan; verifying needs the auditor (or approver) role, not just a view of it
    txn_id = stage_write()
    case.sign_in(client)
    response = client.get(reverse("actions:verify", args=[txn_id]))
    case.check(response)
    if case.allowed:
        assert b"Verified: no failures" in response.content


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_receipt_download_permissions(client, actions_root, approval_key, case):
    # Given an aborted plan (it has a receipt)
    txn_id = aborted_write()
    case.sign_in(client)
    response = client.get(reverse("actions:receipt", args=[txn_id]))
    case.check(response)
    if case.allowed:
        assert response["Content-Type"] == "application/json"


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_purge_page_permissions(client, actions_root, approval_key, case):
    # Given an aborted plan, the purge confirmation is for approvers of its scope only
    txn_id = aborted_write()
    case.sign_in(client)
    response = client.get(reverse("actions:purge", args=[txn_id]))
    case.check(response)
    if case.allowed:
        assert b"full content of every file" in response.content


# -- every POST --------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_approve_permissions(client, actions_root, approval_key, case):
    # Given a plan staged by an agent
    txn_id = stage_write()
    case.sign_in(client)
    # When the approve form is posted
    response = client.post(reverse("actions:approve", args=[txn_id]))
    # Then only an approver of the scope approves it; the others get a 404 and change nothing
    case.check(response, ok=302)
    assert state_of(txn_id) == ("approved" if case.allowed else "awaiting_approval")


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_deny_permissions(client, actions_root, approval_key, case):
    txn_id = stage_write()
    case.sign_in(client)
    response = client.post(reverse("actions:deny", args=[txn_id]), {"reason": "wrong file"})
    case.check(response, ok=302)
    assert state_of(txn_id) == ("aborted" if case.allowed else "awaiting_approval")


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_commit_permissions(client, actions_root, approval_key, case):
    # Given a plan approved by another approver
    txn_id = approved_write()
    case.sign_in(client)
    response = client.post(reverse("actions:commit", args=[txn_id]))
    case.check(response, ok=302)
    # Then the file exists only if an approver of the scope committed it
    assert (actions_root / "notes.txt").exists() is case.allowed
    assert state_of(txn_id) == ("committed" if case.allowed else "approved")


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_abort_permissions(client, actions_root, approval_key, case):
    txn_id = approved_write()
    case.sign_in(client)
    response = client.post(reverse("actions:abort", args=[txn_id]), {"reason": ""})
    case.check(response, ok=302)
    assert state_of(txn_id) == ("aborted" if case.allowed else "approved")


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_recover_permissions(client, actions_root, approval_key, case):
    txn_id = interrupted_write()
    case.sign_in(client)
    response = client.post(reverse("actions:recover", args=[txn_id]))
    case.check(response, ok=302)
    assert state_of(txn_id) == ("recovery_required" if case.allowed else "committing")


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_purge_permissions(client, actions_root, approval_key, case):
    txn_id = aborted_write()
    case.sign_in(client)
    response = client.post(reverse("actions:purge", args=[txn_id]), {"confirm": "on"})
    case.check(response, ok=302)
    purged = ActionPayload.objects.filter(transaction_id=txn_id, purged_at__isnull=False).exists()
    assert purged is case.allowed


# -- list pages: everyone signed in gets 200, with only what they may see ---------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_approval_queue_lists_only_plans_the_user_may_approve(
    client, actions_root, approval_key, case
):
    txn_id = stage_write()
    case.sign_in(client)
    response = client.get(reverse("actions:index"))
    if case.grants is None:
        case.check(response)
        return
    assert response.status_code == 200
    assert (txn_id[:16].encode() in response.content) is case.allowed


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
@pytest.mark.parametrize("page", ["actions:attention", "actions:history"])
def test_attention_and_history_list_only_visible_transactions(
    client, actions_root, approval_key, monkeypatch, case, page
):
    # Given an uncertain transaction (the file adapter raised mid-write) at acme:alice:proj
    txn_id = approved_write()
    monkeypatch.setattr(
        "actions.adapters.filesystem.FilesystemAdapter.execute",
        lambda self, prepared, key: (_ for _ in ()).throw(RuntimeError("disk went away")),
    )
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    assert state_of(txn_id) == "uncertain"
    case.sign_in(client)
    response = client.get(reverse(page))
    if case.grants is None:
        case.check(response)
        return
    assert response.status_code == 200
    assert (txn_id[:16].encode() in response.content) is case.allowed


# -- query bounds ------------------------------------------------------------------------


@pytest.mark.django_db
def test_page_query_counts_are_bounded(
    client, actions_root, approval_key, django_assert_max_num_queries
):
    # Given an approver and several transactions in several states
    ids = [stage_write(f"file{n}.txt", f"content {n}\n") for n in range(4)]
    committed = approved_write("done.txt", "done\n")
    services.commit(principal=SYSTEM, transaction_id=committed)
    ids.append(interrupted_write())
    client.force_login(make_operator("ada", [("acme:*:*", "approver")]))
    # Then each page costs a bounded number of queries whatever the number of rows
    with django_assert_max_num_queries(8):
        assert client.get(reverse("actions:index")).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(reverse("actions:attention")).status_code == 200
    with django_assert_max_num_queries(6):
        assert client.get(reverse("actions:history")).status_code == 200
    with django_assert_max_num_queries(13):
        assert client.get(reverse("actions:detail", args=[committed])).status_code == 200
    with django_assert_max_num_queries(13):
        assert client.get(reverse("actions:detail", args=[ids[0]])).status_code == 200
    with django_assert_max_num_queries(13):
        assert client.get(reverse("actions:receipt", args=[committed])).status_code == 200
    with django_assert_max_num_queries(14):
        assert client.get(reverse("actions:purge", args=[committed])).status_code == 200


@pytest.mark.django_db
def test_verify_query_count_is_bounded(
    client, actions_root, approval_key, django_assert_max_num_queries
):
    # Given a committed plan, verifying it through htmx costs a bounded number of queries
    committed = approved_write("done.txt", "done\n")
    services.commit(principal=SYSTEM, transaction_id=committed)
    client.force_login(make_operator("ada", [("acme:*:*", "approver")]))
    # (+2: the receipt's log proof is checked against the stored log's root; +2: the
    # chain check reads the scope's records and messages, one chunk each, to compare
    # every field the chain binds)
    with django_assert_max_num_queries(21):
        response = client.get(reverse("actions:verify", args=[committed]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
