"""Compatibility with the published aetnamem verifiers (issue 14, part A).

- ``action_evidence.transaction_id`` exists and is filled, so the published
  verifier's evidence query runs on our database;
- ``policy_hash`` is byte-identical to the published ``GuardPolicy.digest``;
- a stored payload edited after approval fails verification.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from django.db import connection

from actions import services
from actions.models import ActionEvidence, ActionOperation, ActionPayload, ActionTransaction
from actions.proposals import DEFAULT_POLICY, GuardPolicy
from actions.verification import verify_action
from audit.canonical import canonical_json, sha256_text
from tests.actions.conftest import stage_and_approve, write_op

pytestmark = pytest.mark.django_db

# sha256 of the literal canonical bytes the published policy hashes by default:
# {"require_attested_authority":true,"require_authority_for_enforce":true,
#  "trusted_authority_tiers":["trusted_user","user_confirmed"]}
PUBLISHED_DEFAULT_POLICY_HASH = "cccd6f2978430650109e235bf74c98ff978f102e34935f78bb0754245a31e45b"
# {"require_attested_authority":false,"require_authority_for_enforce":true,
#  "trusted_authority_tiers":["trusted_user"]}
PUBLISHED_LAX_POLICY_HASH = "d53f51210e79ab1e6b090acfcbf1135906d8f299e0f2df5c83f86c8642449cfa"


@pytest.fixture
def committed(actions_root, approval_key, approver_principal) -> str:
    txn_id = stage_and_approve(
        [write_op("a.txt", "x", key="a"), write_op("b.txt", "y", key="b", depends_on=["a"])],
        approver_principal,
    )
    services.commit(transaction_id=txn_id, principal=approver_principal)
    return txn_id


def test_policy_hash_known_answer():
    # Given the default policy and a custom one, hashed as literal bytes above
    literal = (
        b'{"require_attested_authority":true,"require_authority_for_enforce":true,'
        b'"trusted_authority_tiers":["trusted_user","user_confirmed"]}'
    )
    assert hashlib.sha256(literal).hexdigest() == PUBLISHED_DEFAULT_POLICY_HASH
    # Then ours hashes to the published digest byte for byte
    assert DEFAULT_POLICY.policy_hash == PUBLISHED_DEFAULT_POLICY_HASH
    lax = GuardPolicy(trusted_tiers=frozenset({"trusted_user"}), require_attested_authority=False)
    assert lax.policy_hash == PUBLISHED_LAX_POLICY_HASH


def test_staged_transactions_record_the_published_policy_hash(committed):
    assert ActionTransaction.objects.get(pk=committed).policy_hash == PUBLISHED_DEFAULT_POLICY_HASH


def test_evidence_rows_carry_their_transaction_id(committed):
    rows = list(ActionEvidence.objects.values_list("transaction_id", "operation__transaction_id"))
    assert rows and all(own == via_op == committed for own, via_op in rows)


def test_published_verifier_query_shape_runs_on_our_database(committed):
    # The published verify_action loads a transaction through ActionStore.get_transaction
    # (aetnamem/actions/store.py): these are its queries, in its shape.
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM action_transactions WHERE id = %s", [committed])
        assert cursor.fetchone() is not None
        cursor.execute(
            "SELECT * FROM action_operations WHERE transaction_id = %s ORDER BY ordinal",
            [committed],
        )
        operation_ids = {row[0] for row in cursor.fetchall()}
        cursor.execute(
            "SELECT operation_id, depends_on_operation_id FROM action_dependencies"
            " WHERE operation_id IN (SELECT id FROM action_operations WHERE transaction_id = %s)"
            " ORDER BY operation_id, depends_on_operation_id",
            [committed],
        )
        assert len(cursor.fetchall()) == 1
        cursor.execute(
            "SELECT * FROM action_evidence WHERE transaction_id = %s ORDER BY id", [committed]
        )
        columns = [column[0] for column in cursor.description]
        evidence = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    assert len(evidence) == 2
    assert {item["operation_id"] for item in evidence} == operation_ids
    assert {"transaction_id", "evidence_kind", "ref_id", "digest", "relation"} <= set(columns)


@pytest.mark.django_db(transaction=True)
def test_migration_fills_transaction_id_for_existing_rows(actions_root, approval_key, request):
    # Given a transaction staged on the schema before the column existed
    from django.db.migrations.executor import MigrationExecutor

    approver = request.getfixturevalue("approver_principal")
    txn_id = stage_and_approve([write_op("a.txt", "x", key="a")], approver)
    executor = MigrationExecutor(connection)
    executor.migrate([("actions", "0001_initial")])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM action_evidence")
            assert cursor.fetchone()[0] == 1
        # When the migration runs
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([("actions", "0002_evidence_transaction_id")])
    finally:
        MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes("actions"))
    # Then the existing row names its operation's transaction
    assert list(ActionEvidence.objects.values_list("transaction_id", flat=True)) == [txn_id]


def _edit_prepared(txn_id: str, *, keep_digest_valid: bool) -> None:
    row = ActionPayload.objects.get(
        transaction_id=txn_id, operation__operation_key="a", kind="prepared"
    )
    payload = json.loads(row.payload)
    payload["arguments"]["content"] = "edited after approval"
    text = canonical_json(payload)
    fields = {"payload": text}
    if keep_digest_valid:
        fields["payload_digest"] = sha256_text(text)
    ActionPayload.objects.filter(pk=row.pk).update(**fields)


def test_untouched_payloads_verify(committed):
    assert verify_action(committed)["failures"] == []


def test_prepared_payload_edited_with_a_fresh_digest_fails(committed):
    # Given a prepared payload rewritten after approval, its own digest updated to match
    _edit_prepared(committed, keep_digest_valid=True)
    op = ActionOperation.objects.get(transaction_id=committed, operation_key="a")
    # Then the verifier names it: it no longer matches the digests the plan hash binds
    assert verify_action(committed)["failures"] == [
        f"action payload {op.id} prepared does not match the digests its plan hash binds"
    ]


def test_prepared_payload_edited_without_its_digest_fails_twice(committed):
    _edit_prepared(committed, keep_digest_valid=False)
    op = ActionOperation.objects.get(transaction_id=committed, operation_key="a")
    assert verify_action(committed)["failures"] == [
        f"action payload {op.id} prepared does not match its stored digest",
        f"action payload {op.id} prepared does not match the digests its plan hash binds",
    ]


def test_execution_receipt_payload_edit_fails(committed):
    row = ActionPayload.objects.filter(transaction_id=committed, kind="execution_receipt").first()
    assert row is not None
    ActionPayload.objects.filter(pk=row.pk).update(payload='{"forged":true}')
    assert verify_action(committed)["failures"] == [
        f"action payload {row.operation_id} execution_receipt does not match its stored digest"
    ]


def test_purged_payloads_are_not_checked(committed, approver_principal):
    services.purge_payloads(transaction_id=committed, principal=approver_principal)
    assert verify_action(committed)["failures"] == []


def test_evidence_transaction_column_is_required():
    # The published table declares transaction_id NOT NULL; so does ours.
    field = ActionEvidence._meta.get_field("transaction")
    assert field.column == "transaction_id" and not field.null
