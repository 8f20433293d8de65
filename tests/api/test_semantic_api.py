"""API recall candidates carry the semantic score part (MCP: tests/mcp/test_mcp_server.py)."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from memory import ranking, services

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
        "lexical_rank",
        "word_share",
        "semantic",
        "semantic_rank",
        "context",
        "trust",
        "recency",
    }
    # And the candidate carries its calibrated confidence, the relevance
    candidate = response.data["candidates"][0]
    assert 0 <= candidate["confidence"] <= 1 and candidate["confidence"] == parts["relevance"]


@pytest.mark.django_db
def test_api_says_no_memory_fits_and_writes_only_the_retrieval_log(alice_api):
    # Given a fact about food
    services.remember(principal=SYSTEM, scope="acme:alice:proj", text=BEEF)
    from audit.models import AuditEvent
    from memory.models import Record

    records = Record.objects.count()
    # When asked something never stored
    response = alice_api.post(
        "/memory/recall", {"scope": "acme:alice:proj", "query": "What is my blood type?"}
    )
    # Then the answer is an explicit abstention with a reason, nothing returned
    assert response.status_code == 200
    assert response.data["abstained"] is True and response.data["returned_ids"] == []
    assert response.data["abstain_reason"].startswith("no memory fits")
    assert response.data["min_confidence"] == ranking.DEFAULT_MIN_CONFIDENCE
    # And the recall block abstains the same way, injecting nothing
    block = alice_api.post(
        "/memory/recall-block", {"scope": "acme:alice:proj", "query": "What is my blood type?"}
    )
    assert block.data["abstained"] is True and block.data["text"] == ""
    assert not AuditEvent.objects.filter(event_type="memory.context_injected").exists()
    assert Record.objects.count() == records


@pytest.mark.django_db
def test_api_min_confidence_is_checked_and_a_bad_one_writes_nothing(alice_api):
    from memory.models import RetrievalEvent

    before = RetrievalEvent.objects.count()
    response = alice_api.post(
        "/memory/recall",
        {"scope": "acme:alice:proj", "query": "beef", "min_confidence": 1.5},
    )
    assert response.status_code in (400, 422)
    assert RetrievalEvent.objects.count() == before
    # And min_confidence 0 returns a weak paraphrase the default threshold holds back
    services.remember(principal=SYSTEM, scope="acme:alice:proj", text=BEEF)
    ask = {"scope": "acme:alice:proj", "query": "Am I vegetarian?"}
    held_back = alice_api.post("/memory/recall", ask)
    weak = alice_api.post("/memory/recall", {**ask, "min_confidence": 0})
    assert held_back.data["candidates"][0]["confidence"] < ranking.DEFAULT_MIN_CONFIDENCE
    assert held_back.data["abstained"] is True
    assert weak.status_code == 200 and weak.data["abstained"] is False
