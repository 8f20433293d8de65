"""Display filters for the guarded-actions pages: timestamps, digests, diffs, JSON."""

from __future__ import annotations

import json
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
