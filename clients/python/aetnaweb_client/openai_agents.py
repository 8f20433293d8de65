"""Memory tools for the OpenAI Agents SDK (extra ``aetnaweb-client[openai-agents]``).

``memory_tools(client, scope)`` returns ``function_tool`` objects an ``Agent``
takes in ``tools=[...]``: ``remember``, ``recall``, ``forget_preview`` and
``forget``. The scope is fixed by the application, never chosen by the model,
so a prompt injection cannot steer writes into another scope; ``forget``
purges only the record IDs a preview showed (the model must preview first).
Each tool answers a short JSON string; an API refusal comes back as
``{"error": code, "field": ..., "detail": ...}`` so the model can correct itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents import FunctionTool, function_tool

from aetnaweb_client.client import Client
from aetnaweb_client.errors import ApiError


def _answer(call: Callable[[], Any]) -> str:
    try:
        return json.dumps(call(), ensure_ascii=False)
    except ApiError as exc:
        return json.dumps({"error": exc.code, "field": exc.field, "detail": exc.detail})


def memory_tools(
    client: Client, scope: str, *, session_id: str | None = None
) -> list[FunctionTool]:
    """The four memory tools, bound to ``client`` and exactly ``scope``."""

    def remember(text: str) -> str:
        """Remember something the user said about themselves or their work, in their words.

        Args:
            text: The user's statement, e.g. "My backup email is alice@example.org".
        """

        def run() -> dict[str, Any]:
            result = client.remember(scope, text, session_id=session_id)
            return {
                "stored": [
                    {"record_id": r["record_id"], "content": r["content"], "status": r["status"]}
                    for r in result["records"]
                ],
                "duplicate_of": result["duplicate_of"],
                "ignored": result["ignored"],
            }

        return _answer(run)

    def recall(query: str, limit: int = 5) -> str:
        """Recall the most relevant memories about the user for a question.

        Args:
            query: What you want to know, e.g. "backup email".
            limit: How many memories at most (1-50).
        """

        def run() -> dict[str, Any]:
            found = client.recall(scope, query, limit=limit, session_id=session_id)
            return {
                "memories": [
                    {
                        "record_id": c["record_id"],
                        "content": c["content"],
                        "score": c["score"],
                        "confidence": c["confidence"],
                    }
                    for c in found["candidates"]
                    if c["returned"]
                ],
                # "No memory fits" is an answer, not an empty list that looks like an error.
                "abstained": found["abstained"],
                "abstain_reason": found["abstain_reason"],
            }

        return _answer(run)

    def forget_preview(selector: str) -> str:
        """Show what forgetting would erase, without erasing anything. Call before forget.

        Args:
            selector: Words the memories to forget contain, e.g. "backup email".
        """

        def run() -> dict[str, Any]:
            preview = client.forget_preview(scope, selector=selector)
            return {
                "record_ids": preview["record_ids"],
                # Pass it to forget as confirm_count (needed above 10).
                "count": preview["count"],
                "records": [
                    {"record_id": r["record_id"], "content": r["content"]}
                    for r in preview["records"]
                ],
            }

        return _answer(run)

    def forget(selector: str, record_ids: list[str], count: int | None = None) -> str:
        """Erase memories the user asked to forget: exactly the record_ids forget_preview showed.

        Args:
            selector: The same words given to forget_preview.
            record_ids: The record_ids forget_preview returned.
            count: The count forget_preview returned (required when it is above 10).
        """

        def run() -> dict[str, Any]:
            receipt = client.forget(
                scope, selector=selector, expected_record_ids=record_ids, confirm_count=count
            )
            return {
                "purged_record_ids": receipt["purged_record_ids"],
                "receipt_sha256": receipt["receipt_sha256"],
            }

        return _answer(run)

    return [function_tool(tool) for tool in (remember, recall, forget_preview, forget)]
