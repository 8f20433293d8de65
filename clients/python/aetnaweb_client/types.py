"""The shapes of the API's answers, as TypedDicts (see /api/v1/openapi.json for every field)."""

from __future__ import annotations

from typing import Any, TypedDict


class StoredRecord(TypedDict):
    record_id: str
    status: str
    fact_key: str
    content: str
    superseded_ids: list[str]
    metadata: dict[str, Any]


class RememberResult(TypedDict):
    scope: str
    episode_id: str | None
    source_type: str
    trust_tier: str
    records: list[StoredRecord]
    superseded_ids: list[str]
    duplicate_of: list[str]
    ignored: bool


class ImportedTurn(TypedDict):
    turn_id: str
    session_id: str
    role: str
    episode_id: str
    records: list[StoredRecord]
    duplicate_of: list[str]


class ImportResult(TypedDict):
    scope: str
    turns: list[ImportedTurn]
    records_stored: int
    superseded_ids: list[str]


class RecallCandidate(TypedDict):
    record_id: str
    scope: str
    content: str
    fact_key: str
    trust_tier: str
    score: float
    # The calibrated probability that this is the memory asked for.
    confidence: float
    parts: dict[str, float]
    rank: int
    above_threshold: bool
    returned: bool
    metadata: dict[str, Any]


class RecallResult(TypedDict):
    scope: str
    retrieval_id: str
    audit_event_id: str
    candidates: list[RecallCandidate]
    returned_ids: list[str]
    min_confidence: float
    # "No memory fits": nothing reached min_confidence; the reason in words.
    abstained: bool
    abstain_reason: str


class RecallBlock(TypedDict):
    scope: str
    text: str
    record_ids: list[str]
    retrieval_id: str
    audit_event_id: str | None
    abstained: bool


class Record(TypedDict):
    record_id: str
    scope: str
    status: str
    content: str
    fact_key: str
    kind: str
    source_type: str
    trust_tier: str
    confidence: float
    episode_id: str | None
    session_id: str
    turn_id: str
    supersedes: str | None
    superseded_by: str | None
    evidence: Any
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    deleted_at: str | None
    # When it lapses (remember's expires_at); None: kept until forgotten.
    expires_at: str | None


class ForgetPreview(TypedDict):
    scope: str
    mode: str
    record_ids: list[str]
    episode_ids: list[str]
    records: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    # Whether the lists hold the scopes below too; the matches in each scope below.
    include_below: bool
    below: list[dict[str, Any]]
    # Rows the forget purges: sent back as confirm_count above confirm_above.
    count: int
    confirm_above: int


class TokenInfo(TypedDict):
    name: str
    token_prefix: str
    scope: str
    capabilities: list[str]
    expires_at: str


JSON = dict[str, Any]
