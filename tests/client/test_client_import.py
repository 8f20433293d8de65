"""Conversation import and remember's occurred_at through the client package (issue 30)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from aetnaweb_client import AsyncClient, BadRequest

from memory.models import Episode, Record
from tests.api.conftest import issue_token
from tests.client.conftest import SCOPE
from tests.memory.conftest import clean_index  # noqa: F401  (a fixture: empties the indexes)

pytestmark = pytest.mark.django_db(transaction=True)
MONDAY = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


@pytest.mark.usefixtures("clean_index")
def test_client_imports_a_conversation_and_remembers_with_a_time(alice):
    # Given turns with datetime times / When imported through the client
    result = alice.import_conversation(
        SCOPE,
        [
            {
                "text": "I collect stamps.",
                "speaker": "Alice",
                "occurred_at": MONDAY,
                "turn_id": "t1",
            },
            {"text": "Nice.", "role": "assistant", "turn_id": "t2"},
        ],
    )
    # Then each turn is answered, the user's kept word for word with its fact
    assert [t["role"] for t in result["turns"]] == ["user", "assistant"]
    assert [r["content"] for r in result["turns"][0]["records"]] == [
        "Alice (2 March 2026): I collect stamps.",
        "User collects stamps.",
    ]
    assert Record.objects.get(turn_id="t1", kind="turn").occurred_at == MONDAY
    # And remember sends a datetime as ISO 8601
    stored = alice.remember(SCOPE, "My car is red.", occurred_at=MONDAY)["records"][0]
    assert Record.objects.get(record_id=stored["record_id"]).occurred_at == MONDAY


@pytest.mark.usefixtures("clean_index")
def test_a_bad_turn_is_a_typed_error_naming_it_and_stores_nothing(alice):
    with pytest.raises(BadRequest) as bad:
        alice.import_conversation(SCOPE, [{"text": "hi"}, {"text": "x", "role": "robot"}])
    assert bad.value.field == "turns.1.role"
    assert not Episode.objects.exists()


@pytest.mark.usefixtures("clean_index")
def test_the_async_client_imports_too(server_url):
    token = issue_token("acme:alice:*")

    async def scenario() -> int:
        async with AsyncClient(server_url, token=token) as mem:
            result = await mem.import_conversation(SCOPE, [{"text": "I ski.", "speaker": "A"}])
            return int(result["records_stored"])

    assert asyncio.run(scenario()) == 2


@pytest.mark.usefixtures("clean_index")
def test_client_capture_sends_the_turns_time(alice):
    answer = alice.capture(SCOPE, "user", "My car is red.", occurred_at=MONDAY)
    stored = answer["remembered"]["records"][0]["record_id"]
    assert Record.objects.get(record_id=stored).occurred_at == MONDAY
