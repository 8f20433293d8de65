"""API recall candidates carry the semantic score part (MCP: tests/mcp/test_mcp_server.py)."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from memory import services

BEEF = "I avoid beef at business dinners."


@pytest.mark.django_db
def test_api_candidates_carry_the_semantic_part(alice_api):
    services.remember(principal=SYSTEM, scope="acme:alice:proj", text=BEEF)
    # When recalled over HTTP by paraphrase
    response = alice_api.post(
        "/memory/recall", {"scope": "acme:alice:proj", "query": "Am I vegetarian?"}
    )
    assert response.status_code == 200
    parts = response.data["candidates"][0]["parts"]
    assert parts["semantic"] > 0 and set(parts) == {
        "weight",
        "relevance",
        "lexical",
        "semantic",
        "trust",
        "recency",
    }
