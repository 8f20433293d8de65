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


def append_leaf(
    cursor: object, *, sequence: int, event_hash: str, state: tuple[int, str] | None = None
) -> int:
    """Add the event at ``sequence`` as the next leaf; returns its leaf index.

    ``cursor`` is the caller's open cursor (the append path already holds one).
    The caller holds the tree lock. ``state`` is (size, frontier) when the
    caller already read it in the same transaction (the append path reads it
    with the chain head, saving a round trip on every event).
    """
    if state is None:
        cursor.execute(_STATE_SQL)  # type: ignore[attr-defined]
        row = cursor.fetchone()  # type: ignore[attr-defined]
        state = (int(row[0]), row[1] or "") if row else (0, "")
    size, frontier_text = state
    leaf = merkle.event_leaf_hash(event_hash)
    frontier, completed = merkle.append_to_frontier(split_frontier(frontier_text), size, leaf)
    cursor.execute(_LEAF_SQL, [size, sequence, leaf.hex()])  # type: ignore[attr-defined]
    nodes = completed[1:]
    if nodes:
        # One statement for all the nodes this leaf completes.
        values = ", ".join(["(%s, %s)"] * len(nodes))
        params: list[object] = []
        for level, position, value in nodes:
            params.extend((node_id(level, position), value.hex()))
        cursor.execute(f"INSERT INTO audit_tree_node (node_id, hash) VALUES {values}", params)  # type: ignore[attr-defined]  # noqa: S608  (placeholders only)
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
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM audit_tree_leaf")
        leaves = int(cursor.fetchone()[0])
        cursor.execute("SELECT COUNT(*) FROM audit_log")
        events = int(cursor.fetchone()[0])
    if leaves != size:
        failures.append(f"the log's state says {size} leaves but {leaves} are stored")
    if events != size:
        failures.append(f"audit_log holds {events} events but the log {size} leaves")
    return failures[:20]
