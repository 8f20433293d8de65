"""Display filters for the guarded-actions pages: timestamps, digests, diffs, JSON."""

from __future__ import annotations

import difflib
import json
import re
from datetime import datetime
from typing import Any

from django import template

register = template.Library()


@register.filter
def as_datetime(value: Any) -> datetime | None:
    """An ISO-8601 timestamp as stored (C-2) parsed back, for ``date`` and ``timeuntil``."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


@register.filter
def short_hash(value: Any, length: int = 12) -> str:
    """The first characters of a digest or ID, for tables (the full value goes in a title)."""
    text = "" if value is None else str(value)
    return text if len(text) <= length else text[:length] + "…"


@register.filter
def diff_lines(diff: Any) -> list[dict[str, str]]:
    """A unified diff split into lines, each with the kind that colours it."""
    lines = []
    for line in str(diff or "").splitlines():
        if line.startswith(("+++", "---")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        lines.append({"kind": kind, "text": line})
    return lines


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


def _segments(text: str, other: str) -> list[dict[str, Any]]:
    """``text`` cut into runs, each marked changed or not against ``other`` (word level)."""
    mine, theirs = _WORDS.findall(text), _WORDS.findall(other)
    matcher = difflib.SequenceMatcher(a=mine, b=theirs, autojunk=False)
    runs: list[dict[str, Any]] = []
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if i1 == i2:
            continue
        piece = "".join(mine[i1:i2])
        changed = tag != "equal"
        if runs and runs[-1]["changed"] == changed:
            runs[-1]["text"] += piece
        else:
            runs.append({"text": piece, "changed": changed})
    return runs


@register.filter
def diff_rows(diff: Any) -> list[dict[str, Any]]:
    """A unified diff as rows with old and new line numbers; a removed line and the added
    line that replaces it get word-level highlights (``segments``, ``changed`` runs)."""
    rows: list[dict[str, Any]] = []
    old_no = new_no = 0
    pending_del: list[dict[str, Any]] = []
    pending_add: list[dict[str, Any]] = []

    def flush() -> None:
        # Pair removed and added lines of one change block, line by line.
        for removed, added in zip(pending_del, pending_add, strict=False):
            removed["segments"] = _segments(removed["text"], added["text"])
            added["segments"] = _segments(added["text"], removed["text"])
        rows.extend(pending_del)
        rows.extend(pending_add)
        pending_del.clear()
        pending_add.clear()

    for line in str(diff or "").splitlines():
        if line.startswith(("+++", "---")):
            flush()
            rows.append({"kind": "meta", "text": line, "old": "", "new": ""})
            continue
        hunk = _HUNK.match(line)
        if hunk:
            flush()
            old_no, new_no = int(hunk.group(1)), int(hunk.group(2))
            rows.append({"kind": "hunk", "text": line, "old": "", "new": ""})
            continue
        body = line[1:]
        if line.startswith("-"):
            pending_del.append({"kind": "del", "text": body, "old": old_no, "new": ""})
            old_no += 1
        elif line.startswith("+"):
            pending_add.append({"kind": "add", "text": body, "old": "", "new": new_no})
            new_no += 1
        elif line.startswith("\\"):
            flush()
            rows.append({"kind": "meta", "text": line, "old": "", "new": ""})
        else:
            flush()
            rows.append({"kind": "same", "text": body, "old": old_no, "new": new_no})
            old_no += 1
            new_no += 1
    flush()
    for row in rows:
        row.setdefault("segments", [{"text": row["text"], "changed": False}])
        row["sign"] = {"add": "+", "del": "-"}.get(row["kind"], " ")
    return rows


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON with sorted keys (escaped by the template like any other text)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


@register.filter
def state_label(value: Any) -> str:
    return str(value or "").replace("_", " ")


def _preview_order(key: str) -> tuple[int, str]:
    # The target first, then the before-state, then the after-state: how a reviewer reads a change.
    if key == "path":
        return (0, key)
    if key.startswith("before"):
        return (1, key)
    if key.startswith("after"):
        return (2, key)
    return (3, key)


@register.filter
def preview_rows(preview: Any) -> list[dict[str, str]]:
    """An adapter preview as labelled rows: booleans as yes/no, file modes in octal."""
    if not isinstance(preview, dict):
        return []
    rows = []
    for key in sorted(preview, key=_preview_order):
        value = preview[key]
        if isinstance(value, bool):
            text = "yes" if value else "no"
        elif value is None:
            text = "none"
        elif key.endswith("mode") and isinstance(value, int):
            text = f"{value:04o}"
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        rows.append({"label": key.replace("_", " "), "value": text})
    return rows


@register.filter
def cited(detail: Any, ref_id: str) -> Any:
    """The message or record an ``authorized_by`` claim resolved to (None when it did not)."""
    return getattr(detail, "authorizing", {}).get(ref_id)


# What each ``error_code`` a run ends with means, in words an approver acts on.
ERROR_CODE_WORDS = {
    "execution_raised": "the action raised an error while running, so whether it took effect is unknown",
    "interrupted_external_boundary": "the process stopped while an action was reaching outside",
    "not_dispatched": "the action failed before it was sent, so it did not take effect",
    "postcondition_unverified": "the action ran but its effect could not be confirmed",
    "verification_raised": "checking the action's effect raised an error",
    "revalidation_raised": "re-checking the world before running raised an error",
    "precondition_changed": "the world changed after approval, so nothing ran",
}


@register.filter
def error_words(code: Any) -> str:
    """An ``error_code`` in plain words (an exception class name is shown as it is)."""
    text = str(code or "")
    return ERROR_CODE_WORDS.get(text, text.replace("_", " "))
