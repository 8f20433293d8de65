"""The global Merkle log in the database: integrate leaves, read roots and proofs.

Storage (docs/auditors.md "The Merkle log"): ``audit_tree_leaf`` maps each
leaf index to its event's sequence and leaf hash; ``audit_tree_node`` holds
every complete subtree of two or more leaves, written the moment it
completes and never changed; ``audit_tree_state`` holds the size and the
frontier. Leaf *i* is the *i*-th event of ``audit_log`` by sequence, so an
append records only its event row (the leaf is implied by it); the leaves
and nodes are written in batches by :func:`integrate_pending`, every
:data:`INTEGRATE_EVERY` events and before a checkpoint or a receipt's proof
is produced, as a Certificate Transparency log's sequencer does. A root of
any integrated size, an inclusion proof or a consistency proof is a fold of
O(log n) stored nodes, fetched with two indexed ``IN`` lookups.

Appends must serialize on one lock for sequence order to be final when a
batch is integrated: on SQLite the ``BEGIN IMMEDIATE`` write lock does it,
on PostgreSQL a transaction-scoped advisory lock (:func:`lock_tree`) taken
before anything else in the append.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction

from aetnaweb.errors import DomainError
from aetnaweb.sql import insert_rows
from audit import merkle

# Any fixed value; it only has to differ from every subject key (which are
# SHA-256 prefixes: a collision with this one is not a practical concern).
TREE_LOCK_KEY = 0x6165746E61747265  # "aetnatre"

# How many events may wait before an append integrates them. Each commit that
# writes tree rows dirties several more pages (the leaf table, its sequence
# index, the node table, the state row); writing them once per batch is what
# keeps an append nearly as cheap as a chain-only one (bench/audit_append.py).
# The bound also caps the work a receipt or a checkpoint does to catch up.
INTEGRATE_EVERY = 64

_STATE_SQL = "SELECT size, frontier FROM audit_tree_state WHERE id = 1"
_LEAF_COLUMNS = ("leaf_index", "sequence", "leaf_hash")
_NODE_COLUMNS = ("node_id", "hash")
# An upsert: a flushed database (test teardown, a fresh install) has no state
# row and an empty tree. A state row deleted while leaves remain cannot pass
# for an empty tree: leaf 0 already exists and the append fails loudly.
_SAVE_STATE_SQL = (
    "INSERT INTO audit_tree_state (id, size, frontier) VALUES (1, %s, %s)"
    " ON CONFLICT (id) DO UPDATE SET size = excluded.size, frontier = excluded.frontier"
)


class TreeError(DomainError, ValueError):
    """A proof or root asked of sizes or events the log does not hold."""

    code = "tree_out_of_range"
    status = 400
    meaning = "a proof or root asked of sizes or events the Merkle log does not hold"


def node_id(level: int, position: int) -> int:
    return (position << 6) | level


def lock_tree() -> None:
    """Serialize tree appends until the current transaction ends (PostgreSQL; SQLite already is)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [TREE_LOCK_KEY])


def split_frontier(text: str) -> list[bytes]:
    return [bytes.fromhex(text[i : i + 64]) for i in range(0, len(text), 64)]


def _extend(
    frontier: list[bytes], size: int, events: Iterable[tuple[int, str]]
) -> tuple[list[tuple[int, int, str]], list[tuple[int, str]], list[bytes]]:
    """(leaf rows, node rows, new frontier) for ``events`` appended after ``size`` leaves."""
    leaves: list[tuple[int, int, str]] = []
    nodes: list[tuple[int, str]] = []
    for offset, (sequence, event_hash) in enumerate(events):
        leaf = merkle.event_leaf_hash(str(event_hash))
        frontier, completed = merkle.append_to_frontier(frontier, size + offset, leaf)
        leaves.append((size + offset, int(sequence), leaf.hex()))
        nodes.extend(
            (node_id(level, position), value.hex()) for level, position, value in completed[1:]
        )
    return leaves, nodes, frontier


def _write_batch(
    cursor: object,
    leaves: list[tuple[int, int, str]],
    nodes: list[tuple[int, str]],
    size: int,
    frontier: list[bytes],
) -> None:
    # Multi-row INSERTs (executemany costs a round trip per row on
    # PostgreSQL: 64 leaves and ~64 nodes a batch), and the state once.
    insert_rows(cursor, "audit_tree_leaf", _LEAF_COLUMNS, leaves)
    insert_rows(cursor, "audit_tree_node", _NODE_COLUMNS, nodes)
    cursor.execute(_SAVE_STATE_SQL, [size, "".join(value.hex() for value in frontier)])  # type: ignore[attr-defined]


def integrate_pending(cursor: object | None = None, *, batch: int = 5000) -> int:
    """Make every ``audit_log`` event that is not yet a leaf the next leaf, in sequence order.

    The sequencer (docs/auditors.md "Storage"): appends record only the event
    row; its leaf and the nodes it completes are written here, in bulk, every
    :data:`INTEGRATE_EVERY` events by the append path and on demand before a
    checkpoint or a receipt's proof. Also the backfill for a database that
    predates the log, and after a restore. Returns how many leaves were added.
    The caller holds the tree lock inside a transaction: every event with a
    lower sequence has then committed (appends hold the same lock), so
    sequence order is final.
    """
    if cursor is None:
        with connection.cursor() as own:
            return integrate_pending(own, batch=batch)
    cursor.execute(  # type: ignore[attr-defined]
        "SELECT (SELECT size FROM audit_tree_state WHERE id = 1),"
        " (SELECT frontier FROM audit_tree_state WHERE id = 1),"
        " (SELECT MAX(sequence) FROM audit_tree_leaf)"
    )
    size, frontier_text, last = cursor.fetchone()  # type: ignore[attr-defined]
    size, frontier = int(size or 0), split_frontier(frontier_text or "")
    last = -1 if last is None else int(last)
    added = 0
    while True:
        cursor.execute(  # type: ignore[attr-defined]
            "SELECT sequence, event_hash FROM audit_log WHERE sequence > %s"
            " ORDER BY sequence LIMIT %s",
            [last, batch],
        )
        rows = cursor.fetchall()  # type: ignore[attr-defined]
        if rows:
            leaves, nodes, frontier = _extend(frontier, size, rows)
            size += len(leaves)
            _write_batch(cursor, leaves, nodes, size, frontier)
            last = leaves[-1][1]
            added += len(leaves)
        if len(rows) < batch:
            return added


def integrate() -> int:
    """Integrate the pending events now, in a transaction of its own holding the tree lock."""
    with transaction.atomic():
        lock_tree()
        return integrate_pending()


def after_append(cursor: object, *, sequence: int, last_leaf_sequence: int | None) -> int:
    """The append path's share of the log: integrate once :data:`INTEGRATE_EVERY` events wait.

    ``last_leaf_sequence`` is the sequence of the newest leaf, read with the
    chain head (or, while the tree is empty, one below the oldest event's), so
    the test costs no query. Returns how many leaves were added (usually none).
    """
    waiting = sequence - last_leaf_sequence if last_leaf_sequence is not None else 1
    if waiting < INTEGRATE_EVERY:
        return 0
    return integrate_pending(cursor)


def tree_size() -> int:
    with connection.cursor() as cursor:
        cursor.execute(_STATE_SQL)
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _node_hashes(nodes: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """The stored hashes of ``nodes`` (leaves and inner nodes) in one query."""
    wanted = set(nodes)
    leaves = sorted(position for level, position in wanted if level == 0)
    inner = sorted(node_id(level, position) for level, position in wanted if level > 0)
    parts, params = [], []
    if leaves:
        parts.append(
            "SELECT leaf_index * 64, leaf_hash FROM audit_tree_leaf"  # noqa: S608  (placeholders only)
            f" WHERE leaf_index IN ({', '.join(['%s'] * len(leaves))})"
        )
        params.extend(leaves)
    if inner:
        parts.append(
            "SELECT node_id, hash FROM audit_tree_node"  # noqa: S608  (placeholders only)
            f" WHERE node_id IN ({', '.join(['%s'] * len(inner))})"
        )
        params.extend(inner)
    found: dict[tuple[int, int], bytes] = {}
    if parts:
        with connection.cursor() as cursor:
            cursor.execute(" UNION ALL ".join(parts), params)
            for packed, value in cursor.fetchall():
                found[(int(packed) & 63, int(packed) >> 6)] = bytes.fromhex(value)
    missing = wanted - found.keys()
    if missing:
        level, position = min(missing)
        raise TreeError(
            f"the Merkle log lacks node {level}/{position}: the tree tables were altered "
            "or not backfilled"
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


def proof_for_sequence(sequence: int) -> tuple[int, int, bytes, list[bytes]] | None:
    """(leaf index, tree size, root, inclusion proof) for the event at ``sequence`` now.

    Two queries whatever the size: the leaf with the state, then every node
    the root and the audit path need.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT l.leaf_index, s.size FROM audit_tree_leaf l, audit_tree_state s"
            " WHERE l.sequence = %s AND s.id = 1",
            [sequence],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    index, size = int(row[0]), int(row[1])
    path_ranges = merkle.inclusion_ranges(index, size)
    covers = [merkle.range_nodes(start, end) for start, end in [(0, size), *path_ranges]]
    stored = _node_hashes(node for cover in covers for node in cover)
    hashes = [merkle.fold_range([stored[node] for node in cover]) for cover in covers]
    return index, size, hashes[0], hashes[1:]


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


def consistency_proofs(
    pairs: Iterable[tuple[int, int]],
) -> dict[tuple[int, int], list[bytes] | str]:
    """Consistency proofs for many (old, new) size pairs in two queries (for a page of them).

    A pair that cannot be proven maps to the reason, as a string.
    """
    current = tree_size()
    ranges: dict[tuple[int, int], list[tuple[int, int]] | str] = {}
    for old, new in pairs:
        if new > current:
            ranges[(old, new)] = f"the log has {current} leaves, not {new}"
            continue
        try:
            ranges[(old, new)] = merkle.consistency_ranges(old, new)
        except merkle.ProofError as exc:
            ranges[(old, new)] = str(exc)
    covers = {
        pair: [merkle.range_nodes(a, b) for a, b in value]
        for pair, value in ranges.items()
        if not isinstance(value, str)
    }
    stored = _node_hashes(node for cover in covers.values() for c in cover for node in c)
    result: dict[tuple[int, int], list[bytes] | str] = {
        pair: value for pair, value in ranges.items() if isinstance(value, str)
    }
    for pair, cover in covers.items():
        result[pair] = [merkle.fold_range([stored[node] for node in c]) for c in cover]
    return result


def events_root(size: int, batch: int = 5000) -> bytes | None:
    """The root over the first ``size`` events of ``audit_log`` in sequence order.

    Leaf order is sequence order (appends serialize on the tree lock before
    the row gets its sequence), so this root stands on ``audit_log`` alone,
    as ``tools/verify_audit.py`` computes it. ``None`` when there are fewer
    than ``size`` events.
    """
    frontier: list[bytes] = []
    count, after = 0, -1
    with connection.cursor() as cursor:
        while count < size:
            cursor.execute(
                "SELECT sequence, event_hash FROM audit_log WHERE sequence > %s"
                " ORDER BY sequence LIMIT %s",
                [after, min(batch, size - count)],
            )
            rows = cursor.fetchall()
            if not rows:
                return None
            for sequence, event_hash in rows:
                leaf = merkle.event_leaf_hash(str(event_hash))
                frontier, _ = merkle.append_to_frontier(frontier, count, leaf)
                count += 1
                after = int(sequence)
    return merkle.fold_range(frontier) if frontier else merkle.EMPTY_ROOT


def scan_leaves(size: int, batch: int = 5000) -> tuple[list[str], bytes]:
    """(failures, root) from the first ``size`` leaves, each recomputed from its event.

    Every leaf must name an existing event and hash that event's stored
    ``event_hash``; the root is folded from the leaves themselves, not the
    stored nodes, so it stands on ``audit_log`` alone. O(size).
    """
    failures: list[str] = []
    frontier: list[bytes] = []
    expected = 0
    with connection.cursor() as cursor:
        while expected < size:
            cursor.execute(
                "SELECT l.leaf_index, l.sequence, l.leaf_hash, a.event_hash"
                " FROM audit_tree_leaf l LEFT JOIN audit_log a ON a.sequence = l.sequence"
                " WHERE l.leaf_index >= %s AND l.leaf_index < %s ORDER BY l.leaf_index",
                [expected, min(size, expected + batch)],
            )
            rows = cursor.fetchall()
            if not rows:
                break
            for index, sequence, stored, event_hash in rows:
                if int(index) != expected:
                    failures.append(f"log leaf {expected} is missing")
                    return failures, b""
                if event_hash is None:
                    failures.append(f"log leaf {index} names event #{sequence}, which is missing")
                    leaf = bytes.fromhex(stored)
                else:
                    leaf = merkle.event_leaf_hash(event_hash)
                    if leaf.hex() != stored:
                        failures.append(
                            f"log leaf {index} does not hash event #{sequence}'s event_hash"
                        )
                frontier, _ = merkle.append_to_frontier(frontier, expected, leaf)
                expected += 1
    if expected < size:
        failures.append(f"log leaf {expected} is missing")
        return failures, b""
    root = merkle.fold_range(frontier) if frontier else merkle.EMPTY_ROOT
    return failures, root


def _node_mismatches(expected: dict[int, str]) -> list[str]:
    """Stored inner nodes that are missing or differ from ``expected`` (node_id -> hex)."""
    if not expected:
        return []
    ids = sorted(expected)
    marks = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT node_id, hash FROM audit_tree_node WHERE node_id IN ({marks})",  # noqa: S608  (placeholders only)
            ids,
        )
        stored = {int(packed): value for packed, value in cursor.fetchall()}
    return [
        f"stored Merkle node {packed & 63}/{packed >> 6} is "
        f"{'missing' if packed not in stored else 'not the hash of its children'}"
        for packed in ids
        if stored.get(packed) != expected[packed]
    ]


def verify_log(batch: int = 2000) -> list[str]:
    """The stored tree against ``audit_log``: every leaf hashes its event, every node its children.

    Empty when the log holds. O(n); ``manage.py audit verify`` runs it.
    """
    size = tree_size()
    failures: list[str] = []
    frontier: list[bytes] = []
    expected = 0
    with connection.cursor() as cursor:
        while expected < size and len(failures) < 20:
            cursor.execute(
                "SELECT l.leaf_index, l.sequence, l.leaf_hash, a.event_hash"
                " FROM audit_tree_leaf l LEFT JOIN audit_log a ON a.sequence = l.sequence"
                " WHERE l.leaf_index >= %s AND l.leaf_index < %s ORDER BY l.leaf_index",
                [expected, min(size, expected + batch)],
            )
            rows = cursor.fetchall()
            if not rows:
                break
            inner: dict[int, str] = {}
            for index, sequence, stored, event_hash in rows:
                if int(index) != expected:
                    return [*failures, f"log leaf {expected} is missing"]
                if event_hash is None:
                    failures.append(f"log leaf {index} names event #{sequence}, which is missing")
                elif merkle.event_leaf_hash(event_hash).hex() != stored:
                    failures.append(
                        f"log leaf {index} does not hash event #{sequence}'s event_hash"
                    )
                # The nodes are recomputed from the stored leaves: a bad leaf is named
                # above, a node that does not hash its children is named here.
                frontier, done = merkle.append_to_frontier(
                    frontier, expected, bytes.fromhex(stored)
                )
                inner.update({node_id(lv, pos): value.hex() for lv, pos, value in done[1:]})
                expected += 1
            failures.extend(_node_mismatches(inner))
    if expected < size and len(failures) < 20:
        failures.append(f"log leaf {expected} is missing")
    leaves, events = _counts()
    if leaves != size:
        failures.append(f"the log's state says {size} leaves but {leaves} are stored")
    if events != size:
        failures.append(f"audit_log holds {events} events up to the log's newest leaf, not {size}")
    return failures[:20]


def _counts() -> tuple[int, int]:
    """(stored leaves, events up to the newest leaf's sequence).

    Events after the newest leaf are waiting for the next batch
    (:func:`pending_count`), not missing from the log.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT COUNT(*) FROM audit_tree_leaf),"
            " (SELECT COUNT(*) FROM audit_log WHERE sequence <="
            " (SELECT COALESCE(MAX(sequence), 0) FROM audit_tree_leaf))"
        )
        leaves, events = cursor.fetchone()
    return int(leaves), int(events)


def pending_count() -> int:
    """Events committed after the newest leaf: the next batch (at most about INTEGRATE_EVERY)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM audit_log WHERE sequence >"
            " (SELECT COALESCE(MAX(sequence), 0) FROM audit_tree_leaf)"
        )
        return int(cursor.fetchone()[0])
