"""Item 5: the services return frozen, typed results whose ``as_dict()`` is the JSON emitted before.

The API, the MCP tools and ``manage.py actions`` serialise these; the keys and
their order are pinned here so a field added or moved fails a test.
"""

from __future__ import annotations

import dataclasses

import pytest

from actions import services
from actions.models import ActionTransaction
from actions.services import Outcome, TransactionState, WorldPatch
from aetnaweb.access import SYSTEM
from tests.actions.conftest import SCOPE, write_op

TRANSACTION_KEYS = [
    "transaction_id",
    "subject_id",
    "actor_id",
    "mode",
    "state",
    "plan_version",
    "plan_hash",
    "policy_hash",
    "session_id",
    "turn_id",
    "error_code",
    "error_digest",
    "created_at",
    "updated_at",
    "terminal_at",
]


@pytest.mark.django_db
def test_a_transaction_state_is_the_model_s_dict_in_the_same_order(actions_root):
    # Given a staged plan
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")])
    # When its state is read as the services report it
    state = TransactionState.load(patch.transaction_id)
    # Then the JSON is exactly the model's, key for key and in order
    row = ActionTransaction.objects.get(pk=patch.transaction_id)
    assert list(state.as_dict().items()) == list(row.as_dict().items())
    assert list(state.as_dict()) == TRANSACTION_KEYS


@pytest.mark.django_db
def test_an_outcome_carries_the_receipt_document_unchanged(actions_root):
    # Given a plan aborted by the trusted caller
    txn_id = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")]
    ).transaction_id
    result = services.abort(transaction_id=txn_id, principal=SYSTEM)
    # Then the outcome is typed, and its JSON is {transaction, receipt} as before
    assert isinstance(result, Outcome)
    assert result.transaction.state == "aborted"
    assert list(result.as_dict()) == ["transaction", "receipt"]
    assert result.as_dict()["transaction"] == result.transaction.as_dict()
    # And the receipt is the stored spec document itself (R-1: its own keys and order)
    stored = result.receipt
    assert stored["terminal_state"] == "aborted"
    assert list(stored)[:2] == ["format", "transaction_id"]
    assert list(stored)[-1] == "receipt_sha256"


@pytest.mark.django_db
def test_results_are_frozen(actions_root):
    # Given a WorldPatch
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "x")])
    assert isinstance(patch, WorldPatch)
    # When a caller tries to change it, Then it is refused
    with pytest.raises(dataclasses.FrozenInstanceError):
        patch.state = "approved"  # type: ignore[misc]


def test_every_result_type_is_exported_and_frozen():
    # Given the result types the package re-exports
    names = [
        "ImportedTransaction",
        "JournalImport",
        "Outcome",
        "PurgeResult",
        "RecoveryOutcome",
        "Resolution",
        "TransactionState",
        "VerificationReport",
        "WorldPatch",
    ]
    for name in names:
        # Then each is listed in __all__ and is a frozen, slotted dataclass with as_dict()
        assert name in services.__all__
        kind = getattr(services, name)
        assert kind.__dataclass_params__.frozen, name
        assert "__slots__" in vars(kind), name
        assert "as_dict" in vars(kind), name
