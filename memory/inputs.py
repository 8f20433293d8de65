"""Typed inputs of the memory verbs: one per verb, with its limits, checked once.

Every surface (the HTTP API, MCP tools, the CLI, the Python client's JSON)
builds these from what it received; the service checks them (``check``) and
then acts, so a refusal reads the same wherever it came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.errors import InvalidInput
from memory.limits import MAX_CONTEXT_CHARS, MAX_IMPORT_TURNS, MAX_SPEAKER_CHARS, MAX_TEXT_CHARS
from memory.models import Role

ROLES = tuple(role.value for role in Role)
_TURN_FIELDS = frozenset({"text", "speaker", "role", "occurred_at", "turn_id", "session_id"})


def parse_time(value: Any, field: str) -> datetime | None:
    """An aware datetime from a datetime or an ISO 8601 string; None stays None.

    A time without a zone is refused rather than guessed: the same words
    ("tomorrow") resolve to different days in different zones.
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInput(
                f"{field} must be an ISO 8601 time such as 2026-03-02T09:30:00+00:00",
                field=field,
            ) from None
    if not isinstance(value, datetime):
        raise InvalidInput(f"{field} must be an ISO 8601 time", field=field)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(
            f"{field} needs a time zone (for example +00:00 or Z): a time without one is ambiguous",
            field=field,
        )
    return value


@dataclass(frozen=True)
class ConversationTurn:
    """One turn of a conversation to import: what was said, by whom, in which role, when."""

    text: str
    role: str = Role.USER.value
    speaker: str = ""
    occurred_at: datetime | None = None
    turn_id: str = ""
    session_id: str = ""

    @classmethod
    def from_mapping(cls, data: Any, index: int) -> ConversationTurn:
        """A turn from JSON-like data (API body, MCP arguments, a CLI file); unknown keys refused."""
        where = f"turns.{index}"
        if isinstance(data, ConversationTurn):
            return data
        if not isinstance(data, Mapping):
            raise InvalidInput(f"{where} must be an object with text and role", field=where)
        unknown = sorted(set(map(str, data)) - _TURN_FIELDS)
        if unknown:
            raise InvalidInput(
                f"{where} has unknown field(s) {', '.join(unknown)}; "
                f"a turn has {', '.join(sorted(_TURN_FIELDS))}",
                field=f"{where}.{unknown[0]}",
            )
        # Types are checked in check(), with a message naming the field.
        return cls(
            text=data.get("text"),  # type: ignore[arg-type]
            role=data.get("role") or Role.USER.value,
            speaker=data.get("speaker") or "",
            occurred_at=data.get("occurred_at"),
            turn_id=data.get("turn_id") or "",
            session_id=data.get("session_id") or "",
        )

    def check(self, index: int) -> ConversationTurn:
        """This turn validated (its time parsed), or :class:`InvalidInput` naming the field."""
        where = f"turns.{index}"
        if not isinstance(self.text, str) or not self.text.strip():
            raise InvalidInput(
                f"{where}.text is empty: a turn needs what was said", field=f"{where}.text"
            )
        if len(self.text) > MAX_TEXT_CHARS:
            raise InvalidInput(
                f"{where}.text is longer than {MAX_TEXT_CHARS} characters", field=f"{where}.text"
            )
        if self.role not in ROLES:
            raise InvalidInput(
                f"{where}.role must be one of {', '.join(ROLES)}", field=f"{where}.role"
            )
        for name, limit in (
            ("speaker", MAX_SPEAKER_CHARS),
            ("turn_id", MAX_CONTEXT_CHARS),
            ("session_id", MAX_CONTEXT_CHARS),
        ):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) > limit:
                raise InvalidInput(
                    f"{where}.{name} must be text of at most {limit} characters",
                    field=f"{where}.{name}",
                )
        when = parse_time(self.occurred_at, f"{where}.occurred_at")
        return ConversationTurn(
            text=self.text,
            role=self.role,
            speaker=self.speaker.strip(),
            occurred_at=when,
            turn_id=self.turn_id,
            session_id=self.session_id,
        )


def check_turns(turns: Any) -> list[ConversationTurn]:
    """Every turn of an import checked, in order; refuses an empty or oversized list."""
    if isinstance(turns, str | bytes) or not isinstance(turns, Sequence):
        raise InvalidInput("turns must be a list of turns", field="turns")
    if not turns:
        raise InvalidInput("turns is empty: there is nothing to import", field="turns")
    if len(turns) > MAX_IMPORT_TURNS:
        raise InvalidInput(
            f"an import holds at most {MAX_IMPORT_TURNS} turns; send the rest in another call",
            field="turns",
        )
    return [
        ConversationTurn.from_mapping(turn, index).check(index) for index, turn in enumerate(turns)
    ]
