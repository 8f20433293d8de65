"""Benchmark: Merkle proofs at scale, and offline receipt verification.

    .venv/bin/python bench/audit_proofs.py [--leaves 1000000] [--samples 2000]

Builds a log of ``--leaves`` leaves in a temporary SQLite database (leaf and
node rows written in bulk, exactly the rows appends would have written), then
appends one real event and issues a deletion receipt for it with a signing
key. Prints p50/p95 of: an inclusion proof, a consistency proof, a receipt's
proof (integrating the waiting events, then ``proof_for_sequence``: what
issuing a receipt costs), and the
standalone tool's offline check of the receipt (inclusion + Ed25519 signature).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_common import ROOT, configure_django


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1000
    p95 = ordered[int(len(ordered) * 0.95) - 1] * 1000
    return f"p50 {p50:.3f} ms, p95 {p95:.3f} ms"


def build(leaves: int) -> None:
    """Write ``leaves`` leaves, their complete subtrees and the frontier, in bulk."""
    from django.db import connection, transaction

    from audit import merkle, tree

    frontier: list[bytes] = []
    leaf_rows: list[tuple[int, int, str]] = []
    node_rows: list[tuple[int, str]] = []
    with transaction.atomic(), connection.cursor() as cursor:
        for index in range(leaves):
            event_hash = hashlib.sha256(index.to_bytes(8, "big")).hexdigest()
            leaf = merkle.event_leaf_hash(event_hash)
            frontier, done = merkle.append_to_frontier(frontier, index, leaf)
            # Sequences below the real events the benchmark appends later (audit_log
            # starts at 1), so integration takes those as the next leaves.
            leaf_rows.append((index, index - leaves, leaf.hex()))
            node_rows.extend((tree.node_id(lv, pos), h.hex()) for lv, pos, h in done[1:])
            if len(leaf_rows) >= 50_000:
                cursor.executemany(
                    "INSERT INTO audit_tree_leaf (leaf_index, sequence, leaf_hash)"
                    " VALUES (%s, %s, %s)",
                    leaf_rows,
                )
                cursor.executemany(
                    "INSERT INTO audit_tree_node (node_id, hash) VALUES (%s, %s)", node_rows
                )
                leaf_rows, node_rows = [], []
        if leaf_rows:
            cursor.executemany(
                "INSERT INTO audit_tree_leaf (leaf_index, sequence, leaf_hash) VALUES (%s, %s, %s)",
                leaf_rows,
            )
        if node_rows:
            cursor.executemany(
                "INSERT INTO audit_tree_node (node_id, hash) VALUES (%s, %s)", node_rows
            )
        cursor.execute(
            "INSERT INTO audit_tree_state (id, size, frontier) VALUES (1, %s, %s)",
            [leaves, "".join(h.hex() for h in frontier)],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-") as tmp:
        directory = Path(tmp)
        configure_django(directory)
        from django.conf import settings
        from django.db import transaction

        from audit import notes, tree
        from audit.receipts import build_deletion_receipt
        from audit.services import append_event

        started = time.perf_counter()
        build(args.leaves)
        print(
            f"Merkle proofs on {args.leaves:,} leaves (SQLite; built in "
            f"{time.perf_counter() - started:.1f} s)"
        )
        size = tree.tree_size()
        rng = random.Random(14)
        timings: list[float] = []
        for _ in range(args.samples):
            index = rng.randrange(size)
            t = time.perf_counter()
            tree.inclusion_proof(index, size)
            timings.append(time.perf_counter() - t)
        print(f"  inclusion proof (leaf of {size:,}):   {percentiles(timings)}")
        timings = []
        for _ in range(args.samples):
            old = rng.randrange(1, size)
            t = time.perf_counter()
            tree.consistency_proof(old, size)
            timings.append(time.perf_counter() - t)
        print(f"  consistency proof (to {size:,}):      {percentiles(timings)}")

        key_path = directory / "checkpoint_key"
        notes.write_private_key(key_path, notes.SignerKey.generate("bench.example/audit"))
        settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(key_path)
        with transaction.atomic():
            event = append_event(
                subject="acme:alice:proj",
                event_type="memory.forget",
                actor="bench",
                payload={"purged_record_ids": ["rec_1"], "purged_episode_ids": []},
            )
            timings = []
            for _ in range(args.samples // 4):
                # What a receipt costs at issue time: integrate the waiting events
                # (here the one just appended, then none), then the proof and root.
                t = time.perf_counter()
                tree.integrate_pending()
                found = tree.proof_for_sequence(event.sequence)
                timings.append(time.perf_counter() - t)
            assert found is not None and found[1] == size + 1
            receipt = build_deletion_receipt(
                event=event,
                selector_sha256="0" * 64,
                purged_record_ids=["rec_1"],
                purged_episode_ids=[],
            )
        print(f"  receipt proof + root (issue time):  {percentiles(timings)}")
        sys.path.insert(0, str(ROOT / "tools"))
        import verify_audit

        key = verify_audit.parse_verifier_key(notes.configured_signer().verifier.text())  # type: ignore[union-attr]
        timings = []
        for _ in range(args.samples // 4):
            t = time.perf_counter()
            failures, verdict = verify_audit.verify_receipt_offline(receipt, key)
            timings.append(time.perf_counter() - t)
        assert not failures and verdict == "verified", (failures, verdict)
        print(
            f"  offline receipt check (tools/verify_audit.py, {len(receipt['log_proof']['inclusion_proof'])}"
            f"-hash proof + Ed25519): {percentiles(timings)}"
        )


if __name__ == "__main__":
    main()
