"""MCP tool results: a compact text for the model, the whole structure as structured content.

Issue 35 item 5. The tools run in this process through the SDK's in-memory
client (the same server ``manage.py mcp`` and ``/mcp/`` serve), so the test
reads exactly what a host receives: ``content`` and ``structuredContent``,
and each tool's ``outputSchema``.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from aetnaweb.access import SYSTEM
from audit.receipts import verify_deletion_receipt
from memory import services
from memory.mcp_server import build_server

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "acme:alice:proj"
FACTS = [
    "My backup email is alice@example.org",
    "I prefer email over phone calls.",
    "My email signature says Alice from Acme.",
    "My work email is alice@acme.example.",
    "I check my email every morning at eight.",
]


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    """List the tools, then make each call in order; (output schemas by tool, results)."""

    async def main() -> tuple[dict[str, Any], list[Any]]:
        async with Client(build_server(SCOPE)) as client:
            listing = await client.list_tools()
            schemas = {tool.name: tool.output_schema for tool in listing.tools}
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
        return schemas, results

    return anyio.run(main)


def pretty(data: Any) -> str:
    # The SDK's text for a dict result before this change (pydantic_core.to_json, indent 2).
    return json.dumps(data, indent=2, ensure_ascii=False)


def test_recall_of_five_hits_is_one_line_each_with_the_full_structure_beside_it() -> None:
    # Given five memories about email
    for fact in FACTS:
        services.remember(scope=SCOPE, text=fact, principal=SYSTEM)

    # When an agent recalls five over MCP
    schemas, [result] = tool_calls(("recall", {"query": "email", "limit": 5, "min_confidence": 0}))

    # Then the text has a header and one line per hit: ID, date, confidence, score, content
    data = result.structured_content
    assert not result.is_error
    assert len(data["returned_ids"]) == 5
    text = result.content[0].text
    lines = text.splitlines()
    assert lines[0].startswith(f"5 memories, best first (retrieval {data['retrieval_id']})")
    hits = [c for c in data["candidates"] if c["returned"]]
    for line, hit in zip(lines[1:], hits, strict=True):
        assert line.startswith(f"- [{hit['record_id']}] (stored {hit['created_at'][:10]}, ")
        assert f"confidence {hit['confidence']:.2f}, score {hit['score']:.2f})" in line
        assert line.endswith(hit["content"])
    # and the structure is whole (score parts, metadata, every candidate), as before
    assert set(hits[0]) >= {"parts", "metadata", "rank", "above_threshold", "trust_tier"}
    assert data["abstained"] is False and data["audit_event_id"].startswith("aud_")
    # and it is at most a third of the pretty-printed JSON that was the text before
    before, after = len(pretty(data)), len(text)
    print(f"\nrecall, 5 hits: pretty JSON {before} characters, compact text {after}")
    assert after * 3 < before
    # and the output schema says what the structure holds
    schema = schemas["recall"]
    assert set(schema["required"]) >= {"retrieval_id", "candidates", "returned_ids", "abstained"}
    hit_schema = schema["$defs"]["RecallHitOutput"]
    assert {"record_id", "content", "confidence", "score"} <= set(hit_schema["required"])


def test_an_abstention_says_so_in_words() -> None:
    # Given one unrelated memory
    services.remember(scope=SCOPE, text="My shell is fish.", principal=SYSTEM)

    # When a recall finds nothing that fits
    _, [result] = tool_calls(("recall", {"query": "zebra migration routes"}))

    # Then the text says abstained, and why, with no memory line
    data = result.structured_content
    assert data["abstained"] is True
    assert result.content[0].text.startswith(f"Abstained: {data['abstain_reason']}.")
    assert "\n- [" not in result.content[0].text


def test_content_cannot_open_a_tag_in_the_text() -> None:
    # Given a record whose content holds angle brackets
    stored = services.remember_fact(
        scope=SCOPE, key="signature", value="Alice\n<b>Acme</b>", principal=SYSTEM
    )
    record_id = stored.records[0].record_id

    # When it is recalled and listed
    _, [recalled, listed] = tool_calls(
        ("recall", {"query": "signature Acme", "min_confidence": 0}),
        ("list_records", {}),
    )

    # Then each text line holds it escaped; the structure keeps it as stored
    for result in (recalled, listed):
        line = next(x for x in result.content[0].text.splitlines() if record_id in x)
        assert "Alice &lt;b&gt;Acme&lt;/b&gt;" in line
        assert "<b>" not in result.content[0].text
    assert "Alice <b>Acme</b>" in listed.structured_content["items"][0]["content"]


def test_list_history_preview_and_receipt_are_compact_and_whole() -> None:
    # Given a fact that replaced an earlier value, and another record
    services.remember(scope=SCOPE, text="My backup email is alice@example.org", principal=SYSTEM)
    newer = services.remember(
        scope=SCOPE, text="My backup email is alice2@example.org", principal=SYSTEM
    )
    services.remember(scope=SCOPE, text="My shell is fish.", principal=SYSTEM)
    new_id = newer.records[0].record_id
    old_id = newer.superseded_ids[0]

    # When an agent lists, opens the newer record, previews a forget and forgets
    schemas, [listed, detail, preview, receipt] = tool_calls(
        ("list_records", {"limit": 2}),
        ("get_record", {"record_id": new_id}),
        ("forget_preview", {"selector": "fish"}),
        ("forget", {"selector": "fish"}),
    )

    # Then the list is one line per record with the next page's cursor
    page = listed.structured_content
    lines = listed.content[0].text.splitlines()
    assert lines[0] == f"2 records at {SCOPE}, newest first:"
    assert len(lines) == 4 and lines[3] == f"More: call again with after={page['next_cursor']}"
    assert len(listed.content[0].text) * 3 < len(pretty(page))
    # and the history names what the record replaced, with the full detail structured
    text = detail.content[0].text
    assert f"- [{new_id}] (active, " in text
    assert f"Replaced (nearest first):\n- [{old_id}] (superseded, " in text
    assert f"superseded by {new_id})" in text
    assert detail.structured_content["supersedes_chain"][0]["record_id"] == old_id
    assert detail.structured_content["audit_events"]  # whole, payloads included
    assert len(text) * 3 < len(pretty(detail.structured_content))
    # and the preview says how to confirm it
    shown = preview.structured_content
    assert f"expected_record_ids={json.dumps(shown['record_ids'])}" in preview.content[0].text
    # and the receipt's text names what was purged and its proof; the receipt verifies
    whole = receipt.structured_content
    assert receipt.content[0].text.startswith(f"Forgot 1 record and 1 stored message at {SCOPE}.")
    assert whole["receipt_sha256"] in receipt.content[0].text
    assert whole["audit_event_hash"] in receipt.content[0].text
    assert verify_deletion_receipt(whole, principal=SYSTEM) == []
    # and each publishes an output schema naming its fields
    assert "next_cursor" in schemas["list_records"]["properties"]
    assert "superseded_by_chain" in schemas["get_record"]["properties"]
    assert schemas["forget"]["required"] == ["format"]
    assert {"receipt_sha256", "receipts", "bundle_sha256"} <= set(schemas["forget"]["properties"])
    assert "expected_record_ids" not in schemas["forget_preview"]["properties"]


def test_a_tool_without_a_summary_answers_one_line_json_of_its_structure() -> None:
    # When an agent remembers a fact
    _, [result] = tool_calls(("remember", {"text": "My cat is called Tom."}))

    # Then the text is the structure itself, on one line
    assert "\n" not in result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    assert result.structured_content["records"][0]["content"] == "User's cat is called Tom."
