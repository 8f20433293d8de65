"""Import an external transaction journal as unverified, digest-only evidence (A16)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from django.db import transaction as db_transaction

from actions.errors import (
    JournalError,
    JournalNotFound,
)
from actions.services._ledger import (
    _actor_label,
)
from actions.services.results import ImportedTransaction, JournalImport
from aetnaweb import access
from aetnaweb.access import Principal
from audit.canonical import digest
from audit.models import AuditEvent
from audit.services import append_event

JOURNAL_TRANSACTION_COLUMNS = frozenset(
    {"txn_id", "state", "created_at", "updated_at", "replayed_from", "dry_run", "client_id"}
)
JOURNAL_EFFECT_COLUMNS = frozenset(
    {
        "txn_id",
        "idx",
        "effect_id",
        "tool",
        "resource",
        "reversible",
        "status",
        "args",
        "snapshot",
        "result",
        "read_keys",
        "write_keys",
        "actor",
        "ts",
    }
)


def _json_digest(raw: Any) -> Any:
    """IJ-4: parse JSON text first; invalid JSON becomes ``{invalid_json_digest}``; null stays null."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return digest(raw)
    try:
        return digest(json.loads(raw))
    except ValueError:
        return {"invalid_json_digest": digest(raw)}


def _optional_digest(value: Any) -> str | None:
    return None if value is None else digest(value)


def _open_journal(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return connection


def _journal_columns(connection: sqlite3.Connection, table: str) -> set[str] | None:
    rows = connection.execute(f"PRAGMA table_info({table})").fetchall()
    return {row["name"] for row in rows} or None


def import_journal(
    *,
    scope: Any,
    path: str | os.PathLike[str],
    principal: Principal,
    actor: str = "journal-importer",
    source_id: str | None = None,
) -> JournalImport:
    """Record an external transaction journal as unverified, digest-only evidence.

    One ``action.source_imported`` event per journal transaction, deduplicated
    by (source, transaction ID); no action rows are created. The whole import
    is one database transaction, so a failure leaves nothing half-imported.
    """
    subject = access.require(principal, access.WRITE, scope)
    subject_id = str(subject)
    label = _actor_label(principal, actor, "journal-importer")
    journal = Path(path)
    if not journal.is_file():
        raise JournalNotFound(f"transaction journal not found (not a file): {str(path)!r}")
    source = source_id or str(journal.resolve())
    source_id_digest = digest(source)
    transactions, effects_by_txn = _read_journal(journal)

    imported: list[ImportedTransaction] = []
    skipped: list[str] = []
    with db_transaction.atomic():
        seen = _already_imported(subject_id, source_id_digest)
        for row in transactions:
            source_txn_id = str(row["txn_id"])
            if source_txn_id in seen:
                skipped.append(source_txn_id)
                continue
            effects = [_effect_evidence(effect) for effect in effects_by_txn.get(source_txn_id, [])]
            event = append_event(
                subject=subject_id,
                event_type="action.source_imported",
                actor=label,
                payload=_source_imported_payload(row, effects, source_id_digest),
            )
            seen.add(source_txn_id)
            imported.append(
                ImportedTransaction(
                    source_transaction_id=source_txn_id,
                    audit_event_id=event.event_id,
                    audit_event_hash=event.event_hash,
                    effect_count=len(effects),
                )
            )
    return JournalImport(
        source_id_digest=source_id_digest,
        imported=tuple(imported),
        skipped_transaction_ids=tuple(skipped),
    )


def _read_journal(
    journal: Path,
) -> tuple[list[sqlite3.Row], dict[str, list[sqlite3.Row]]]:
    """IJ-1, IJ-2: the journal's transactions and effects, read-only, schema checked first."""
    try:
        connection = _open_journal(journal)
    except sqlite3.Error as exc:
        raise JournalError(f"not a compatible transaction journal; cannot open it: {exc}") from exc
    try:
        _check_journal_schema(connection)
        transactions = connection.execute(
            "SELECT txn_id, state, created_at, updated_at, replayed_from, dry_run, client_id "
            "FROM transactions ORDER BY created_at, txn_id"
        ).fetchall()
        effects_by_txn: dict[str, list[sqlite3.Row]] = {}
        for row in connection.execute(
            "SELECT txn_id, idx, effect_id, tool, resource, reversible, status, args, snapshot, "
            "result, read_keys, write_keys, actor, ts FROM effects ORDER BY txn_id, idx"
        ):
            effects_by_txn.setdefault(str(row["txn_id"]), []).append(row)
    finally:
        connection.close()
    return transactions, effects_by_txn


def _check_journal_schema(connection: sqlite3.Connection) -> None:
    """IJ-2: refuse a file without the two tables and every column the import reads."""
    try:
        tables = {
            row["name"]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"not a compatible transaction journal; {exc}") from exc
    missing_tables = sorted({"transactions", "effects"} - tables)
    if missing_tables:
        raise JournalError(
            f"not a compatible transaction journal; missing tables: {missing_tables}"
        )
    problems = []
    for table, required in (
        ("transactions", JOURNAL_TRANSACTION_COLUMNS),
        ("effects", JOURNAL_EFFECT_COLUMNS),
    ):
        missing = sorted(required - (_journal_columns(connection, table) or set()))
        if missing:
            problems.append(f"{table} missing columns: {missing}")
    if problems:
        raise JournalError("not a compatible transaction journal; " + "; ".join(problems))


def _already_imported(subject_id: str, source_id_digest: str) -> set[str]:
    """IJ-3: the source transaction IDs this journal already contributed to the scope."""
    seen: set[str] = set()
    for payload_text in AuditEvent.objects.filter(
        subject_id=subject_id, event_type="action.source_imported"
    ).values_list("payload", flat=True):
        payload = json.loads(payload_text)
        if payload.get("source_id_digest") == source_id_digest:
            seen.add(str(payload.get("source_transaction_id")))
    return seen


def _effect_evidence(effect: sqlite3.Row) -> dict[str, Any]:
    """IJ-4: one journal effect as claims and digests; its payloads never in clear."""
    return {
        "index": effect["idx"],
        "effect_id": effect["effect_id"],
        "tool": effect["tool"],
        "resource": effect["resource"],
        "reversible_claim": bool(effect["reversible"]),
        "status_claim": effect["status"],
        "args_digest": _json_digest(effect["args"]),
        "snapshot_digest": _json_digest(effect["snapshot"]),
        "result_digest": _json_digest(effect["result"]),
        "read_keys_digest": _json_digest(effect["read_keys"]),
        "write_keys_digest": _json_digest(effect["write_keys"]),
        "claimed_actor_digest": _optional_digest(effect["actor"]),
        "timestamp": effect["ts"],
    }


def _source_imported_payload(
    row: sqlite3.Row, effects: list[dict[str, Any]], source_id_digest: str
) -> dict[str, Any]:
    """The ``action.source_imported`` event payload for one journal transaction (IJ-4)."""
    return {
        "provider": "external_transaction_journal",
        "evidence_status": "unverified_operational_journal",
        "source_id_digest": source_id_digest,
        "source_transaction_id": str(row["txn_id"]),
        "source_state": row["state"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "replayed_from_digest": _optional_digest(row["replayed_from"]),
        "client_id_digest": _optional_digest(row["client_id"]),
        "dry_run": bool(row["dry_run"]),
        "effects": effects,
        "effects_digest": digest(effects),
    }
