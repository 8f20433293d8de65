#!/usr/bin/env python3
"""Standalone verifier for aetnaweb guarded actions (guarded-actions-v1 V-2).

Standard library only; imports nothing from aetnaweb. It opens the SQLite
database read-only and, for one transaction (or every one with ``--all``):

- recomputes the plan hash from the operations, dependencies and evidence
  tables and compares it with the stored one;
- requires an ``action.proposed`` audit event recording that plan hash;
- checks every approval: it binds the plan hash, its digest recomputes, and
  (with ``--approval-key-file``) its HMAC signature verifies (no time window);
- checks every receipt: its digest recomputes, it names an
  ``action.receipt_issued`` event in the subject's chain with that hash, the
  same content and the same time (``created_at``), it holds no field its
  format does not define, and it agrees with the transaction;
- checks every unpurged payload against its stored digest, and each prepared
  payload against the digests the plan hash binds (an edit after approval);
- checks the subject's audit hash chain;
- requires a receipt for a transaction in a terminal state.

Usage::

    python tools/verify_actions.py DB.sqlite3 act_... [--approval-key-file KEY]
    python tools/verify_actions.py DB.sqlite3 --all [--approval-key-file KEY]

Prints ``OK   <id>`` or ``FAIL <id>`` followed by indented reasons; exits 0
when everything verifies, 1 when anything fails, 2 on a usage error. It checks
recorded structure and signatures; it cannot prove a remote effect happened.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verify_audit  # the sibling standalone tool (standard library only)

WORLD_PATCH_FORMAT = "aetna-world-patch-v1"
APPROVAL_FORMAT = "aetna-action-approval-v1"
TERMINAL_STATES = {
    "committed",
    "aborted",
    "compensated",
    "partial",
    "uncertain",
    "recovery_required",
}
MIN_KEY_BYTES = 32


canonical_json = verify_audit.canonical_json
digest = verify_audit.digest


def open_read_only(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return connection


def chain_valid(connection: sqlite3.Connection, subject_id: str) -> bool:
    """audit-log-v1 chain rule for one subject, by the sibling audit verifier."""
    row_factory = connection.row_factory
    connection.row_factory = None  # verify_audit reads plain tuples
    try:
        return not verify_audit.verify_chain(connection, subject_id)
    finally:
        connection.row_factory = row_factory


def recompute_plan_hash(connection: sqlite3.Connection, txn: sqlite3.Row) -> str:
    operations = connection.execute(
        "SELECT id, operation_key, ordinal, adapter, operation, effect_class, arguments_digest, "
        "preview_digest, precondition_digest, manifest_digest FROM action_operations "
        "WHERE transaction_id = ? ORDER BY ordinal",
        (txn["id"],),
    ).fetchall()
    depends: dict[str, list[str]] = defaultdict(list)
    evidence: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for op in operations:
        for row in connection.execute(
            "SELECT depends_on_operation_id FROM action_dependencies WHERE operation_id = ?",
            (op["id"],),
        ):
            depends[op["id"]].append(row["depends_on_operation_id"])
        for row in connection.execute(
            "SELECT evidence_kind, ref_id, digest, relation, trust_tier, attested "
            "FROM action_evidence WHERE operation_id = ?",
            (op["id"],),
        ):
            evidence[op["id"]].append(
                {
                    "kind": row["evidence_kind"],
                    "ref_id": row["ref_id"],
                    "digest": row["digest"],
                    "relation": row["relation"],
                    "trust_tier": row["trust_tier"],
                    "attested": bool(row["attested"]),
                }
            )
    hashed = [
        {
            "id": op["id"],
            "key": op["operation_key"],
            "ordinal": op["ordinal"],
            "adapter": op["adapter"],
            "operation": op["operation"],
            "effect_class": op["effect_class"],
            "arguments_digest": op["arguments_digest"],
            "preview_digest": op["preview_digest"],
            "precondition_digest": op["precondition_digest"],
            "manifest_digest": op["manifest_digest"],
            "depends_on": sorted(depends[op["id"]]),
            "evidence": sorted(
                evidence[op["id"]],
                key=lambda e: (e["relation"], e["kind"], e["ref_id"], e["digest"]),
            ),
        }
        for op in operations
    ]
    return digest(
        {
            "format": WORLD_PATCH_FORMAT,
            "transaction_id": txn["id"],
            "subject_id": txn["subject_id"],
            "actor_id": txn["actor_id"],
            "mode": txn["mode"],
            "plan_version": txn["plan_version"],
            "policy_hash": txn["policy_hash"],
            "operations": hashed,
        }
    )


def proposed_event_matches(connection: sqlite3.Connection, txn: sqlite3.Row) -> bool:
    for row in connection.execute(
        "SELECT payload FROM audit_log WHERE subject_id = ? AND event_type = 'action.proposed'",
        (txn["subject_id"],),
    ):
        try:
            payload = json.loads(row["payload"])
        except ValueError:
            continue
        if (
            isinstance(payload, dict)
            and payload.get("transaction_id") == txn["id"]
            and payload.get("plan_hash") == txn["plan_hash"]
        ):
            return True
    return False


def payload_failures(connection: sqlite3.Connection, txn: sqlite3.Row) -> list[str]:
    """Each unpurged payload against its stored digest and, when prepared, the plan's digests.

    Commit refuses a prepared payload edited after approval; without this
    check the verifier would still print OK for that database.
    """
    operations = {
        row["id"]: row
        for row in connection.execute(
            "SELECT id, adapter, operation, arguments_digest, preview_digest, precondition_digest"
            " FROM action_operations WHERE transaction_id = ?",
            (txn["id"],),
        )
    }
    failures = []
    for row in connection.execute(
        "SELECT operation_id, kind, payload, payload_digest FROM action_payloads"
        " WHERE transaction_id = ? AND purged_at IS NULL ORDER BY operation_id, kind",
        (txn["id"],),
    ):
        text = row["payload"]
        if hashlib.sha256(str(text).encode("utf-8")).hexdigest() != row["payload_digest"]:
            failures.append(
                f"action payload {row['operation_id']} {row['kind']} does not match its stored digest"
            )
        if row["kind"] != "prepared":
            continue
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        op = operations.get(row["operation_id"])
        matches = False
        if isinstance(payload, dict) and op is not None:
            try:
                matches = (
                    digest(payload.get("arguments")) == op["arguments_digest"]
                    and digest(payload.get("preview")) == op["preview_digest"]
                    and digest(payload.get("preconditions")) == op["precondition_digest"]
                    and payload.get("adapter") == op["adapter"]
                    and payload.get("operation") == op["operation"]
                )
            except ValueError:
                matches = False
        if not matches:
            failures.append(
                f"action payload {row['operation_id']} prepared does not match the digests "
                "its plan hash binds"
            )
    return failures


def approval_failures(
    connection: sqlite3.Connection, txn: sqlite3.Row, key: bytes | None
) -> list[str]:
    failures = []
    for row in connection.execute(
        "SELECT transaction_id, plan_hash, approver_principal, issued_at, expires_at, nonce, "
        "signature, approval_digest FROM action_approvals WHERE transaction_id = ?",
        (txn["id"],),
    ):
        signed = {
            "transaction_id": row["transaction_id"],
            "plan_hash": row["plan_hash"],
            "approver": row["approver_principal"],
            "issued_at": row["issued_at"],
            "expires_at": row["expires_at"],
            "nonce": row["nonce"],
            "format": APPROVAL_FORMAT,
        }
        if row["plan_hash"] != txn["plan_hash"]:
            failures.append("approval does not bind the transaction plan hash")
        if digest({**signed, "signature": row["signature"]}) != row["approval_digest"]:
            failures.append("approval digest is invalid")
        if key is not None:
            expected = hmac.new(key, canonical_json(signed).encode("utf-8"), hashlib.sha256)
            if not hmac.compare_digest(expected.hexdigest(), str(row["signature"])):
                failures.append("approval signature is invalid")
    return failures


def receipt_failures(connection: sqlite3.Connection, txn: sqlite3.Row) -> tuple[list[str], int]:
    failures = []
    rows = connection.execute(
        "SELECT receipt_json FROM action_receipts WHERE transaction_id = ?", (txn["id"],)
    ).fetchall()
    for row in rows:
        try:
            receipt = json.loads(row["receipt_json"])
        except ValueError:
            failures.append("action receipt digest is invalid")
            continue
        if not isinstance(receipt, dict):
            failures.append("action receipt digest is invalid")
            continue
        body = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
        if digest(body) != receipt.get("receipt_sha256"):
            failures.append("action receipt digest is invalid")
            continue
        allowed = verify_audit.RECEIPT_FIELD_SETS[verify_audit.ACTION_RECEIPT_FORMAT]
        extra = sorted(str(name) for name in receipt if name not in allowed)
        if extra:
            failures.append(
                f"action receipt holds fields its format does not define: {', '.join(extra)}"
            )
        event = connection.execute(
            "SELECT event_type, payload, event_hash, created_at FROM audit_log "
            "WHERE event_id = ? AND subject_id = ?",
            (receipt.get("audit_event_id"), txn["subject_id"]),
        ).fetchone()
        if event is None or event["event_hash"] != receipt.get("audit_event_hash"):
            failures.append("action receipt is not bound to its audit event")
        else:
            try:
                payload = json.loads(event["payload"])
            except ValueError:
                payload = {}
            expected = {
                "transaction_id": receipt.get("transaction_id"),
                "plan_hash": receipt.get("plan_hash"),
                "terminal_state": receipt.get("terminal_state"),
                "operations_digest": digest(receipt.get("operation_receipts")),
            }
            if (
                event["event_type"] != "action.receipt_issued"
                or not isinstance(payload, dict)
                or any(payload.get(k) != v for k, v in expected.items())
                or receipt.get("transaction_id") != txn["id"]
            ):
                failures.append("action receipt content does not match its audit event")
            if receipt.get("created_at") != event["created_at"]:
                failures.append("action receipt created_at is not the time of its audit event")
        if receipt.get("plan_hash") != txn["plan_hash"]:
            failures.append("receipt plan hash does not match transaction")
        if receipt.get("terminal_state") != txn["state"]:
            failures.append("action receipt terminal state does not match transaction")
    return failures, len(rows)


def verify_transaction(
    connection: sqlite3.Connection,
    transaction_id: str,
    key: bytes | None = None,
    chains: dict[str, bool] | None = None,
) -> list[str]:
    """Every failure found for one transaction (empty when it verifies).

    ``chains`` caches each subject's chain verdict across calls (``--all``).
    """
    txn = connection.execute(
        "SELECT id, subject_id, actor_id, mode, state, plan_version, plan_hash, policy_hash "
        "FROM action_transactions WHERE id = ?",
        (transaction_id,),
    ).fetchone()
    if txn is None:
        return ["transaction not found"]
    failures = []
    chains = {} if chains is None else chains
    if txn["subject_id"] not in chains:
        chains[txn["subject_id"]] = chain_valid(connection, txn["subject_id"])
    if not chains[txn["subject_id"]]:
        failures.append("subject audit chain is invalid")
    if recompute_plan_hash(connection, txn) != txn["plan_hash"]:
        failures.append("persisted action plan does not match its plan hash")
    if not proposed_event_matches(connection, txn):
        failures.append("no matching action.proposed audit event")
    failures.extend(payload_failures(connection, txn))
    failures.extend(approval_failures(connection, txn, key))
    receipt_problems, receipt_count = receipt_failures(connection, txn)
    failures.extend(receipt_problems)
    if txn["state"] in TERMINAL_STATES and receipt_count == 0:
        failures.append("terminal transaction has no receipt")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Verify aetnaweb guarded actions in a SQLite database (read-only)."
    )
    parser.add_argument("database", help="path to the SQLite database file")
    parser.add_argument("transaction_id", nargs="?", help="the transaction to verify (act_...)")
    parser.add_argument("--all", action="store_true", help="verify every transaction")
    parser.add_argument(
        "--approval-key-file", help="file holding the approval HMAC key (at least 32 bytes)"
    )
    args = parser.parse_args(argv)
    if bool(args.transaction_id) == bool(args.all):
        parser.error("give exactly one of a transaction ID or --all")
    key = None
    if args.approval_key_file:
        try:
            key = Path(args.approval_key_file).read_bytes().strip()
        except OSError as exc:
            parser.error(f"cannot read the approval key file: {exc.strerror or exc}")
        if len(key) < MIN_KEY_BYTES:
            parser.error(f"the approval key must be at least {MIN_KEY_BYTES} bytes")
    database = Path(args.database)
    if not database.is_file():
        parser.error(f"no such database file: {args.database}")
    try:
        connection = open_read_only(database)
    except sqlite3.Error as exc:
        parser.error(f"cannot open the database read-only: {exc}")
    status = 0
    try:
        if args.all:
            ids = [
                row["id"]
                for row in connection.execute(
                    "SELECT id FROM action_transactions ORDER BY created_at, id"
                )
            ]
        else:
            ids = [args.transaction_id]
        chains: dict[str, bool] = {}
        for transaction_id in ids:
            failures = verify_transaction(connection, transaction_id, key, chains)
            if failures:
                status = 1
                print(f"FAIL {transaction_id}")
                for failure in failures:
                    print(f"     - {failure}")
            else:
                print(f"OK   {transaction_id}")
    except sqlite3.DatabaseError as exc:
        print(f"FAIL cannot read the database: {exc}")
        status = 1
    finally:
        connection.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
