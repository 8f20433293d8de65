"""Forget by episode ID and session over HTTP; word forgets reach stored messages (issue 29, item 5)."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from audit.receipts import verify_deletion_receipt
from memory import services
from memory.models import Episode
from tests.memory.conftest import snapshot

pytestmark = pytest.mark.django_db

S = "acme:alice:proj"
WIFI = "The wifi password at the office is tulip-42."


def served_texts(api) -> list[str]:
    scenes = api.get("/memory/scenes", {"scope": S}).data["scenes"]
    return [episode["text"] for scene in scenes for episode in scene["episodes"]]


def test_an_ignored_statement_is_forgotten_by_words_and_no_scene_serves_it(make_api):
    # Given an agent whose statement produced no record, served by scenes
    api = make_api("acme:alice:*")
    said = api.post("/memory/remember", {"scope": S, "text": WIFI, "session_id": "s-1"})
    assert said.status_code == 200 and said.data["records"] == []
    assert WIFI in served_texts(api)
    # When the user's words are previewed, then forgotten with the previewed lists
    preview = api.post(
        "/memory/forget/preview", {"scope": S, "utterance": "forget the wifi password"}
    )
    assert preview.status_code == 200
    assert preview.data["episodes"][0]["text"] == WIFI and preview.data["episodes"][0]["matched"]
    receipt = api.post(
        "/memory/forget",
        {
            "scope": S,
            "utterance": "forget the wifi password",
            "expected_record_ids": preview.data["record_ids"],
            "expected_episode_ids": preview.data["episode_ids"],
        },
    )
    # Then the receipt lists the message and the scenes no longer serve its words
    assert receipt.status_code == 200
    assert receipt.data["purged_episode_ids"] == [said.data["episode_id"]]
    assert "tulip" not in " ".join(served_texts(api))
    assert verify_deletion_receipt(receipt.data, principal=SYSTEM) == []


def test_forget_by_episode_id_and_by_session(make_api):
    api = make_api("acme:alice:*")
    first = api.post("/memory/remember", {"scope": S, "text": WIFI}).data
    services.remember(principal=SYSTEM, scope=S, text="My car is red.", session_id="s-2")
    # When one message is forgotten by ID and another by its session
    by_id = api.post("/memory/forget", {"scope": S, "episode_ids": [first["episode_id"]]})
    by_session = api.post("/memory/forget", {"scope": S, "session_id": "s-2"})
    # Then each receipt names what it purged
    assert by_id.status_code == 200 and by_id.data["purged_episode_ids"] == [first["episode_id"]]
    assert by_session.status_code == 200 and len(by_session.data["purged_record_ids"]) == 1
    assert [text for text in served_texts(api) if text] == []


@pytest.fixture
def rows():
    return snapshot


def test_refusals_name_the_field_and_purge_nothing(make_api, rows):
    api = make_api("acme:alice:*")
    services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    before = rows()
    unknown = api.post("/memory/forget", {"scope": S, "episode_ids": ["ep_" + "0" * 32]})
    assert (unknown.status_code, unknown.data["error"], unknown.data["field"]) == (
        400,
        "episode_not_found",
        "episode_ids",
    )
    nothing = api.post("/memory/forget", {"scope": S, "session_id": "s-9"})
    assert (nothing.status_code, nothing.data["error"]) == (400, "nothing_matched")
    both = api.post("/memory/forget", {"scope": S, "session_id": "s-1", "selector": "wifi"})
    assert (both.status_code, both.data["error"]) == (400, "ambiguous_request")
    empty = api.post("/memory/forget", {"scope": S, "session_id": ""})
    assert empty.status_code == 400
    after = rows()
    assert (after["episodes"], after["records"]) == (before["episodes"], before["records"])


def test_a_sibling_token_cannot_forget_the_message(make_api, rows):
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    sibling = make_api("acme:bob:*")
    before = rows()
    for body in ({"episode_ids": [said.episode_id]}, {"session_id": "s-1"}):
        assert sibling.post("/memory/forget", {"scope": S, **body}).status_code == 404
    assert rows() == before
    assert Episode.objects.get(episode_id=said.episode_id).text == WIFI


def test_the_openapi_document_lists_the_new_fields_and_the_forgotten_replay(make_api):
    document = make_api().get("/openapi.json").data
    forget = document["paths"]["/api/v1/memory/forget"]["post"]
    schema = document["components"]["schemas"]["ForgetIn"]["properties"]
    assert {"episode_ids", "session_id", "expected_episode_ids"} <= set(schema)
    assert "`idempotency_answer_forgotten`" in forget["responses"]["410"]["description"]
