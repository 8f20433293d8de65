"""The global Merkle log in the database: append one leaf, read roots and proofs.

Storage (docs/auditors.md "The Merkle log"): ``audit_tree_leaf`` maps each
leaf index to its event's sequence and leaf hash; ``audit_tree_node`` holds
every complete subtree of two or more leaves, written the moment it
completes and never changed; ``audit_tree_state`` holds the size and the
frontier. An append reads one row and writes the leaf, the nodes it
completes (one on average) and the state. A root of any past size, an
inclusion proof or a consistency proof is a fold of O(log n) stored nodes,
fetched with two indexed ``IN`` lookups.

Appends to the tree must serialize (it is one tree): on SQLite the
``BEGIN IMMEDIATE`` write lock does it, on PostgreSQL a transaction-scoped
advisory lock (:func:`lock_tree`) taken before anything else in the append.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

from audit import merkle

# Any fixed value; it only has to differ from every subject key (which are
# SHA-256 prefixes: a collision with this one is not a practical concern).
TREE_LOCK_KEY = 0x6165746E61747265  # "aetnatre"

_STATE_SQL = "SELECT size, frontier FROM audit_tree_state WHERE id = 1"
_LEAF_SQL = "INSERT INTO audit_tree_leaf (leaf_index, sequence, leaf_hash) VALUES (%s, %s, %s)"
_NODE_SQL = "INSERT INTO audit_tree_node (node_id, hash) VALUES (%s, %s)"
# An upsert: a flushed database (test teardown, a fresh install) has no state
# row and an empty tree. A state row deleted while leaves remain cannot pass
# for an empty tree: leaf 0 already exists and the append fails loudly.
_SAVE_STATE_SQL = (
    "INSERT INTO audit_tree_state (id, size, frontier) VALUES (1, %s, %s)"
    " ON CONFLICT (id) DO UPDATE SET size = excluded.size, frontier = excluded.frontier"
)


class TreeError(ValueError):
    """A proof or root asked of sizes or events the log does not hold."""


def node_id(level: int, position: int) -> int:
    return (position << 6) | level


def lock_tree() -> None:
    """Serialize tree appends until the current transaction ends (PostgreSQL; SQLite already is)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [TREE_LOCK_KEY])


def split_frontier(text: str) -> list[bytes]:
    return [bytes.fromhex(text[i : i + 64]) for i in range(0, len(text), 64)]


def append_leaf(cursor: object, *, sequence: int, event_hash: str) -> int:
    """Add the event at ``sequence`` as the next leaf; returns its leaf index.

    ``cursor`` is the caller's open cursor (the append path already holds one).
    The caller holds the tree lock.
    """
    cursor.execute(_STATE_SQL)  # type: ignore[attr-defined]
    row = cursor.fetchone()  # type: ignore[attr-defined]
    size, frontier_text = (int(row[0]), row[1] or "") if row else (0, "")
    leaf = merkle.event_leaf_hash(event_hash)
    frontier, completed = merkle.append_to_frontier(split_frontier(frontier_text), size, leaf)
    cursor.execute(_LEAF_SQL, [size, sequence, leaf.hex()])  # type: ignore[attr-defined]
    nodes = [(node_id(level, position), value.hex()) for level, position, value in completed[1:]]
    if nodes:
        cursor.executemany(_NODE_SQL, nodes)  # type: ignore[attr-defined]
    cursor.execute(  # type: ignore[attr-defined]
        _SAVE_STATE_SQL, [size + 1, "".join(value.hex() for value in frontier)]
    )
    return size


def tree_size() -> int:
    with connection.cursor() as cursor:
        cursor.execute(_STATE_SQL)
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _node_hashes(nodes: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    wanted = set(nodes)
    leaves = sorted(position for level, position in wanted if level == 0)
    inner = sorted(node_id(level, position) for level, position in wanted if level > 0)
    found: dict[tuple[int, int], bytes] = {}
    with connection.cursor() as cursor:
        if leaves:
            marks = ", ".join(["%s"] * len(leaves))
            cursor.execute(
                f"SELECT leaf_index, leaf_hash FROM audit_tree_leaf WHERE leaf_index IN ({marks})",  # noqa: S608  (placeholders only)
                leaves,
            )
            for index, value in cursor.fetchall():
                found[(0, int(index))] = bytes.fromhex(value)
        if inner:
            marks = ", ".join(["%s"] * len(inner))
            cursor.execute(
                f"SELECT node_id, hash FROM audit_tree_node WHERE node_id IN ({marks})",  # noqa: S608  (placeholders only)
                inner,
            )
            for packed, value in cursor.fetchall():
                found[(int(packed) & 63, int(packed) >> 6)] = bytes.fromhex(value)
    missing = wanted - found.keys()
    if missing:
        level, position = min(missing)
        raise TreeError(
            f"the Merkle log lacks node {level}/{position}: the tree tables were altered "
            "or not backfilled ('manage.py audit tree-backfill')"
        )
    return found


def _range_hashes(ranges: list[tuple[int, int]]) -> list[bytes]:
    covers = [merkle.range_nodes(start, end) for start, end in ranges]
    stored = _node_hashes(node for cover in covers for node in cover)
    return [merkle.fold_range([stored[node] for node in cover]) for cover in covers]


def _check_size(size: int) -> None:
    current = tree_size()
    if not 0 <= size <= current:
        raise TreeError(f"the Merkle log has {current} leaves, not {size}")


def root_at(size: int) -> bytes:
    """The root hash of the tree's first ``size`` leaves (any past size)."""
    _check_size(size)
    if size == 0:
        return merkle.EMPTY_ROOT
    return _range_hashes([(0, size)])[0]


def leaf_for_sequence(sequence: int) -> tuple[int, bytes] | None:
    """(leaf index, leaf hash) of the event at ``sequence``, or ``None`` when it is not a leaf."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT leaf_index, leaf_hash FROM audit_tree_leaf WHERE sequence = %s", [sequence]
        )
        row = cursor.fetchone()
    return (int(row[0]), bytes.fromhex(row[1])) if row else None


def inclusion_proof(leaf_index: int, size: int) -> list[bytes]:
    """The audit path of ``leaf_index`` in the tree of ``size`` leaves."""
    _check_size(size)
    try:
        ranges = merkle.inclusion_ranges(leaf_index, size)
    except merkle.ProofError as exc:
        raise TreeError(str(exc)) from exc
    return _range_hashes(ranges)


def consistency_proof(old_size: int, new_size: int) -> list[bytes]:
    """The proof that the tree of ``new_size`` leaves extends the one of ``old_size``."""
    _check_size(new_size)
    try:
        ranges = merkle.consistency_ranges(old_size, new_size)
    except merkle.ProofError as exc:
        raise TreeError(str(exc)) from exc
    return _range_hashes(ranges)


def rebuild_missing_leaves(batch: int = 5000) -> int:
    """Append every ``audit_log`` event that is not yet a leaf, in sequence order.

    For databases that predate the log (the migration calls this) and after a
    restore; returns how many leaves were added. Callers hold the tree lock
    inside a transaction.
    """
    added = 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(sequence), 0) FROM audit_tree_leaf")
        last = int(cursor.fetchone()[0])
        while True:
            cursor.execute(
                "SELECT sequence, event_hash FROM audit_log WHERE sequence > %s"
                " ORDER BY sequence LIMIT %s",
                [last, batch],
            )
            rows = cursor.fetchall()
            if not rows:
                return added
            for sequence, event_hash in rows:
                append_leaf(cursor, sequence=int(sequence), event_hash=event_hash)
                last = int(sequence)
                added += 1
