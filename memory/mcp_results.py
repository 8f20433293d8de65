"""How the memory tools answer over MCP: a compact text for the model, the full structure beside it.

A tool's result has two parts (MCP 2025-06-18 and later): ``content``, the
text most hosts put in front of the model, and ``structuredContent``, the
JSON a program reads, described by the tool's ``outputSchema``. The SDK's
default text is the structure again, pretty-printed (2,458 characters for a
recall of 5 hits); here the text says what the model needs in one line per
item (record ID, date, confidence and score, content, as ``recall_block``
prints it) and the structure stays whole in ``structuredContent``.

The ``*Output`` types below are the published output schemas: each names the
fields a client may rely on; the answer may carry more (the schemas allow
additional properties), exactly as the HTTP API answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Required, TypedDict

from mcp_types import CallToolResult, TextContent

# The longest a content excerpt gets in a list line; the structure holds the whole text.
LIST_EXCERPT_CHARS = 200


class RecallHitOutput(TypedDict):
    record_id: str
    scope: str
    content: str
    fact_key: str
    trust_tier: str
    score: float
    confidence: float
    rank: int
    returned: bool
    created_at: str | None
    occurred_at: str | None
    metadata: dict[str, Any]


class RecallOutput(TypedDict):
    scope: str
    retrieval_id: str
    audit_event_id: str
    candidates: list[RecallHitOutput]
    returned_ids: list[str]
    abstained: bool
    abstain_reason: str


class RecallBlockOutput(TypedDict):
    scope: str
    text: str
    record_ids: list[str]
    retrieval_id: str
    audit_event_id: str | None
    abstained: bool


class RecordOutput(TypedDict):
    record_id: str
    scope: str
    status: str
    content: str
    fact_key: str
    created_at: str
    supersedes: str | None
    superseded_by: str | None
    metadata: dict[str, Any]


class RecordListOutput(TypedDict):
    scope: str
    items: list[RecordOutput]
    next_cursor: str | None


class RecordDetailOutput(TypedDict):
    record: RecordOutput
    supersedes_chain: list[RecordOutput]
    superseded_by_chain: list[RecordOutput]
    episode: dict[str, Any] | None
    audit_events: list[dict[str, Any]]
    recalls: list[dict[str, Any]]


class ForgetPreviewOutput(TypedDict):
    scope: str
    mode: str
    record_ids: list[str]
    episode_ids: list[str]
    records: list[dict[str, Any]]
    episodes: list[dict[str, Any]]


class DeletionReceiptOutput(TypedDict):
    format: str
    subject_id: str
    created_at: str
    selector_sha256: str
    purged_record_ids: list[str]
    purged_episode_ids: list[str]
    audit_event_id: str
    audit_event_hash: str
    receipt_sha256: str


class ForgetOutput(TypedDict, total=False):
    """A forget's answer: one receipt (``subject_id`` ...) or, with include_below, a bundle
    (``scope``, ``receipts``, ``bundle_sha256``); ``format`` names which."""

    format: Required[str]
    subject_id: str
    scope: str
    created_at: str
    selector_sha256: str
    purged_record_ids: list[str]
    purged_episode_ids: list[str]
    audit_event_id: str
    audit_event_hash: str
    receipt_sha256: str
    receipts: list[DeletionReceiptOutput]
    bundle_sha256: str


# -- the texts -------------------------------------------------------------------------------


def _one_line(text: Any, limit: int | None = None) -> str:
    # Stored content may come from a promoted webpage: one line, and angle
    # brackets escaped, as recall_block does, so it cannot open a tag of its own.
    flat = " ".join(str(text).split()).replace("<", "&lt;").replace(">", "&gt;")
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _day(value: Any) -> str:
    return str(value)[:10] if value else ""


def _hit_line(hit: Mapping[str, Any], session_scope: str) -> str:
    said = hit.get("occurred_at")
    when = f"said {_day(said)}" if said else f"stored {_day(hit.get('created_at'))}"
    facts = [when, f"confidence {hit['confidence']:.2f}", f"score {hit['score']:.2f}"]
    if hit.get("scope") and hit["scope"] != session_scope:
        facts.append(f"from {hit['scope']}")
    return f"- [{hit['record_id']}] ({', '.join(facts)}) {_one_line(hit['content'])}"


def recall_text(data: Mapping[str, Any]) -> str:
    """One line per returned memory; "no memory fits" with the reason when it abstained."""
    returned = [hit for hit in data["candidates"] if hit.get("returned")]
    tail = f"(retrieval {data['retrieval_id']})"
    if not returned:
        reason = data.get("abstain_reason") or "no memory fits"
        return f"Abstained: {reason}. Do not answer from memory. {tail}"
    lines = [f"{_count(len(returned), 'memory', 'memories')}, best first {tail}:"]
    lines += [_hit_line(hit, data["scope"]) for hit in returned]
    return "\n".join(lines)


def block_text(data: Mapping[str, Any]) -> str:
    """The prompt block itself, or the abstention when nothing qualified."""
    if data.get("abstained"):
        return f"Abstained: no memory fits. (retrieval {data['retrieval_id']})"
    return str(data["text"])


def _record_line(record: Mapping[str, Any], limit: int | None = LIST_EXCERPT_CHARS) -> str:
    facts = [str(record["status"]), _day(record.get("created_at"))]
    if record.get("fact_key"):
        facts.append(f"key {_one_line(record['fact_key'], 60)}")
    if record.get("superseded_by"):
        facts.append(f"superseded by {record['superseded_by']}")
    return f"- [{record['record_id']}] ({', '.join(facts)}) {_one_line(record['content'], limit)}"


def records_text(data: Mapping[str, Any]) -> str:
    """One line per record of the page, then the cursor of the next page if there is one."""
    items = data["items"]
    if not items:
        return f"No records at {data['scope']}."
    lines = [f"{_count(len(items), 'record')} at {data['scope']}, newest first:"]
    lines += [_record_line(record) for record in items]
    if data.get("next_cursor"):
        lines.append(f"More: call again with after={data['next_cursor']}")
    return "\n".join(lines)


def record_detail_text(data: Mapping[str, Any]) -> str:
    """The record in full, what it replaced and what replaced it, its source and its use."""
    record = data["record"]
    lines = [f"Record at {record['scope']}:", _record_line(record, None)]
    if data["superseded_by_chain"]:
        lines.append("Replaced by (nearest first):")
        lines += [_record_line(r) for r in data["superseded_by_chain"]]
    if data["supersedes_chain"]:
        lines.append("Replaced (nearest first):")
        lines += [_record_line(r) for r in data["supersedes_chain"]]
    episode = data.get("episode")
    if episode:
        lines.append(f"Source message: {episode['episode_id']} ({_day(episode.get('created_at'))})")
    lines.append(
        f"Named by {_count(len(data['audit_events']), 'audit event')}; "
        f"considered by {_count(len(data['recalls']), 'recall')}."
    )
    return "\n".join(lines)


def preview_text(data: Mapping[str, Any]) -> str:
    """What a forget would purge, one line each, and how to confirm it."""
    records, episodes = data["records"], data["episodes"]
    lines = [
        f"A forget at {data['scope']} would purge {_count(len(records), 'record')} and "
        f"{_count(len(episodes), 'stored message')}:"
    ]
    for record in records:
        how = "matched" if record.get("matched") else "lineage"
        lines.append(
            f"- [{record['record_id']}] ({record['status']}, {how}) "
            f"{_one_line(record['content'], LIST_EXCERPT_CHARS)}"
        )
    lines += [f"- [{episode['episode_id']}] (stored message)" for episode in episodes]
    lines.append(
        "Confirm by calling forget with expected_record_ids="
        f"{json.dumps(list(data['record_ids']))} and expected_episode_ids="
        f"{json.dumps(list(data['episode_ids']))}."
    )
    return "\n".join(lines)


def forget_text(data: Mapping[str, Any]) -> str:
    """A forget's answer: one receipt, or a bundle of one receipt per scope (include_below)."""
    if "receipts" not in data:
        return receipt_text(data)
    receipts = data["receipts"]
    records = sum(len(r["purged_record_ids"]) for r in receipts)
    episodes = sum(len(r["purged_episode_ids"]) for r in receipts)
    lines = [
        f"Forgot {_count(records, 'record')} and {_count(episodes, 'stored message')} in "
        f"{_count(len(receipts), 'scope')} under {data['scope']}: bundle {data['bundle_sha256']}.",
    ]
    lines += [
        f"- {r['subject_id']}: {', '.join(r['purged_record_ids']) or 'no records'}; "
        f"receipt {r['receipt_sha256']}"
        for r in receipts
    ]
    lines.append("The full bundle (receipts and proofs) is in the structured content.")
    return "\n".join(lines)


def receipt_text(data: Mapping[str, Any]) -> str:
    """What was purged and the receipt's proof, by ID and hash."""
    records, episodes = data["purged_record_ids"], data["purged_episode_ids"]
    return "\n".join(
        [
            f"Forgot {_count(len(records), 'record')} and "
            f"{_count(len(episodes), 'stored message')} at {data['subject_id']}.",
            f"Records: {', '.join(records) or 'none'}",
            f"Messages: {', '.join(episodes) or 'none'}",
            f"Receipt {data['receipt_sha256']}; audit event {data['audit_event_id']} "
            f"(hash {data['audit_event_hash']}). The full receipt is in the structured content.",
        ]
    )


def compact_json(data: Any) -> str:
    """The structure itself in one line: the text of tools without a summary of their own."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


Summary = Callable[[Mapping[str, Any]], str]


def answer(data: dict[str, Any], summary: Summary) -> CallToolResult:
    """``data`` as a tool result: ``summary(data)`` as the text, ``data`` as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=summary(data))], structured_content=data
    )


def tool_result(data: Any) -> Any:
    """A JSON object as one-line JSON text plus structured content; anything else unchanged.

    What a tool without a summary of its own answers (a result the tool built
    itself, such as :func:`answer`'s, passes through).
    """
    if not isinstance(data, dict):
        return data
    return answer(data, compact_json)
