"""RFC 6962 / RFC 9162 Merkle tree arithmetic: hashes, proof shapes and proof checks.

Pure functions, no database: the append path, the proof selectors, the
tests and (in its own copy) ``tools/verify_audit.py`` share these rules.

Vocabulary: a *range* ``(start, end)`` is the half-open leaf interval
``[start, end)`` whose Merkle Tree Hash (MTH) a proof carries. A *node*
``(level, position)`` is a complete, aligned subtree of ``2**level`` leaves
starting at leaf ``position * 2**level``; those are the only hashes stored,
and every range a proof needs is the fold of at most ``log2(n)`` of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from aetnaweb.errors import DomainError

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
# Leaf bytes are this prefix and the event's hex event_hash: a leaf stands for
# exactly one audit event, and the label keeps it from meaning anything else.
LEAF_DATA_PREFIX = b"aetnaweb-audit-leaf-v1:"
EMPTY_ROOT = hashlib.sha256(b"").digest()
HASH_SIZE = 32


class ProofError(DomainError, ValueError):
    """A proof that does not verify, or arguments no proof can exist for."""

    code = "invalid_proof"
    status = 400
    meaning = "a Merkle proof does not verify or is malformed"


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def event_leaf_data(event_hash: str) -> bytes:
    return LEAF_DATA_PREFIX + event_hash.encode("ascii")


def event_leaf_hash(event_hash: str) -> bytes:
    return leaf_hash(event_leaf_data(event_hash))


def split_point(size: int) -> int:
    """The largest power of two strictly less than ``size`` (RFC 6962 ``k``)."""
    return 1 << ((size - 1).bit_length() - 1)


def root_of_leaves(leaves: Sequence[bytes]) -> bytes:
    """MTH over leaf hashes, by the RFC's recursion (reference for tests and backfill checks)."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = split_point(len(leaves))
    return node_hash(root_of_leaves(leaves[:k]), root_of_leaves(leaves[k:]))


def range_nodes(start: int, end: int) -> list[tuple[int, int]]:
    """The complete aligned subtrees covering ``[start, end)``, left to right.

    Only called for ranges proofs use, whose start is aligned to the largest
    power of two not exceeding their length, so the cover is the binary
    decomposition of the length.
    """
    nodes = []
    position = start
    while position < end:
        level = (end - position).bit_length() - 1
        # Shrink until the subtree is aligned at ``position``.
        while position % (1 << level):
            level -= 1
        nodes.append((level, position >> level))
        position += 1 << level
    return nodes


def fold_range(hashes: Sequence[bytes]) -> bytes:
    """MTH of a range from its ``range_nodes`` hashes: the right edge folds leftwards."""
    if not hashes:
        raise ProofError("an empty range has no hash")
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def frontier_nodes(size: int) -> list[tuple[int, int]]:
    """The subtrees whose fold is the root of a tree of ``size`` leaves."""
    return range_nodes(0, size)


def append_to_frontier(
    frontier: list[bytes], size: int, new_leaf: bytes
) -> tuple[list[bytes], list[tuple[int, int, bytes]]]:
    """Add leaf ``size``: the new frontier, and every node it completes (level, position, hash).

    ``frontier`` holds the hashes of ``frontier_nodes(size)``; the new leaf
    merges with as many of its right-most entries as ``size`` has trailing
    one bits, completing one stored node per merge.
    """
    frontier = list(frontier)
    completed: list[tuple[int, int, bytes]] = [(0, size, new_leaf)]
    current = new_leaf
    level = 0
    index = size
    while index & 1:
        current = node_hash(frontier.pop(), current)
        level += 1
        index >>= 1
        completed.append((level, index, current))
    frontier.append(current)
    return frontier, completed


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The ranges whose hashes form the audit path of leaf ``index`` (RFC 9162 2.1.3.1), leaf first."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    ranges: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        k = split_point(end - start)
        if index < start + k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    ranges.reverse()
    return ranges


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The ranges of the consistency proof from ``old_size`` to ``new_size`` (RFC 9162 2.1.4.1)."""
    if not 0 < old_size <= new_size:
        raise ProofError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size == new_size:
        return []
    ranges: list[tuple[int, int]] = []
    start, end, m, complete = 0, new_size, old_size, True
    while m != end - start:
        k = split_point(end - start)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            m -= k
            start += k
            complete = False
    if not complete:
        ranges.append((start, end))
    ranges.reverse()
    return ranges


def verify_inclusion(
    *, index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """RFC 9162 2.1.3.2; raises :class:`ProofError` unless ``proof`` puts ``leaf`` under ``root``."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is outside a tree of {size} leaves")
    if len(leaf) != HASH_SIZE or len(root) != HASH_SIZE:
        raise ProofError("a leaf hash and a root hash are 32 bytes each")
    fn, sn = index, size - 1
    result = leaf
    for sibling in proof:
        if sn == 0:
            raise ProofError("inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is shorter than the tree is deep")
    if result != root:
        raise ProofError("inclusion proof does not lead to the root hash")


def verify_consistency(
    *, old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 2.1.4.2; raises :class:`ProofError` unless the new tree extends the old one."""
    if old_size < 0 or new_size < 0:
        raise ProofError("tree sizes cannot be negative")
    if old_size > new_size:
        raise ProofError(f"the older tree ({old_size}) is larger than the newer ({new_size})")
    if old_size == 0:
        # Every tree extends the empty one: such a "proof" proves nothing, so it is
        # refused rather than reported as a success (as the RFC 6962 vectors expect).
        raise ProofError("a consistency proof needs an older tree of at least one leaf")
    if old_size == new_size:
        if proof:
            raise ProofError("equal tree sizes need an empty consistency proof")
        if old_root != new_root:
            raise ProofError("equal tree sizes but different root hashes: the log forked")
        return
    if not proof:
        raise ProofError("consistency proof is empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is the first node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for sibling in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof is longer than the trees need")
        if fn & 1 or fn == sn:
            fr = node_hash(sibling, fr)
            sr = node_hash(sibling, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is shorter than the trees need")
    if fr != old_root:
        raise ProofError("consistency proof does not lead to the older root hash")
    if sr != new_root:
        raise ProofError("consistency proof does not lead to the newer root hash")
