"""Fixtures for the evidence layer: appending events, tampering with rows on purpose."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.db import connection, transaction

from audit.models import AuditEvent
from audit.services import HeldLocks, append_event

TOOL = Path(__file__).resolve().parents[2] / "tools" / "verify_audit.py"


def load_tool() -> ModuleType:
    """tools/verify_audit.py as a module (it is a standalone script, not a package)."""
    spec = importlib.util.spec_from_file_location("verify_audit", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("verify_audit", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


tool = load_tool()


@pytest.fixture(autouse=True)
def checkpoint_sink(settings, tmp_path):
    """Never let a test append to the development checkpoint file."""
    sink = tmp_path / "checkpoints.jsonl"
    settings.AETNAWEB_CHECKPOINT_SINK = str(sink)
    return sink


def append(subject: str, event_type: str = "memory.recall", **fields: Any) -> AuditEvent:
    """One committed-with-the-caller append, as services do it."""
    fields.setdefault("actor", "system")
    fields.setdefault("payload", {"query_sha256": "0" * 64})
    with transaction.atomic():
        return append_event(subject=subject, event_type=event_type, **fields)


@pytest.fixture
def appender() -> Callable[..., AuditEvent]:
    return append


def tamper(sql: str, params: list[Any] | tuple[Any, ...] = ()) -> int:
    """Edit audit_log behind the engine's back, as an attacker with database access would."""
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        count = cursor.rowcount
    forget_known_heads()
    return count


def forget_known_heads() -> None:
    """Make this transaction's next appends read their chain heads from the database again.

    A test runs inside one transaction, so its edits "behind the engine's back"
    land in the same transaction as the appends around them, where the heads
    those appends left (audit.services.HeldLocks) stand. In production such an
    edit comes from another connection, and cannot land while an appending
    transaction holds the chain's lock, so those heads stay exact there.
    """
    connection.run_on_commit = [
        entry
        for entry in connection.run_on_commit
        if not (isinstance(entry[1], HeldLocks) and entry[1].head is not None)
    ]


def mixed_chains(subjects: list[str], per_subject: int) -> list[AuditEvent]:
    """Interleaved appends across ``subjects`` with varied optional columns and payloads."""
    events = []
    for index in range(per_subject * len(subjects)):
        subject = subjects[index % len(subjects)]
        events.append(
            append(
                subject,
                event_type=("memory.record_created", "memory.recall", "agent.tool_call")[index % 3],
                actor=("system", "agent", "alice")[index % 3],
                payload={
                    "n": index,
                    "label": "caf\u00e9 \u2603" if index % 4 == 0 else "plain",
                    "nested": {"b": [1, 2.5, None, True], "a": {"z": "", "y": -3}},
                },
                session_id=f"ses-{index % 2}" if index % 5 else None,
                turn_id=f"turn-{index}" if index % 3 == 0 else None,
                record_id=f"rec_{index:032x}" if index % 2 else None,
            )
        )
    return events
