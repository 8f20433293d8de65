"""POST /api/v1/memory/conversations/import and remember's occurred_at (issue 30)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from audit.models import AuditEvent
from memory.models import Episode, Record

S = "acme:alice:proj"
URL = "/memory/conversations/import"

pytestmark = pytest.mark.django_db


def counts() -> tuple[int, int, int]:
    return Record.objects.count(), Episode.objects.count(), AuditEvent.objects.count()


def test_an_import_stores_each_turn_and_answers_turn_by_turn(alice_api):
    # Given a user turn, an assistant turn and another person's turn
    body = {
        "scope": S,
        "turns": [
            {
                "text": "I'm allergic to peanuts.",
                "speaker": "Alice",
                "occurred_at": "2026-03-02T09:30:00Z",
                "turn_id": "t1",
                "session_id": "s1",
            },
            {"text": "Noted.", "role": "assistant", "turn_id": "t2", "session_id": "s1"},
            {"text": "She really is.", "role": "other", "speaker": "Bob", "turn_id": "t3"},
        ],
    }
    # When imported over HTTP
    response = alice_api.post(URL, body)
    # Then one answer per turn, in order: the user's turn kept with its fact, the
    # assistant's an episode only, Bob's kept word for word
    assert response.status_code == 200, response.data
    turns = response.data["turns"]
    assert [t["turn_id"] for t in turns] == ["t1", "t2", "t3"]
    assert [r["content"] for r in turns[0]["records"]] == [
        "Alice (2 March 2026): I'm allergic to peanuts.",
        "User is allergic to peanuts.",
    ]
    assert turns[1]["records"] == [] and turns[2]["records"][0]["content"] == "Bob: She really is."
    kept = Record.objects.get(turn_id="t1", kind="turn")
    assert kept.occurred_at == datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("turns", "field"),
    [
        ([{"text": "hi", "role": "robot"}], "turns.0.role"),
        ([{"text": "hi", "occurred_at": "2026-03-02T09:30:00"}], "turns.0.occurred_at"),
        ([{"text": "hi"}, {"text": ""}], "turns.1.text"),
        ([], "turns"),
    ],
)
def test_a_bad_turn_is_a_400_naming_it_and_nothing_is_stored(alice_api, turns, field):
    before = counts()
    response = alice_api.post(URL, {"scope": S, "turns": turns})
    assert response.status_code == 400
    assert response.data["field"] == field
    assert counts() == before


def test_a_token_without_write_or_for_another_scope_is_refused(make_api):
    reader = make_api("acme:alice:*", ["read"])
    bob = make_api("acme:bob:*")
    before = counts()
    assert reader.post(URL, {"scope": S, "turns": [{"text": "I ski."}]}).status_code == 403
    assert bob.post(URL, {"scope": S, "turns": [{"text": "I ski."}]}).status_code in (403, 404)
    assert counts() == before


def test_remember_accepts_occurred_at(alice_api):
    response = alice_api.post(
        "/memory/remember",
        {"scope": S, "text": "My car is red.", "occurred_at": "2026-03-02T09:30:00+00:00"},
    )
    assert response.status_code == 201, response.data
    record = Record.objects.get(record_id=response.data["records"][0]["record_id"])
    assert record.occurred_at == datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
