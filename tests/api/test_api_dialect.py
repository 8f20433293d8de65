"""One dialect across the API (issue 35 item 4): unknown body fields are refused naming
the field, on every JSON-body endpoint, and a refusal writes nothing."""

from __future__ import annotations

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
