"""RFC 6962 Merkle arithmetic (audit/merkle.py) against the published known-answer vectors.

The vectors are from transparency-dev/merkle (Apache-2.0), copied with their
LICENSE into tests/vectors/rfc6962/. Leaf hashes are checked against the
RFC 6962 test leaves those vectors were generated from.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit import merkle

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "rfc6962"

# The eight RFC 6962 test leaves (hex) behind the vectors' roots.
TEST_LEAVES = [
    bytes.fromhex(value)
    for value in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
ROOT_OF_8 = "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"


def _b64(value: str) -> bytes:
    return base64.b64decode(value)


def _cases(kind: str) -> list[tuple[str, dict]]:
    files = sorted((VECTORS / kind).rglob("*.json"))
    return [(str(path.relative_to(VECTORS)), json.loads(path.read_text())) for path in files]


INCLUSION = _cases("inclusion")
CONSISTENCY = _cases("consistency")


def test_vectors_and_licence_are_present():
    assert (VECTORS / "LICENSE").is_file()
    assert len(INCLUSION) > 50 and len(CONSISTENCY) > 50


def test_leaf_and_root_known_answers():
    # Given the RFC 6962 test leaves, when hashed, then the empty leaf and the root match
    leaves = [merkle.leaf_hash(data) for data in TEST_LEAVES]
    assert leaves[0].hex() == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    assert merkle.root_of_leaves(leaves).hex() == ROOT_OF_8
    assert merkle.root_of_leaves([]) == merkle.EMPTY_ROOT


def test_vector_leaf_hashes_are_the_test_leaves():
    # Every happy-path inclusion vector's leaf hash is the hash of its RFC test leaf
    leaves = [merkle.leaf_hash(data) for data in TEST_LEAVES]
    checked = 0
    for _, case in INCLUSION:
        if not case["wantErr"] and case["treeSize"] <= 8 and len(_b64(case["leafHash"])) == 32:
            if case["treeSize"] == 1 and case["desc"] == "matching root and leaf":
                continue  # an arbitrary single leaf, not one of the test leaves
            assert _b64(case["leafHash"]) == leaves[case["leafIdx"]], case["desc"]
            assert _b64(case["root"]) == merkle.root_of_leaves(leaves[: case["treeSize"]])
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize(("name", "case"), INCLUSION, ids=[name for name, _ in INCLUSION])
def test_inclusion_vectors(name, case):
    def check():
        merkle.verify_inclusion(
            index=case["leafIdx"],
            size=case["treeSize"],
            leaf=_b64(case["leafHash"]),
            proof=[_b64(item) for item in case["proof"] or []],
            root=_b64(case["root"]),
        )

    if case["wantErr"]:
        with pytest.raises(merkle.ProofError):
            check()
    else:
        check()


@pytest.mark.parametrize(("name", "case"), CONSISTENCY, ids=[name for name, _ in CONSISTENCY])
def test_consistency_vectors(name, case):
    def check():
        merkle.verify_consistency(
            old_size=case["size1"],
            new_size=case["size2"],
            old_root=_b64(case["root1"]),
            new_root=_b64(case["root2"]),
            proof=[_b64(item) for item in case["proof"] or []],
        )

    if case["wantErr"]:
        with pytest.raises(merkle.ProofError):
            check()
    else:
        check()


def _leaves(n: int) -> list[bytes]:
    return [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(n)]


def _stored(leaves: list[bytes]) -> dict[tuple[int, int], bytes]:
    """Every complete aligned subtree, as the append path stores them."""
    nodes: dict[tuple[int, int], bytes] = {}
    frontier: list[bytes] = []
    for size, leaf in enumerate(leaves):
        frontier, completed = merkle.append_to_frontier(frontier, size, leaf)
        nodes.update({(level, position): value for level, position, value in completed})
    return nodes


def _range_hash(nodes, start, end):
    return merkle.fold_range([nodes[node] for node in merkle.range_nodes(start, end)])


@given(st.integers(min_value=1, max_value=70), st.data())
def test_our_proofs_verify_and_match_the_reference(n, data):
    # Given a tree built by appends (stored nodes only)
    leaves = _leaves(n)
    nodes = _stored(leaves)
    size = data.draw(st.integers(min_value=1, max_value=n))
    root = merkle.root_of_leaves(leaves[:size])
    # Then the fold of stored nodes is the reference root of every past size
    assert _range_hash(nodes, 0, size) == root
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    proof = [_range_hash(nodes, a, b) for a, b in merkle.inclusion_ranges(index, size)]
    merkle.verify_inclusion(index=index, size=size, leaf=leaves[index], proof=proof, root=root)
    old = data.draw(st.integers(min_value=1, max_value=size))
    old_root = merkle.root_of_leaves(leaves[:old])
    consistency = [_range_hash(nodes, a, b) for a, b in merkle.consistency_ranges(old, size)]
    merkle.verify_consistency(
        old_size=old, new_size=size, old_root=old_root, new_root=root, proof=consistency
    )
    # And a different leaf or an altered older root is refused
    with pytest.raises(merkle.ProofError):
        merkle.verify_inclusion(
            index=index, size=size, leaf=merkle.leaf_hash(b"other"), proof=proof, root=root
        )
    if old < size:
        with pytest.raises(merkle.ProofError):
            merkle.verify_consistency(
                old_size=old,
                new_size=size,
                old_root=merkle.leaf_hash(b"forged"),
                new_root=root,
                proof=consistency,
            )


def test_frontier_is_the_root_decomposition():
    leaves = _leaves(13)
    frontier: list[bytes] = []
    for size, leaf in enumerate(leaves):
        frontier, _ = merkle.append_to_frontier(frontier, size, leaf)
    assert merkle.fold_range(frontier) == merkle.root_of_leaves(leaves)
    assert merkle.frontier_nodes(13) == [(3, 0), (2, 2), (0, 12)]
