"""Request and response bodies of the memory API (``/api/v1/memory/``).

Requests are validated here before any service runs, so a malformed body is a
400 naming the field and writes nothing. Responses mirror the services'
``as_dict()`` results.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from aetnaweb.api import BodyIn, ContextStr, ScopeStr
from audit.services import MAX_EVENT_TYPE_LENGTH
from memory.limits import (
    MAX_BLOCK_CHARS,
    MAX_FACT_CONTENT_CHARS,
    MAX_FACT_EVIDENCE,
    MAX_FORGET_RECORDS,
    MAX_KEY_CHARS,
    MAX_KIND_CHARS,
    MAX_METADATA_BYTES,
    MAX_METADATA_FILTER_KEYS,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
    MAX_PAGE,
    MAX_PROPOSED_FACTS,
    MAX_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MAX_SELECTOR_CHARS,
    MAX_TEXT_CHARS,
    MAX_VALUE_CHARS,
)
from memory.metadata import MAX_IN_VALUES
from memory.ranking import DEFAULT_MIN_CONFIDENCE
from memory.services import (
    MAX_UNCONFIRMED_FORGET,
    MAX_UNPREVIEWED_FORGET,
    PERSONA_MAX_CHARS,
    RECALL_BLOCK_MIN_SCORE,
)
from memory.services.forgetting import MAX_FORGET_REFERENCE_CHARS

RecordId = Annotated[str, Field(min_length=1, max_length=64)]
Score = Annotated[float, Field(ge=0.0, le=1.0)]

# Record metadata (memory/metadata.py): the schema states the shape; the
# service checks every bound (keys, size, NaN, NUL...) and names the field.
# Values are typed in the document but accepted as any JSON here: the
# service refuses a nested or odd value naming ``metadata.<key>``, which
# reads better than pydantic's per-alternative union errors.
MetadataValue = Annotated[Any, WithJsonSchema({"type": ["string", "number", "boolean", "null"]})]
METADATA_DESCRIPTION = (
    f"Flat JSON key/values stored with every record this call creates: at most "
    f"{MAX_METADATA_KEYS} keys of 1-{MAX_METADATA_KEY_CHARS} characters "
    "[a-z0-9_][a-z0-9_.-]*, values string, number, true, false or null, at most "
    f"{MAX_METADATA_BYTES} bytes as canonical JSON. Returned on every record; usable "
    "as a recall and list filter. Forgetting a record purges its metadata."
)
Metadata = Annotated[
    dict[str, MetadataValue] | None,
    Field(
        None,
        max_length=MAX_METADATA_KEYS,
        description=METADATA_DESCRIPTION,
        examples=[{"customer_id": 42, "channel": "email"}],
    ),
]
MetadataOut = Annotated[
    dict[str, MetadataValue],
    Field(description="The record's metadata ({} when none, and after a forget)."),
]


_SCALAR = {"type": ["string", "number", "boolean", "null"]}
_RANGE_BOUND = {
    "type": ["number", "string"],
    "description": "A number, or an ISO 8601 date or timestamp string (compared as text).",
}
MetadataCondition = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [
                {**_SCALAR, "description": "Equality: exactly this typed value."},
                {
                    "type": "object",
                    "description": "Operators, ANDed; each needs the key to be present.",
                    "properties": {
                        "$eq": _SCALAR,
                        "$ne": _SCALAR,
                        "$in": {
                            "type": "array",
                            "items": _SCALAR,
                            "minItems": 1,
                            "maxItems": MAX_IN_VALUES,
                        },
                        **dict.fromkeys(("$gt", "$gte", "$lt", "$lte"), _RANGE_BOUND),
                    },
                    "additionalProperties": False,
                    "minProperties": 1,
                },
            ]
        }
    ),
]
_MOMENT = {
    "type": "string",
    "description": "ISO 8601 timestamp with a time zone, or a date (its midnight UTC).",
    "examples": ["2026-01-31T09:00:00Z"],
}
CreatedAtRange = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "object",
            "properties": dict.fromkeys(("$gt", "$gte", "$lt", "$lte"), _MOMENT),
            "additionalProperties": False,
            "minProperties": 1,
        }
    ),
]
FILTERS_DESCRIPTION = (
    'Restrict the candidates, e.g. {"metadata": {"customer_id": 42, "score": {"$gte": 3}}, '
    '"created_at": {"$gte": "2026-01-01T00:00:00Z"}}. Runs inside the candidate queries, '
    "so it never starves the top results."
)


# The query-string filters of GET /memory/records. OpenAPI cannot name a family
# of parameters (metadata.<key>), so each family is one deepObject parameter:
# generated clients send metadata[customer_id]=42, which the API reads as
# metadata.customer_id=42 (memory.metadata.filter_from_query).
RECORD_FILTER_PARAMETERS: list[dict[str, Any]] = [
    {
        "name": "metadata",
        "in": "query",
        "required": False,
        "style": "deepObject",
        "explode": True,
        "description": "Keep records whose metadata matches, one parameter per key, ANDed. "
        "The value is JSON: metadata[customer_id]=42 is the number, "
        'metadata[customer_id]="42" the string (a bare word is a 400). Also spelled '
        "metadata.customer_id=42. Operators: metadata[score][$gte]=3 (or "
        "metadata.score.$gte=3) with $eq, $ne, $in (a JSON array: "
        'metadata.tier.$in=["gold","silver"]), $gt, $gte, $lt, $lte; numbers match '
        "numbers, ISO 8601 date strings match strings (as text).",
        "schema": {
            "type": "object",
            "additionalProperties": {"type": "string", "description": "A JSON value."},
        },
        "examples": {
            "number": {"value": {"customer_id": "42"}},
            "string": {"value": {"channel": '"email"'}},
        },
    },
    {
        "name": "created_at",
        "in": "query",
        "required": False,
        "style": "deepObject",
        "explode": True,
        "description": "Keep records stored in this range: created_at[$gte]=2026-01-01T00:00:00Z "
        "(also spelled created_at.$gte=...), with $gt, $gte, $lt, $lte; ISO 8601 with a "
        "time zone, or a date (its midnight UTC).",
        "schema": {
            "type": "object",
            "properties": dict.fromkeys(("$gt", "$gte", "$lt", "$lte"), _MOMENT),
            "additionalProperties": False,
        },
        "examples": {"since": {"value": {"$gte": "2026-01-01T00:00:00Z"}}},
    },
]


class MetadataFilterIn(BodyIn):
    metadata: dict[str, MetadataCondition] | None = Field(
        None,
        max_length=MAX_METADATA_FILTER_KEYS,
        description=f"At most {MAX_METADATA_FILTER_KEYS} keys, ANDed. A value asks for "
        'exactly that typed value (42 and "42" differ); an object applies operators: '
        "$eq, $ne, $in (a list), $gt, $gte, $lt, $lte (numbers match numbers, ISO 8601 "
        "date strings match strings as text). Every operator needs the key present.",
        examples=[{"customer_id": 42}, {"tier": {"$in": ["gold", "silver"]}, "score": {"$gte": 3}}],
    )
    created_at: CreatedAtRange | None = Field(
        None,
        description="When the record was stored: range bounds $gt, $gte, $lt, $lte.",
        examples=[{"$gte": "2026-01-01T00:00:00Z", "$lt": "2026-02-01T00:00:00Z"}],
    )


# -- requests ---------------------------------------------------------------------------


class RememberIn(BodyIn):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "scope": "acme:alice:proj",
                    "text": "My backup email is alice@example.org",
                    "session_id": "s1",
                    "turn_id": "t1",
                },
                {"scope": "acme:alice:proj", "key": "deploy window", "value": "Tuesdays 9-11"},
                {
                    "scope": "acme:alice:proj",
                    "text": "My preferred contact channel is email",
                    "metadata": {"customer_id": 42, "channel": "email"},
                },
            ]
        }
    )

    scope: ScopeStr
    text: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="A message as said. Facts are extracted from it; <webpage> and tool "
        "blocks make it untrusted (quarantined).",
        examples=["My backup email is alice@example.org"],
    )
    key: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_KEY_CHARS,
        description="An explicit fact slot (with value), instead of text.",
    )
    value: str | None = Field(None, min_length=1, max_length=MAX_VALUE_CHARS)
    kind: str | None = Field(
        None, max_length=MAX_KIND_CHARS, description="Optional label for an explicit fact."
    )
    session_id: ContextStr | None = None
    turn_id: ContextStr | None = None
    source_type: Literal["user_message", "webpage", "tool_output"] | None = Field(
        None, description="State third-party content explicitly; it can never be upgraded."
    )
    force: bool = Field(
        False,
        description="Also keep prose that states nothing about the user as an unkeyed note.",
    )
    metadata: Metadata
    occurred_at: datetime | None = Field(
        None,
        description="When the message was said (ISO 8601 with a time zone), for backfilling "
        "old conversations; kept on the episode and its records.",
    )
    expires_at: datetime | None = Field(
        None,
        description="When the stored records lapse (ISO 8601 with a time zone, in the future): "
        "recall skips them from then on and the retention run purges them, with a deletion "
        "receipt. Omit to keep them until forgotten.",
    )


class CaptureIn(BodyIn):
    scope: ScopeStr
    role: Literal["user", "assistant", "tool_call", "tool_result"]
    content: str = Field(..., max_length=MAX_TEXT_CHARS)
    session_id: ContextStr | None = None
    turn_id: ContextStr | None = None
    metadata: Metadata
    occurred_at: datetime | None = Field(
        None, description="When a user turn was said (ISO 8601 with a time zone)."
    )


class ForgetIn(BodyIn):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"scope": "acme:alice:proj", "utterance": "forget my backup email"},
                {"scope": "acme:alice:proj", "selector": "backup email"},
            ]
        }
    )

    scope: ScopeStr
    selector: str | None = Field(
        None,
        max_length=MAX_SELECTOR_CHARS,
        description="Forget the records whose content holds these words (whole words, "
        "case-insensitive), with their whole lineage.",
    )
    record_ids: list[RecordId] | None = Field(None, max_length=MAX_FORGET_RECORDS)
    utterance: str | None = Field(
        None,
        max_length=MAX_SELECTOR_CHARS,
        description="A spoken request, e.g. 'forget my backup email'. Like selector, it "
        "matches stored messages (episodes) too, those that produced no record included.",
    )
    episode_ids: list[RecordId] | None = Field(
        None,
        max_length=MAX_FORGET_RECORDS,
        description="Forget these stored messages (episode IDs of this scope, as scenes and "
        "remember return them) and every record drawn from them, with its lineage.",
    )
    session_id: ContextStr | None = Field(
        None,
        description="Forget every stored message and record of this session at this scope.",
    )
    expected_record_ids: list[RecordId] | None = Field(
        None,
        max_length=MAX_FORGET_RECORDS,
        description="The record IDs a preview showed: purge exactly these, or 409. Required "
        f"(with expected_episode_ids) when the forget would purge more than "
        f"{MAX_UNPREVIEWED_FORGET} records and messages.",
    )
    expected_episode_ids: list[RecordId] | None = Field(
        None,
        max_length=MAX_FORGET_RECORDS,
        description="The episode IDs a preview showed: empty exactly these messages, or 409. "
        "Send it with expected_record_ids whenever the preview listed messages that matched "
        "themselves.",
    )
    include_below: bool = Field(
        False,
        description="Also forget the same words' matches (selector or utterance) in every "
        "scope below scope: one deletion receipt per scope, returned bundled as an "
        "aetnaweb-forget-bundle-v1. On /forget/preview: list their rows and count them too.",
    )
    exclude_record_ids: list[RecordId] | None = Field(
        None,
        max_length=MAX_FORGET_RECORDS,
        description="Previewed records to leave out (unticked); a lineage whole or not at "
        "all. The receipts name exactly what was purged.",
    )
    exclude_episode_ids: list[RecordId] | None = Field(
        None,
        max_length=MAX_FORGET_RECORDS,
        description="Previewed stored messages to leave out (not the source of a record "
        "still purged).",
    )
    confirm_count: int | None = Field(
        None,
        ge=0,
        description=f"The number of records and messages the forget purges (the preview's "
        f"count, less the rows left out), typed back. Required above "
        f"{MAX_UNCONFIRMED_FORGET}; a wrong count is refused (400 forget_count_not_confirmed).",
    )
    reference: str | None = Field(
        None,
        max_length=MAX_FORGET_REFERENCE_CHARS,
        description="The request's reference, e.g. a ticket number (one line of printable "
        "text): kept with the receipts, its digest recorded in the forget event.",
    )


class ProposedFact(BodyIn):
    content: str = Field(..., min_length=1, max_length=MAX_FACT_CONTENT_CHARS)
    evidence: list[RecordId] = Field(
        ...,
        min_length=1,
        max_length=MAX_FACT_EVIDENCE,
        description="Episode or record IDs of this scope the fact is drawn from.",
    )
    fact_key: str | None = Field(None, max_length=MAX_KEY_CHARS)
    confidence: Score | None = None


class ProposeIn(BodyIn):
    scope: ScopeStr
    facts: list[ProposedFact] = Field(..., min_length=1, max_length=MAX_PROPOSED_FACTS)


class LogActionIn(BodyIn):
    scope: ScopeStr
    event_type: str = Field(
        ...,
        min_length=1,
        max_length=MAX_EVENT_TYPE_LENGTH,
        description="'agent.' followed by dotted lower-case words, e.g. agent.file_written; "
        "stored as agent.log.file_written, a namespace the engine never writes itself.",
        examples=["agent.file_written"],
    )
    payload: dict[str, Any] = Field(
        ...,
        description="Stored in the audit chain as given: digests, IDs and counts only, never "
        "content. Keys of deletion evidence (purged_*, selector_sha256, receipt_sha256, ...) "
        "are refused at any depth.",
    )
    session_id: ContextStr | None = None
    turn_id: ContextStr | None = None


class RecallIn(BodyIn):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"scope": "acme:alice:proj", "query": "backup email"},
                {
                    "scope": "acme:alice:proj",
                    "query": "contact channel",
                    "filters": {"metadata": {"customer_id": 42}},
                },
            ]
        }
    )

    scope: ScopeStr
    query: str = Field(..., max_length=MAX_QUERY_CHARS)
    limit: int = Field(5, ge=1, le=MAX_RECALL_LIMIT)
    min_score: Score = 0.0
    min_confidence: Score = Field(
        DEFAULT_MIN_CONFIDENCE,
        description="Return only candidates whose calibrated match confidence reaches this; "
        "when none does the answer says abstained (no memory fits).",
    )
    session_id: ContextStr | None = None
    filters: MetadataFilterIn | None = Field(None, description=FILTERS_DESCRIPTION)


class RecallBlockIn(BodyIn):
    scope: ScopeStr
    query: str = Field(..., max_length=MAX_QUERY_CHARS)
    max_items: int = Field(5, ge=1, le=MAX_RECALL_LIMIT)
    max_chars: int = Field(2000, ge=1, le=MAX_BLOCK_CHARS)
    min_score: Score = RECALL_BLOCK_MIN_SCORE
    min_confidence: Score = Field(
        DEFAULT_MIN_CONFIDENCE,
        description="Inject only memories whose calibrated match confidence reaches this.",
    )
    session_id: ContextStr | None = None
    filters: MetadataFilterIn | None = Field(None, description=FILTERS_DESCRIPTION)


class PersonaIn(BodyIn):
    scope: ScopeStr
    max_chars: int = Field(PERSONA_MAX_CHARS, ge=1, le=MAX_BLOCK_CHARS)


class ScenesQuery(Schema):
    scope: ScopeStr
    after: str | None = Field(
        None, max_length=20, pattern=r"^[0-9]+$", description="next_cursor of the previous page."
    )
    limit: int = Field(20, ge=1, le=MAX_PAGE)


# -- responses ------------------------------------------------------------------------------


class HotOut(BaseModel):
    """Base of the answers of remember and recall, the endpoints agents call most.

    A plain pydantic model, validated in pydantic's compiled core: ninja's
    ``Schema`` reads every field through a Python wrapper (so it can read ORM
    objects), which cost 0.65 ms against 0.09 ms for a recall answer of 50
    candidates. These endpoints answer with dicts, so nothing is lost; the
    OpenAPI schema is the same.
    """


class StoredRecordOut(HotOut):
    record_id: str
    status: str
    fact_key: str
    content: str
    superseded_ids: list[str]
    metadata: MetadataOut = {}


class RememberOut(HotOut):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "scope": "acme:alice:proj",
                    "episode_id": "ep_5f0c…",
                    "source_type": "user_message",
                    "trust_tier": "trusted_user",
                    "records": [
                        {
                            "record_id": "mem_9a1e…",
                            "status": "active",
                            "fact_key": "backup email",
                            "content": "backup email: alice@example.org",
                            "superseded_ids": [],
                        }
                    ],
                    "superseded_ids": [],
                    "duplicate_of": [],
                    "ignored": False,
                }
            ]
        }
    )

    scope: str
    episode_id: str | None
    source_type: str
    trust_tier: str
    records: list[StoredRecordOut]
    superseded_ids: list[str]
    duplicate_of: list[str]
    ignored: bool


class ScorePartsOut(HotOut):
    """score = relevance x weight x trust x (1 - 0.001 x (1 - recency)); relevance is the
    calibrated confidence of the fused evidence (cosine + 0.5 x word_share + context)."""

    weight: float
    relevance: float
    lexical: float = Field(description="BM25 of the query words the record holds (0: none)")
    lexical_rank: float = Field(0.0, description="place in the full-text list (0: not in it)")
    word_share: float = Field(
        0.0, description="share of the query's BM25 word weight the record holds, 0 to 1"
    )
    semantic: float = Field(
        description="cosine similarity of the query and the record; "
        "0 when semantic recall is unavailable"
    )
    semantic_rank: float = Field(
        0.0, description="place among the nearest neighbours (0: not among them)"
    )
    context: float = Field(
        0.0,
        description="what the candidate turns just before and after it in its session "
        "add to its evidence (0 without a session)",
    )
    trust: float
    recency: float


class RecallCandidateOut(HotOut):
    record_id: str
    scope: str
    content: str
    fact_key: str
    trust_tier: str
    score: float
    confidence: float = Field(
        0.0,
        description="calibrated probability that this is the memory asked for, 0 to 1 "
        "(not the record's extraction confidence)",
    )
    parts: ScorePartsOut
    rank: int
    above_threshold: bool
    returned: bool
    metadata: MetadataOut = {}
    created_at: datetime | None = Field(None, description="When the record was stored.")
    occurred_at: datetime | None = Field(
        None, description="When its source message was said, if the writer stated it."
    )


class RecallOut(HotOut):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "scope": "acme:alice:proj",
                    "retrieval_id": "ret_41d2…",
                    "audit_event_id": "evt_77b0…",
                    "candidates": [
                        {
                            "record_id": "mem_9a1e…",
                            "scope": "acme:alice:proj",
                            "content": "backup email: alice@example.org",
                            "fact_key": "backup email",
                            "trust_tier": "trusted_user",
                            "score": 0.82,
                            "confidence": 0.83,
                            "parts": {"lexical": 3.1, "semantic": 0.71, "trust": 1.0},
                            "rank": 1,
                            "above_threshold": True,
                            "returned": True,
                        }
                    ],
                    "returned_ids": ["mem_9a1e…"],
                    "abstained": False,
                    "abstain_reason": "",
                }
            ]
        }
    )

    scope: str
    retrieval_id: str
    audit_event_id: str
    candidates: list[RecallCandidateOut]
    returned_ids: list[str]
    min_confidence: float = 0.0
    abstained: bool = Field(
        False, description="true when no memory fits: nothing reached min_confidence"
    )
    abstain_reason: str = Field("", description="why nothing fits, in words (empty otherwise)")


class RecallBlockOut(HotOut):
    scope: str
    text: str
    record_ids: list[str]
    retrieval_id: str
    audit_event_id: str | None
    abstained: bool = Field(False, description="true when no memory fits (text is empty)")


class CaptureOut(Schema):
    role: str
    audit_event_id: str | None
    remembered: RememberOut | None


class PreviewRecordOut(Schema):
    record_id: str
    scope: str = Field(description="Where the record is stored (the scope, or one below it).")
    lineage: str = Field(
        description="The record's lineage (its smallest record ID): rows of one lineage are "
        "left out together or not at all."
    )
    matched: bool = Field(
        description="True when the request matched this record itself; false when it is "
        "purged as part of a match's lineage (an older or newer value of the same fact)."
    )
    status: str
    fact_key: str
    content: str
    source_type: str
    trust_tier: str
    episode_id: str | None
    created_at: str


class PreviewEpisodeOut(Schema):
    episode_id: str
    scope: str
    matched: bool = Field(
        description="True when the request matched or named this message itself; false when "
        "it is emptied because a record drawn from it is purged."
    )
    session_id: str
    turn_id: str
    source_type: str
    text: str
    created_at: str


class PreviewBelowOut(Schema):
    scope: str
    record_ids: list[str]
    episode_ids: list[str]
    count: int


class ForgetPreviewOut(Schema):
    scope: str
    mode: str
    record_ids: list[str]
    episode_ids: list[str]
    records: list[PreviewRecordOut]
    episodes: list[PreviewEpisodeOut] = Field(
        description="Every stored message the forget empties (its text is what it held)."
    )
    include_below: bool = Field(
        description="Whether the lists above hold the matches in the scopes below too."
    )
    below: list[PreviewBelowOut] = Field(
        description="The same words' matches in each scope below (forgotten only with "
        "include_below)."
    )
    count: int = Field(
        description="What the forget purges as rows: records, and messages beyond their "
        "sources. Above confirm_above, send it back as confirm_count."
    )
    confirm_above: int


class ForgetBundleOut(Schema):
    """``aetnaweb-forget-bundle-v1``: one deletion receipt per scope, bound by a closing event."""

    model_config = ConfigDict(extra="allow")

    format: str
    scope: str
    selector_sha256: str
    reference: str
    created_at: str
    receipts: list[dict[str, Any]]
    # The memory.forget_bundled event, its inclusion proof and the signed log head.
    closing_proof: dict[str, Any]
    bundle_sha256: str


class DeletionReceiptOut(Schema):
    """``aetnamem-deletion-receipt-v1``, passed through byte for byte (extra fields kept)."""

    model_config = ConfigDict(extra="allow")

    format: str
    subject_id: str
    created_at: str
    selector_sha256: str
    purged_record_ids: list[str]
    purged_episode_ids: list[str]
    audit_event_id: str
    audit_event_hash: str
    # The event, its Merkle inclusion proof and the signed log head (docs/auditors.md).
    log_proof: dict[str, Any]
    receipt_sha256: str


class ProposalRejectionOut(Schema):
    index: int
    reason: str
    message: str


class ProposeOut(Schema):
    scope: str
    accepted: list[StoredRecordOut]
    duplicates: list[dict[str, Any]]
    rejected: list[ProposalRejectionOut]


class LogActionOut(Schema):
    audit_event_id: str
    sequence: int
    event_hash: str
    subject_id: str
    event_type: str = Field(
        ...,
        description="The stored type: agent-logged events live under agent.log.* "
        "(agent.file_written is stored as agent.log.file_written).",
    )


class PersonaOut(Schema):
    scope: str
    text: str
    record_ids: list[str]
    persona_sha256: str
    audit_event_id: str


class SceneOut(Schema):
    session_id: str
    cursor: str = Field(description="Pass as after to list the sessions older than this one.")
    episodes: list[dict[str, Any]]
    records: list[dict[str, Any]]


class ScenesOut(Schema):
    scope: str
    items: list[SceneOut] = Field(description="One scene per session, newest first.")
    scenes: list[SceneOut] = Field(
        json_schema_extra={"deprecated": True},
        description="Deprecated: the same list as items (kept until API v2).",
    )
    next_cursor: str | None = Field(
        description="Pass as after for the next page; null on the last page."
    )


class RecordsQuery(Schema):
    scope: ScopeStr
    status: Literal["active", "quarantined", "superseded", "tombstoned"] | None = None
    source_type: Literal["user_message", "webpage", "tool_output", "derived"] | None = None
    trust_tier: Literal["trusted_user", "user_confirmed", "untrusted_content"] | None = None
    session_id: ContextStr | None = None
    text: str | None = Field(None, max_length=1000, description="A substring of the content.")
    include_descendants: bool = Field(
        False, description="Also list records stored below the scope (inside the token's reach)."
    )
    after: str | None = Field(
        None, max_length=20, pattern=r"^[0-9]+$", description="next_cursor of the previous page."
    )
    limit: int = Field(50, ge=1, le=MAX_PAGE)
    filters: str | None = Field(
        None,
        max_length=8192,
        description="The filter object recall takes in its body, as JSON text: "
        '{"metadata": {"customer_id": 42, "score": {"$gte": 3}}, "created_at": '
        '{"$gte": "2026-01-01T00:00:00Z"}}. For clients that cannot send the metadata and '
        "created_at parameters; not with them.",
        examples=['{"metadata": {"customer_id": 42}}'],
    )


class RecordOut(Schema):
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
    metadata: MetadataOut = {}
    created_at: str
    updated_at: str
    deleted_at: str | None
    expires_at: str | None = Field(
        None,
        description="When the record lapses (remember's expires_at); null: kept until forgotten.",
    )


class RecordListOut(Schema):
    scope: str
    items: list[RecordOut]
    next_cursor: str | None = Field(
        description="Pass as after for the next page; null on the last page."
    )


class EpisodeOut(Schema):
    episode_id: str
    scope: str
    session_id: str
    turn_id: str
    source_type: str
    text: str
    purged: bool
    created_at: str


class AuditEventOut(Schema):
    sequence: int
    event_id: str
    subject_id: str
    event_type: str
    created_at: str
    actor: str
    session_id: str | None
    turn_id: str | None
    record_id: str | None
    payload: str
    prev_hash: str | None
    event_hash: str


class RecordRecallOut(Schema):
    retrieval_id: str
    scope: str
    created_at: str
    rank: int
    score: float
    returned: bool


class RecordDetailOut(Schema):
    record: RecordOut
    supersedes_chain: list[RecordOut]
    superseded_by_chain: list[RecordOut]
    episode: EpisodeOut | None
    audit_events: list[AuditEventOut]
    recalls: list[RecordRecallOut]
