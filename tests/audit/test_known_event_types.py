"""Every event type the engine emits is known to the audit explorer (issue 15, item 3).

The emitted types are found by reading the code, not listed here: a new
``event_type="..."`` anywhere in the apps fails this test until
``audit.readable`` learns it (``memory.record_corrected`` once slipped through).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from audit.models import AuditEvent
from audit.readable import KNOWN_EVENT_TYPES, SUMMARIES, event_summary

ROOT = Path(__file__).resolve().parents[2]
APPS = ("aetnaweb", "access", "audit", "memory", "actions", "webhooks")
# Functions whose string arguments are event types (the append and its per-app wrappers).
EMITTERS = {"append_event", "_event", "_audit"}
EVENT_TYPE = re.compile(r"^[a-z]+(\.[a-z][a-z0-9_]*)+$")


def _strings(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):  # "memory.record_created" if trusted else "..."
        yield from _strings(node.body)
        yield from _strings(node.orelse)


def _emitted_in(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            for keyword in node.keywords:
                if keyword.arg == "event_type":
                    yield from _strings(keyword.value)
                # actions' _finish(events=[("action.transaction_uncertain", {...})])
                if keyword.arg == "events" and isinstance(keyword.value, ast.List | ast.Tuple):
                    for item in keyword.value.elts:
                        if isinstance(item, ast.Tuple) and item.elts:
                            yield from _strings(item.elts[0])
            if name in EMITTERS:
                for argument in node.args:
                    yield from _strings(argument)
        elif isinstance(node, ast.Assign):
            # memory's CAPTURE_EVENT_TYPES = {"assistant": "agent.assistant_message", ...}
            named = any(
                isinstance(target, ast.Name) and target.id.endswith("EVENT_TYPES")
                for target in node.targets
            )
            if named and isinstance(node.value, ast.Dict):
                for value in node.value.values:
                    yield from _strings(value)


def emitted_event_types() -> dict[str, str]:
    """Each event type written by app code, with the first file that writes it."""
    found: dict[str, str] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for value in _emitted_in(ast.parse(path.read_text(encoding="utf-8"))):
                if EVENT_TYPE.fullmatch(value):
                    found.setdefault(value, str(path.relative_to(ROOT)))
    return found


def test_the_scan_finds_the_engine_s_emitters():
    # Given the apps' code, when it is scanned,
    found = emitted_event_types()
    # then each emitting idiom is seen (a blind scan would pass vacuously).
    assert "memory.record_corrected" in found  # event_type= keyword
    assert "action.transaction_uncertain" in found  # _finish(events=[(...)])
    assert "action.proposed" in found  # _event(txn, "action.proposed", ...)
    assert "agent.tool_call" in found  # CAPTURE_EVENT_TYPES
    assert "access.login_locked" in found  # lockouts' append_event


def test_every_emitted_event_type_is_known_to_the_explorer():
    # Given every event type the code writes,
    found = emitted_event_types()
    # when each is looked up in the explorer's catalogue,
    unknown = {name: path for name, path in found.items() if name not in KNOWN_EVENT_TYPES}
    # then none is missing.
    assert unknown == {}, f"add these to audit/readable.py SUMMARIES: {unknown}"


def test_every_known_type_reads_as_its_own_summary_not_its_bare_name():
    for event_type in KNOWN_EVENT_TYPES:
        event = AuditEvent(event_type=event_type, payload="{}", actor="rita")
        assert event_summary(event) != f"rita: {event_type}"
    assert set(SUMMARIES) == KNOWN_EVENT_TYPES


def test_a_correction_reads_as_one_line():
    event = AuditEvent(
        event_type="memory.record_corrected",
        payload='{"record_id": "mem_0123456789abcdef", "corrected_by": "mem_fedcba9876543210"}',
        actor="rita",
    )
    assert event_summary(event) == "rita corrected mem_0123456789ab… with mem_fedcba987654…"
