"""One dialect across the API (issue 35 item 4): unknown body fields are refused naming
the field, on every JSON-body endpoint, and a refusal writes nothing."""

from __future__ import annotations

import json

import pytest

from audit.models import AuditEvent
from memory.models import Episode, Record

S = "acme:alice:proj"
pytestmark = pytest.mark.django_db


def counts() -> tuple[int, int, int]:
    return Record.objects.count(), Episode.objects.count(), AuditEvent.objects.count()


def test_recall_refuses_top_k_naming_it(alice_api):
    # Given a stored fact
    alice_api.post("/memory/remember", {"scope": S, "text": "My editor is helix."})
    before = counts()
    # When recall is asked with top_k (the API's word is limit)
    response = alice_api.post("/memory/recall", {"scope": S, "query": "editor", "top_k": 3})
    # Then it is a 400 naming the field, and not even the recall was logged
    assert response.status_code == 400
    assert response.data["error"] == "unknown_field"
    assert response.data["field"] == "top_k"
    assert "top_k" in response.data["detail"]
    assert counts() == before


def test_remember_refuses_an_unknown_field_and_stores_nothing(alice_api):
    before = counts()
    response = alice_api.post(
        "/memory/remember", {"scope": S, "text": "My editor is helix.", "tags": ["x"]}
    )
    assert response.status_code == 400, response.data
    assert (response.data["error"], response.data["field"]) == ("unknown_field", "tags")
    assert counts() == before


def test_a_nested_unknown_field_is_named_with_its_path(alice_api):
    before = counts()
    response = alice_api.post(
        "/memory/remember/batch",
        {"scope": S, "items": [{"text": "My editor is helix."}, {"text": "x", "colour": "red"}]},
    )
    assert response.status_code == 400, response.data
    assert (response.data["error"], response.data["field"]) == ("unknown_field", "items.1.colour")
    assert counts() == before


def test_an_unknown_filter_key_is_refused(alice_api):
    response = alice_api.post(
        "/memory/recall", {"scope": S, "query": "editor", "filters": {"metdata": {"a": 1}}}
    )
    assert response.status_code == 400, response.data
    assert (response.data["error"], response.data["field"]) == ("unknown_field", "filters.metdata")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/memory/capture", {"scope": S, "role": "user", "content": "hi"}),
        ("/memory/forget", {"scope": S, "selector": "helix"}),
        ("/memory/forget/preview", {"scope": S, "selector": "helix"}),
        ("/memory/propose", {"scope": S, "facts": [{"content": "x", "evidence": ["ep_1"]}]}),
        ("/memory/log-action", {"scope": S, "event_type": "agent.done", "payload": {}}),
        ("/memory/recall-block", {"scope": S, "query": "editor"}),
        ("/memory/persona", {"scope": S}),
        ("/memory/conversations/import", {"scope": S, "turns": [{"text": "hi"}]}),
        ("/actions/stage", {"scope": S, "operations": []}),
    ],
)
def test_every_json_body_endpoint_refuses_an_unknown_field(alice_api, path, body):
    before = counts()
    response = alice_api.post(path, {**body, "surplus": 1})
    assert response.status_code == 400, (path, response.data)
    assert (response.data["error"], response.data["field"]) == ("unknown_field", "surplus")
    assert counts() == before


# -- richer filters over HTTP ----------------------------------------------------------


def _stored(api, text: str, metadata: dict) -> str:
    response = api.post(
        "/memory/remember", {"scope": S, "text": text, "force": True, "metadata": metadata}
    )
    assert response.status_code == 201, response.data
    return response.data["records"][0]["record_id"]


def _listed(api, query: str):
    response = api.client.get(
        f"/api/v1/memory/records?scope={S}&{query}", headers=api._headers(None)
    )
    response.data = response.json()
    return response


@pytest.fixture
def tiered(alice_api) -> dict[str, str]:
    return {
        "gold": _stored(alice_api, "Launch plan orion gold.", {"tier": "gold", "score": 9}),
        "silver": _stored(alice_api, "Launch plan orion silver.", {"tier": "silver", "score": 5}),
        "bronze": _stored(alice_api, "Launch plan orion bronze.", {"tier": "bronze", "score": 1}),
    }


def test_recall_takes_operators_and_a_created_at_range_in_its_body(alice_api, tiered):
    response = alice_api.post(
        "/memory/recall",
        {
            "scope": S,
            "query": "launch plan orion",
            "limit": 10,
            "min_confidence": 0,
            "filters": {
                "metadata": {"tier": {"$in": ["gold", "bronze"]}, "score": {"$gte": 2}},
                "created_at": {"$gte": "2000-01-01"},
            },
        },
    )
    assert response.status_code == 200, response.data
    assert {c["record_id"] for c in response.data["candidates"]} == {tiered["gold"]}


@pytest.mark.parametrize(
    "query",
    [
        "metadata.score.$gte=5&metadata.tier.$ne=%22gold%22",
        "metadata%5Bscore%5D%5B%24gte%5D=5&metadata%5Btier%5D%5B%24ne%5D=%22gold%22",
        "filters="
        + json.dumps({"metadata": {"score": {"$gte": 5}, "tier": {"$ne": "gold"}}}).replace(
            "#", "%23"
        ),
    ],
    ids=["dotted", "deepObject", "filters-json"],
)
def test_the_list_takes_operators_in_every_spelling(alice_api, tiered, query):
    response = _listed(alice_api, query)
    assert response.status_code == 200, response.data
    assert [r["record_id"] for r in response.data["items"]] == [tiered["silver"]]


def test_the_list_takes_a_created_at_range(alice_api, tiered):
    assert len(_listed(alice_api, "created_at.$gte=2000-01-01").data["items"]) == 3
    assert _listed(alice_api, "created_at%5B%24lt%5D=2000-01-01").data["items"] == []


@pytest.mark.parametrize(
    ("path", "body_filters", "field"),
    [
        ("recall", {"metadata": {"tier": {"$regex": "g"}}}, "filters.metadata.tier.$regex"),
        ("recall", {"metadata": {"score": {"$gte": "soon"}}}, "filters.metadata.score.$gte"),
        ("recall", {"created_at": {"$gte": "yesterday"}}, "filters.created_at.$gte"),
        ("recall-block", {"metadata": {"tier": {"$in": "gold"}}}, "filters.metadata.tier.$in"),
    ],
)
def test_a_bad_operator_is_a_400_naming_it_and_writes_nothing(
    alice_api, tiered, path, body_filters, field
):
    before = counts()
    response = alice_api.post(
        f"/memory/{path}", {"scope": S, "query": "launch", "filters": body_filters}
    )
    assert response.status_code == 400, response.data
    assert response.data["field"] == field
    assert response.data["error"] in ("metadata_error", "invalid_field")
    assert counts() == before


def test_an_unknown_list_parameter_is_refused_naming_it(alice_api, tiered):
    # (what a generated client that flattened metadata[tier]=... into tier=... would send)
    response = _listed(alice_api, "tier=%22gold%22")
    assert response.status_code == 400
    assert (response.data["error"], response.data["field"]) == ("unknown_field", "tier")
    response = _listed(alice_api, "metadata.tier.$like=%22g%22")
    assert (response.status_code, response.data["field"]) == (400, "metadata.tier.$like")
    response = _listed(alice_api, "filters=%7B%22metadata%22%3A1%7D&metadata.a=1")
    assert (response.status_code, response.data["field"]) == (400, "filters")


# -- one name for result lists ---------------------------------------------------------


def test_every_list_and_batch_answers_items_with_its_old_name_as_an_alias(alice_api):
    batch = alice_api.post(
        "/memory/remember/batch",
        {"scope": S, "items": [{"text": "My editor is helix.", "session_id": "s1"}]},
    )
    assert batch.status_code == 201, batch.data
    assert batch.data["items"] == batch.data["results"] and len(batch.data["items"]) == 1
    scenes = alice_api.get("/memory/scenes", {"scope": S})
    assert scenes.data["items"] == scenes.data["scenes"] and scenes.data["items"]
    holds = alice_api.get("/memory/legal-holds", {"scope": S})
    assert holds.status_code == 200, holds.data
    assert holds.data["items"] == holds.data["holds"]
    assert "items" in alice_api.get("/memory/records", {"scope": S}).data


def test_the_old_list_names_are_deprecated_in_the_document(client):
    schemas = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    for schema, old in (
        ("RememberBatchOut", "results"),
        ("ScenesOut", "scenes"),
        ("LegalHoldListOut", "holds"),
    ):
        assert "items" in schemas[schema]["required"], schema
        assert schemas[schema]["properties"][old]["deprecated"] is True, schema
