"""The Merkle log in the database (audit/tree.py): one leaf per event, proofs from stored nodes.

Appends record the event row only; the leaves and nodes are integrated in
batches (every ``tree.INTEGRATE_EVERY`` events, and on demand before a
checkpoint or a receipt's proof). ``tree.integrate()`` is that on demand.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from aetnaweb import sql
from audit import merkle, tree
from audit.errors import AuditError
from audit.models import AuditEvent, AuditTreeLeaf, AuditTreeNode, AuditTreeState
from audit.services import append_event
from tests.audit.conftest import append

pytestmark = pytest.mark.django_db


def _reference_leaves() -> list[bytes]:
    return [
        merkle.event_leaf_hash(h)
        for h in AuditEvent.objects.order_by("sequence").values_list("event_hash", flat=True)
    ]


def test_each_event_becomes_the_next_leaf_when_integrated():
    # Given events across three subjects, integrated
    events = [append(f"acme:user{i % 3}:proj", payload={"n": i}) for i in range(11)]
    assert tree.integrate() == 11
    # Then leaf i is event i, and its hash binds the event_hash
    leaves = list(AuditTreeLeaf.objects.order_by("leaf_index"))
    assert [leaf.sequence for leaf in leaves] == [e.sequence for e in events]
    assert [leaf.leaf_hash for leaf in leaves] == [
        merkle.leaf_hash(b"aetnaweb-audit-leaf-v1:" + e.event_hash.encode()).hex() for e in events
    ]
    # And the stored root of every past size is the RFC root of that prefix
    reference = _reference_leaves()
    assert tree.tree_size() == 11
    for size in range(12):
        assert tree.root_at(size) == merkle.root_of_leaves(reference[:size])
    # Complete subtrees of 2+ leaves only: 5 + 2 + 1 for 11 leaves
    assert AuditTreeNode.objects.count() == 8


def test_proofs_from_the_database_verify():
    for i in range(21):
        append("acme:alice:proj", payload={"n": i})
    tree.integrate()
    reference = _reference_leaves()
    for size in (1, 2, 7, 16, 21):
        root = tree.root_at(size)
        for index in range(size):
            merkle.verify_inclusion(
                index=index,
                size=size,
                leaf=reference[index],
                proof=tree.inclusion_proof(index, size),
                root=root,
            )
        for old in range(1, size + 1):
            merkle.verify_consistency(
                old_size=old,
                new_size=size,
                old_root=tree.root_at(old),
                new_root=root,
                proof=tree.consistency_proof(old, size),
            )


def test_proof_reads_are_logarithmic(django_assert_max_num_queries):
    for i in range(40):
        append("acme:alice:proj", payload={"n": i})
    tree.integrate()
    # size check + leaves + nodes
    with django_assert_max_num_queries(3):
        tree.inclusion_proof(17, 40)
    with django_assert_max_num_queries(3):
        tree.consistency_proof(13, 40)


def test_proofs_beyond_the_tree_are_refused():
    append("acme:alice:proj", payload={})
    tree.integrate()
    with pytest.raises(tree.TreeError, match="has 1 leaves, not 2"):
        tree.root_at(2)
    with pytest.raises(tree.TreeError):
        tree.inclusion_proof(1, 1)
    with pytest.raises(tree.TreeError):
        tree.consistency_proof(0, 1)


def test_an_append_integrates_the_batch_once_enough_events_wait(monkeypatch):
    # Given a batch size of 4
    monkeypatch.setattr(tree, "INTEGRATE_EVERY", 4)
    # When three events are appended, they wait: no leaf, no node, no state written
    events = [append("acme:alice:proj", payload={"n": i}) for i in range(3)]
    assert AuditTreeLeaf.objects.count() == 0 and tree.tree_size() == 0
    assert tree.pending_count() == 3
    # When the fourth is appended, its own transaction integrates all four
    events.append(append("acme:*:*", payload={"n": 3}))
    assert list(AuditTreeLeaf.objects.values_list("sequence", flat=True)) == [
        e.sequence for e in events
    ]
    assert tree.tree_size() == 4 and tree.pending_count() == 0
    assert tree.root_at(4) == merkle.root_of_leaves(_reference_leaves())
    # And the next batch counts from the newest leaf
    for i in range(3):
        append("acme:alice:proj", payload={"m": i})
    assert tree.tree_size() == 4
    append("acme:alice:proj", payload={"m": 3})
    assert tree.tree_size() == 8 and tree.root_at(8) == merkle.root_of_leaves(_reference_leaves())


def test_a_refused_append_adds_no_leaf(monkeypatch):
    monkeypatch.setattr(tree, "INTEGRATE_EVERY", 1)  # every append integrates
    append("acme:alice:proj", payload={})
    with pytest.raises(AuditError), transaction.atomic():
        append_event(subject="acme:alice:proj", event_type="bad", actor="a", payload={})
    assert AuditTreeLeaf.objects.count() == 1 and tree.tree_size() == 1


def test_a_rolled_back_append_leaves_the_tree_unchanged(monkeypatch):
    monkeypatch.setattr(tree, "INTEGRATE_EVERY", 1)  # every append integrates
    append("acme:alice:proj", payload={})
    before = tree.root_at(1)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        append_event(subject="acme:alice:proj", event_type="x.y", actor="a", payload={})
        assert tree.tree_size() == 2  # integrated inside the transaction...
        raise Boom
    # ...and rolled back with it
    assert tree.tree_size() == 1 and tree.root_at(1) == before
    assert AuditTreeLeaf.objects.count() == 1 and tree.pending_count() == 0
    append("acme:alice:proj", payload={})
    assert tree.root_at(2) == merkle.root_of_leaves(_reference_leaves())


def test_integration_backfills_events_that_predate_the_log():
    # Given events whose leaves are gone (a database from before the log)
    for i in range(9):
        append("acme:alice:proj", payload={"n": i})
    tree.integrate()
    AuditTreeLeaf.objects.all().delete()
    AuditTreeNode.objects.all().delete()
    AuditTreeState.objects.all().delete()
    # When the backfill runs, in batches smaller than the log
    with transaction.atomic():
        tree.lock_tree()
        assert tree.integrate_pending(batch=4) == 9
    # Then the tree is what integration had built, and appends continue on it
    assert tree.root_at(9) == merkle.root_of_leaves(_reference_leaves())
    append("acme:alice:proj", payload={})
    assert tree.integrate() == 1
    assert tree.root_at(10) == merkle.root_of_leaves(_reference_leaves())


def test_a_batch_larger_than_one_insert_is_written_in_several(monkeypatch):
    # Given more pending leaves (and nodes) than one multi-row INSERT takes
    monkeypatch.setattr(sql, "ROWS_PER_INSERT", 3)
    for i in range(10):
        append("acme:alice:proj", payload={"n": i})
    # When they are integrated in one batch
    assert tree.integrate() == 10
    # Then every leaf and node is there, and every root is the reference one
    assert AuditTreeLeaf.objects.count() == 10
    assert AuditTreeNode.objects.count() == 5 + 2 + 1
    reference = _reference_leaves()
    for size in range(11):
        assert tree.root_at(size) == merkle.root_of_leaves(reference[:size])


def test_a_deleted_state_row_cannot_restart_the_tree():
    append("acme:alice:proj", payload={})
    tree.integrate()
    AuditTreeState.objects.all().delete()
    append("acme:alice:proj", payload={})
    # The leaf PK clash (an IntegrityError) refuses the integration.
    with pytest.raises(IntegrityError):
        tree.integrate()
    assert AuditTreeLeaf.objects.count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="advisory locks are PostgreSQL's")
def test_append_takes_the_tree_lock_on_postgresql():
    with transaction.atomic():
        append_event(subject="acme:alice:proj", event_type="x.y", actor="a", payload={})
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
                " AND ((classid::bigint << 32) | objid::bigint) = %s",
                [tree.TREE_LOCK_KEY & 0xFFFFFFFFFFFFFFFF],
            )
            assert cursor.fetchone()[0] == 1
