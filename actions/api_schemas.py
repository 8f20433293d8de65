"""Request and response bodies of the guarded-actions API (``/api/v1/actions/``)."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field

from actions.limits import MAX_PAGE
from aetnaweb.api import BodyIn, ContextStr, ScopeStr

EXAMPLE_DIGEST = hashlib.sha256(b"msg-1").hexdigest()
OperationKey = Annotated[str, Field(min_length=1, max_length=200)]
TransactionState = Literal[
    "draft",
    "staged",
    "awaiting_approval",
    "approved",
    "committing",
    "committed",
    "aborted",
    "compensating",
    "compensated",
    "partial",
    "uncertain",
    "recovery_required",
]


class EvidenceIn(BodyIn):
    kind: str = Field(..., min_length=1, max_length=100, examples=["episode"])
    ref_id: str = Field(..., min_length=1, max_length=200)
    digest: str = Field(
        ..., min_length=64, max_length=64, description="SHA-256 (hex) of the evidence."
    )
    relation: Literal["informed_by", "authorized_by"] = "informed_by"
    trust_tier: str = Field("untrusted_content", min_length=1, max_length=40)
    attested: bool = False


class OperationIn(BodyIn):
    key: OperationKey
    adapter: str = Field(..., min_length=1, max_length=100, examples=["filesystem"])
    operation: str = Field(..., min_length=1, max_length=100, examples=["write_text"])
    arguments: dict[str, Any] = Field(
        default_factory=dict, examples=[{"path": "notes/todo.txt", "content": "hello\n"}]
    )
    evidence: list[EvidenceIn] = Field(default_factory=list, max_length=100)
    depends_on: list[OperationKey] = Field(default_factory=list, max_length=100)


class StageIn(BodyIn):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "scope": "acme:alice:proj",
                    "mode": "enforce",
                    "operations": [
                        {
                            "key": "w1",
                            "adapter": "filesystem",
                            "operation": "write_text",
                            "arguments": {"path": "todo.txt", "content": "buy milk\n"},
                            "evidence": [
                                {
                                    "kind": "message",
                                    "ref_id": "msg-1",
                                    "digest": EXAMPLE_DIGEST,
                                    "relation": "authorized_by",
                                    "trust_tier": "trusted_user",
                                    "attested": True,
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    )

    scope: ScopeStr
    operations: list[OperationIn] = Field(..., min_length=1, max_length=100)
    mode: Literal["observe", "preview", "enforce"] = Field(
        "enforce",
        description="enforce waits for a person's approval; observe and preview can never execute.",
    )
    session_id: ContextStr | None = None
    turn_id: ContextStr | None = None


class WorldPatchOut(Schema):
    transaction_id: str
    subject_id: str
    mode: str
    state: str
    plan_version: int
    plan_hash: str
    operations: list[dict[str, Any]]
    created_at: str


class TransactionsQuery(Schema):
    scope: ScopeStr | None = Field(
        None, description="Only this subtree (inside the token's reach)."
    )
    state: list[TransactionState] | None = Field(None, description="Only these states.")
    after: str | None = Field(
        None, max_length=64, description="next_cursor of the previous page (a transaction ID)."
    )
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class TransactionsOut(Schema):
    items: list[dict[str, Any]]
    next_cursor: str | None = Field(
        description="Pass as after for the next page; null on the last page."
    )
    next_after: str | None = Field(
        json_schema_extra={"deprecated": True},
        description="Deprecated: the same value as next_cursor (kept until API v2).",
    )


class VerificationOut(Schema):
    valid: bool
    transaction_id: str
    state: str | None = None
    plan_hash: str | None = None
    failures: list[str]
