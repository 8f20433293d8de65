"""What the memory verbs return: frozen dataclasses with ``as_dict()`` for JSON callers."""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime
from typing import Any


class _AsDict:
    def as_dict(self) -> dict[str, Any]:
        return _jsonable(self)  # type: ignore[no-any-return]


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(item.name for item in fields(cls))


def _jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data, in one pass.

    Not ``dataclasses.asdict``: it deep-copies every value on its way, which
    cost 0.7 ms for a recall of 50 candidates, then this walk ran again.
    """
    if isinstance(value, enum.Enum):  # before str: TextChoices members are str too
        return value.value
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if is_dataclass(value) and not isinstance(value, type):
        return {name: _jsonable(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


@dataclass(frozen=True)
class StoredRecord(_AsDict):
    record_id: str
    status: str
    fact_key: str
    content: str
    superseded_ids: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RememberResult(_AsDict):
    """What one remember did: the episode, the records made, what they replaced or repeated."""

    scope: str
    episode_id: str | None
    source_type: str
    trust_tier: str
    records: tuple[StoredRecord, ...]
    superseded_ids: tuple[str, ...]
    duplicate_of: tuple[str, ...]
    ignored: bool

    @property
    def record_ids(self) -> list[str]:
        return [record.record_id for record in self.records]


@dataclass(frozen=True)
class ImportedTurn(_AsDict):
    """What one imported turn kept: its episode and the records made from it."""

    turn_id: str
    session_id: str
    role: str
    episode_id: str
    records: tuple[StoredRecord, ...]
    duplicate_of: tuple[str, ...]


@dataclass(frozen=True)
class ImportResult(_AsDict):
    """What one conversation import stored, turn by turn, in the order given."""

    scope: str
    turns: tuple[ImportedTurn, ...]
    records_stored: int
    superseded_ids: tuple[str, ...]


@dataclass(frozen=True)
class RecallCandidate(_AsDict):
    record_id: str
    scope: str
    content: str
    fact_key: str
    trust_tier: str
    score: float
    parts: dict[str, float]
    rank: int
    above_threshold: bool
    returned: bool
    # The record's metadata as stored (not kept in the retrieval log).
    metadata: dict[str, Any] = field(default_factory=dict)
    # When the record was stored, and when its source message was said (None: not stated).
    created_at: datetime | None = None
    occurred_at: datetime | None = None
    # The calibrated probability that this is the memory asked for
    # (memory.ranking.confidence), not the record's extraction confidence.
    confidence: float = 0.0


@dataclass(frozen=True)
class RecallResult(_AsDict):
    """Every candidate considered (best first) and the ones returned.

    ``abstained`` is the explicit "no memory fits": nothing reached the
    confidence threshold, and ``abstain_reason`` says why in words.
    """

    scope: str
    retrieval_id: str
    audit_event_id: str
    candidates: tuple[RecallCandidate, ...]
    min_confidence: float = 0.0

    @property
    def abstained(self) -> bool:
        return not self.returned

    @property
    def abstain_reason(self) -> str:
        if self.returned:
            return ""
        if not self.candidates:
            return "no memory fits: nothing visible matches the question by words or meaning"
        best = max(candidate.confidence for candidate in self.candidates)
        if best < self.min_confidence:
            return (
                f"no memory fits: the best match's confidence {best:.2f} is below "
                f"the threshold {self.min_confidence:.2f}"
            )
        return "no memory fits: no candidate reached the requested min_score"

    @property
    def returned(self) -> list[RecallCandidate]:
        return [candidate for candidate in self.candidates if candidate.returned]

    @property
    def record_ids(self) -> list[str]:
        return [candidate.record_id for candidate in self.returned]

    def as_dict(self) -> dict[str, Any]:
        data = super().as_dict()
        data["returned_ids"] = self.record_ids
        data["abstained"] = self.abstained
        data["abstain_reason"] = self.abstain_reason
        return data


@dataclass(frozen=True)
class RecallBlock(_AsDict):
    """The ``<relevant_memories>`` block for a prompt ("" when nothing qualifies: ``abstained``)."""

    scope: str
    text: str
    record_ids: tuple[str, ...]
    retrieval_id: str
    audit_event_id: str | None

    @property
    def abstained(self) -> bool:
        return not self.record_ids

    def as_dict(self) -> dict[str, Any]:
        data = super().as_dict()
        data["abstained"] = self.abstained
        return data


@dataclass(frozen=True)
class ForgetPreview(_AsDict):
    """Exactly what a forget would purge. Writes nothing."""

    scope: str
    mode: str
    record_ids: tuple[str, ...]
    episode_ids: tuple[str, ...]
    records: tuple[dict[str, Any], ...]
    # Every stored message the forget empties: matched itself, or a purged record's source.
    episodes: tuple[dict[str, Any], ...] = ()
    # Whether the rows of the scopes below are part of the lists above.
    include_below: bool = False
    # The same words' matches in each scope below: {"scope", "record_ids", "episode_ids", "count"}.
    below: tuple[dict[str, Any], ...] = ()
    # What the forget purges as the operator counts rows (records, and messages beyond
    # their sources); above ``confirm_above`` it is typed back as confirm_count.
    count: int = 0
    confirm_above: int = 10


@dataclass(frozen=True)
class PromoteResult(_AsDict):
    scope: str
    record_id: str
    status: str
    trust_tier: str
    superseded_ids: tuple[str, ...]
    audit_event_id: str


@dataclass(frozen=True)
class ProposeResult(_AsDict):
    scope: str
    accepted: tuple[StoredRecord, ...]
    duplicates: tuple[dict[str, Any], ...]
    rejected: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class ConsolidateResult(_AsDict):
    scope: str
    changed: bool
    duplicates: tuple[dict[str, Any], ...]
    keys: tuple[dict[str, Any], ...]
    audit_event_id: str | None


@dataclass(frozen=True)
class Persona(_AsDict):
    scope: str
    text: str
    record_ids: tuple[str, ...]
    persona_sha256: str
    audit_event_id: str


@dataclass(frozen=True)
class CaptureResult(_AsDict):
    role: str
    audit_event_id: str | None
    remembered: RememberResult | None = None


@dataclass(frozen=True)
class Scene(_AsDict):
    session_id: str
    # Where this scene sits in the newest-first order: pass it as ``after`` for older ones.
    cursor: str = ""
    episodes: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    records: tuple[dict[str, Any], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class SourceDecision(_AsDict):
    """Every fact of one source message, decided at once."""

    scope: str
    episode_id: str
    promoted: tuple[PromoteResult, ...]
    receipts: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class ReviewDecisions(_AsDict):
    """Several records promoted (or rejected) at once, in the order they were named."""

    decision: str
    promoted: tuple[PromoteResult, ...]
    receipts: tuple[dict[str, Any], ...]
