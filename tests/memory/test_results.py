"""What the memory verbs return, as JSON callers get it (``as_dict``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from memory.models import Status, TrustTier
from memory.services.results import (
    RecallCandidate,
    RecallResult,
    RememberResult,
    StoredRecord,
    _AsDict,
)


def _candidate(record_id: str, *, returned: bool) -> RecallCandidate:
    return RecallCandidate(
        record_id=record_id,
        scope="acme:alice:proj",
        content="Alice avoids beef.",
        fact_key="diet",
        trust_tier=TrustTier.TRUSTED_USER,
        score=0.82,
        parts={"lexical": 0.0, "semantic": 0.61},
        rank=1,
        above_threshold=True,
        returned=returned,
        metadata={"channel": "email"},
    )


def test_a_recall_result_becomes_plain_json_data():
    # Given a recall result with an enum member, a tuple and nested dicts
    result = RecallResult(
        scope="acme:alice:proj",
        retrieval_id="ret_1",
        audit_event_id="aud_1",
        candidates=(_candidate("mem_1", returned=True), _candidate("mem_2", returned=False)),
    )
    # When it is turned into a dict
    data = result.as_dict()
    # Then every value is plain JSON: enums as their values, tuples as lists
    assert data == {
        "scope": "acme:alice:proj",
        "retrieval_id": "ret_1",
        "audit_event_id": "aud_1",
        "candidates": [
            {
                "record_id": record_id,
                "scope": "acme:alice:proj",
                "content": "Alice avoids beef.",
                "fact_key": "diet",
                "trust_tier": "trusted_user",
                "score": 0.82,
                "parts": {"lexical": 0.0, "semantic": 0.61},
                "rank": 1,
                "above_threshold": True,
                "returned": returned,
                "metadata": {"channel": "email"},
                "created_at": None,
                "occurred_at": None,
                "confidence": 0.0,
            }
            for record_id, returned in (("mem_1", True), ("mem_2", False))
        ],
        "min_confidence": 0.0,
        "returned_ids": ["mem_1"],
        "abstained": False,
        "abstain_reason": "",
    }
    assert type(data["candidates"][0]["trust_tier"]) is str
    assert json.loads(json.dumps(data)) == data


def test_the_dict_is_a_copy_the_caller_may_change():
    # Given a result holding a candidate's parts and metadata
    candidate = _candidate("mem_1", returned=True)
    data = candidate.as_dict()
    # When the caller changes the dict it got
    data["parts"]["lexical"] = 1.0
    data["metadata"]["channel"] = "sms"
    # Then the result itself is unchanged
    assert candidate.parts["lexical"] == 0.0
    assert candidate.metadata["channel"] == "email"


def test_nested_results_and_datetimes_become_json():
    # Given a result nesting another result, and any result holding a datetime
    stored = StoredRecord("mem_1", Status.ACTIVE, "diet", "Alice avoids beef.", ("mem_0",))
    remembered = RememberResult(
        scope="acme:alice:proj",
        episode_id="ep_1",
        source_type="user_message",
        trust_tier=TrustTier.TRUSTED_USER,
        records=(stored,),
        superseded_ids=("mem_0",),
        duplicate_of=(),
        ignored=False,
    )

    @dataclass(frozen=True)
    class Stamped(_AsDict):
        at: datetime
        inner: StoredRecord

    # Then nested dataclasses become dicts, and datetimes ISO 8601 text
    assert remembered.as_dict()["records"] == [
        {
            "record_id": "mem_1",
            "status": "active",
            "fact_key": "diet",
            "content": "Alice avoids beef.",
            "superseded_ids": ["mem_0"],
            "metadata": {},
        }
    ]
    stamped = Stamped(datetime(2026, 12, 2, 17, 0, tzinfo=UTC), stored).as_dict()
    assert stamped["at"] == "2026-12-02T17:00:00+00:00"
    assert stamped["inner"]["status"] == "active"
