"""Guarded actions over the API: stage, list, show, verify; approval stays with people."""

from __future__ import annotations

import hashlib

import pytest

from actions.models import ActionOperation, ActionTransaction
from audit.models import AuditEvent
from tests.factories import authorizing_evidence

SCOPE = "acme:alice:proj"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_op(path: str = "notes/todo.txt", content: str = "buy milk\n", key: str = "w1") -> dict:
    return {
        "key": key,
        "adapter": "filesystem",
        "operation": "write_text",
        "arguments": {"path": path, "content": content},
        "evidence": [authorizing_evidence()],
    }


@pytest.fixture(autouse=True)
def _authorizing_messages(authorizing_messages) -> None:
    """The user message the action evidence here cites exists (evidence must resolve)."""


@pytest.fixture
def notes_dir(actions_root):
    (actions_root / "notes").mkdir()
    return actions_root / "notes"


def stage(api, **overrides):
    body = {"scope": SCOPE, "operations": [write_op()], **overrides}
    return api.post("/actions/stage", body)


@pytest.mark.django_db
def test_stage_records_an_exact_plan_awaiting_a_person(alice_api, notes_dir):
    # When the agent stages a file write
    response = stage(alice_api, session_id="s1")
    # Then the plan is recorded, hashed, and waits for approval; nothing is written to disk
    assert response.status_code == 201, response.content
    patch = response.data
    assert patch["state"] == "awaiting_approval"
    assert patch["subject_id"] == SCOPE
    assert len(patch["plan_hash"]) == 64
    txn = ActionTransaction.objects.get(pk=patch["transaction_id"])
    assert txn.actor_id == "agent:test-agent"
    assert not (notes_dir / "todo.txt").exists()
    # And the proposal is in the chain without the file content
    event = AuditEvent.objects.get(event_type="action.proposed")
    assert "buy milk" not in event.payload


@pytest.mark.django_db
def test_observe_mode_stages_without_approval(alice_api, notes_dir):
    response = stage(alice_api, mode="observe")
    assert response.data["state"] == "staged"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"operations": []}, "operations", "at least 1"),
        ({"operations": "write"}, "operations", "valid list"),
        ({"mode": "off"}, "mode", "Input should be"),
        ({"operations": [{**write_op(), "adapter": "teleport"}]}, "operations", "teleport"),
        ({"operations": [write_op(), write_op()]}, "operations", "unique"),
        ({"operations": [{**write_op(), "depends_on": ["ghost"]}]}, "operations", "unknown"),
        ({"operations": [{**write_op(), "evidence": []}]}, "operations", "authorized_by"),
        (
            {"operations": [{**write_op(), "arguments": {"path": "/etc/passwd", "content": "x"}}]},
            "operations",
            "relative",
        ),
        (
            {"operations": [{**write_op(), "arguments": {"path": "../up.txt", "content": "x"}}]},
            "operations",
            "escapes",
        ),
        ({"operations": [{**write_op(), "key": ""}]}, "operations.0.key", "at least 1"),
        (
            {
                "operations": [
                    {**write_op(), "evidence": [{"kind": "m", "ref_id": "r", "digest": "xyz"}]}
                ]
            },
            "operations.0.evidence.0.digest",
            "at least 64",
        ),
    ],
)
def test_bad_plans_are_400_and_write_nothing(alice_api, notes_dir, overrides, field, fragment):
    before = AuditEvent.objects.count()
    response = stage(alice_api, **overrides)
    assert response.status_code == 400, response.content
    assert response.data["field"] == field
    assert fragment in response.data["detail"]
    assert not ActionTransaction.objects.exists()
    assert not ActionOperation.objects.exists()
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_untrusted_evidence_may_not_authorize_over_the_api(alice_api, notes_dir):
    op = write_op()
    op["evidence"][0]["trust_tier"] = "untrusted_content"
    response = stage(alice_api, operations=[op])
    assert response.status_code == 400
    assert response.data["error"] == "policy_violation"
    assert "may inform but cannot authorize" in response.data["detail"]


@pytest.mark.django_db
def test_list_show_and_verify(alice_api, notes_dir):
    first = stage(alice_api).data["transaction_id"]
    second = stage(alice_api, operations=[write_op(path="notes/b.txt")]).data["transaction_id"]
    # List, newest first, by key
    page = alice_api.get("/actions/", {"limit": 1})
    assert page.status_code == 200
    assert [t["transaction_id"] for t in page.data["items"]] == [second]
    # next_cursor is the one cursor name; next_after stays as a deprecated alias
    assert page.data["next_after"] == page.data["next_cursor"] is not None
    rest = alice_api.get("/actions/", {"limit": 1, "after": page.data["next_cursor"]})
    assert [t["transaction_id"] for t in rest.data["items"]] == [first]
    assert rest.data["next_cursor"] is None
    by_state = alice_api.get("/actions/", {"scope": SCOPE, "state": ["committed"]})
    assert by_state.data["items"] == []
    # Show, with the preview the reviewer will see
    shown = alice_api.get(f"/actions/{first}")
    assert shown.status_code == 200
    assert shown.data["transaction"]["state"] == "awaiting_approval"
    assert shown.data["operations"][0]["operation"] == "write_text"
    assert shown.data["permissions"]["approve"] is False
    # Verify
    verified = alice_api.get(f"/actions/{first}/verify")
    assert verified.status_code == 200
    assert verified.data["valid"] is True
    assert verified.data["failures"] == []


# The JSON of GET /actions/{id}, as it was when the detail was a dict (issue 34 item 5:
# it is a dataclass now, and its as_dict() must answer exactly these keys, in this order).
DETAIL_KEYS = [
    "transaction",
    "abort_reason",
    "plan",
    "plan_matches_hash",
    "operations",
    "evidence",
    "approvals",
    "attempts",
    "receipt",
    "payloads_purged",
    "attention",
    "permissions",
    "self_proposed",
    "approval_enabled",
    "resolution",
    "summary",
]
OPERATION_KEYS = [
    "operation_id",
    "key",
    "ordinal",
    "adapter",
    "operation",
    "effect_class",
    "state",
    "arguments_digest",
    "preview_digest",
    "precondition_digest",
    "manifest_digest",
    "idempotency_key",
    "result_digest",
    "compensation_digest",
    "depends_on",
    "preview",
    "target",
    "diff",
    "payload",
    "payload_bound",
    "authorized_by",
    "informed_by",
]
PERMISSION_KEYS = ["approve", "deny", "commit", "abort", "recover", "resolve", "purge", "verify"]


@pytest.mark.django_db
def test_the_transaction_json_keeps_its_shape(alice_api, notes_dir):
    # Given a staged plan
    txn_id = stage(alice_api).data["transaction_id"]
    # When it is shown over the API
    shown = alice_api.get(f"/actions/{txn_id}")
    # Then the keys, their order and the JSON types are the ones clients were built against
    assert shown.status_code == 200
    assert list(shown.data) == DETAIL_KEYS
    operation = shown.data["operations"][0]
    assert list(operation) == OPERATION_KEYS
    assert isinstance(operation["depends_on"], list) and isinstance(operation["preview"], dict)
    assert list(shown.data["permissions"]) == PERMISSION_KEYS
    assert list(shown.data["evidence"]) == ["authorized_by", "informed_by"]
    assert shown.data["evidence"]["authorized_by"][0]["authority"]["resolved"] is True
    assert shown.data["approvals"] == shown.data["attempts"] == shown.data["attention"] == []
    assert shown.data["resolution"] is None and shown.data["receipt"] is None
    assert shown.data["plan"]["format"] == "aetna-world-patch-v1"


@pytest.mark.django_db
def test_unknown_transactions_are_404(alice_api):
    assert alice_api.get("/actions/act_" + "0" * 32).status_code == 404
    assert alice_api.get("/actions/act_" + "0" * 32 + "/verify").status_code == 404
    assert alice_api.get("/actions/" + "x" * 300).status_code == 404


@pytest.mark.django_db
def test_verify_needs_the_audit_capability(make_api, notes_dir):
    stager = make_api("acme:alice:*", ["stage", "read"])
    txn = stage(stager).data["transaction_id"]
    response = stager.get(f"/actions/{txn}/verify")
    assert response.status_code == 403
    assert "'audit'" in response.data["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "verb", ["approve", "deny", "commit", "abort", "recover", "purge-payloads"]
)
def test_no_endpoint_approves_commits_or_aborts(alice_api, notes_dir, verb):
    # Approval, commit and the rest stay with people in the dashboard.
    txn = stage(alice_api).data["transaction_id"]
    response = alice_api.post(f"/actions/{txn}/{verb}", {})
    assert response.status_code in {404, 405}
    assert ActionTransaction.objects.get(pk=txn).state == "awaiting_approval"


@pytest.mark.django_db
def test_bad_list_parameters_are_400(alice_api):
    response = alice_api.get("/actions/", {"state": "exploded"})
    assert response.status_code == 400
    assert response.data["field"] == "state.0"
    response = alice_api.get("/actions/", {"scope": "acme"})
    assert response.status_code == 400
    assert response.data["field"] == "scope"
