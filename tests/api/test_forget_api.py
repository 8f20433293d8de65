"""Forget over HTTP (issue 9): lineage, whole words, 4xx refusals that purge nothing."""

from __future__ import annotations

import json

import pytest

from audit.models import AuditEvent
from memory import services
from memory.models import Episode, Record

SCOPE = "acme:alice:proj"


def remember(api, text: str) -> dict:
    response = api.post("/memory/remember", {"scope": SCOPE, "text": text})
    # 201 when a record was stored, 200 when nothing new was (a duplicate, no fact)
    assert response.status_code == (201 if response.data["records"] else 200), response.content
    return response.data


@pytest.mark.django_db
def test_forget_purges_the_lineage_and_no_read_endpoint_shows_the_old_value(alice_api, make_api):
    # Given an email corrected once
    old = remember(alice_api, "My backup email is carol.old@example.com.")
    new = remember(alice_api, "Use carol.new@example.com as my backup email from now on.")
    old_id, new_id = old["records"][0]["record_id"], new["records"][0]["record_id"]
    # When previewed and forgotten by the user's words
    preview = alice_api.post(
        "/memory/forget/preview", {"scope": SCOPE, "utterance": "forget my backup email"}
    )
    assert preview.status_code == 200
    assert preview.data["record_ids"] == [old_id, new_id]
    assert [r["matched"] for r in preview.data["records"]] == [True, True]
    response = alice_api.post(
        "/memory/forget",
        {
            "scope": SCOPE,
            "utterance": "forget my backup email",
            "expected_record_ids": preview.data["record_ids"],
        },
    )
    # Then the receipt lists both values and both messages
    assert response.status_code == 200
    assert response.data["purged_record_ids"] == [old_id, new_id]
    assert sorted(response.data["purged_episode_ids"]) == sorted(
        [old["episode_id"], new["episode_id"]]
    )
    # And no read path, for a read-only token either, returns the old value
    reader = make_api("acme:alice:*", ["read"])
    pages = [
        reader.get(f"/memory/records/{old_id}"),
        reader.get(f"/memory/records/{new_id}"),
        reader.get("/memory/records", {"scope": SCOPE, "status": "superseded"}),
        reader.get("/memory/records", {"scope": SCOPE, "text": "carol"}),
        reader.get("/memory/records", {"scope": SCOPE}),
        reader.get("/memory/scenes", {"scope": SCOPE}),
    ]
    for page in pages:
        assert page.status_code == 200, page.content
        assert "carol." not in json.dumps(page.data)


@pytest.mark.django_db
def test_a_superseded_record_is_forgotten_by_id_over_the_api(alice_api):
    old = remember(alice_api, "My shell is bash.")["records"][0]["record_id"]
    new = remember(alice_api, "My shell is fish.")["records"][0]["record_id"]
    response = alice_api.post("/memory/forget", {"scope": SCOPE, "record_ids": [old]})
    assert response.status_code == 200
    assert response.data["purged_record_ids"] == [old, new]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field", "error"),
    [
        ({"utterance": "forget it please"}, "utterance", "vague_selector"),
        ({"utterance": "forget me"}, "utterance", "vague_selector"),
        ({"utterance": "forget everything"}, "utterance", "vague_selector"),
        ({"selector": "a"}, "selector", "vague_selector"),
        ({"selector": "eet"}, "selector", "nothing_matched"),
        ({"utterance": "forget my boat"}, "utterance", "nothing_matched"),
    ],
)
def test_vague_and_unmatched_forgets_are_400_and_purge_nothing(alice_api, body, field, error):
    remember(alice_api, "Remember that I hate loud meetings.")
    before = AuditEvent.objects.count()
    for path in ("/memory/forget/preview", "/memory/forget"):
        response = alice_api.post(path, {"scope": SCOPE, **body})
        assert response.status_code == 400, response.content
        assert (response.data["field"], response.data["error"]) == (field, error)
    assert (
        "say what to forget" in response.data["detail"]
        or "nothing matched" in (response.data["detail"])
    )
    # Only the forget (not the preview) records its refusal
    assert AuditEvent.objects.count() == before + 1
    assert AuditEvent.objects.order_by("-sequence").first().event_type == "memory.forget_rejected"
    assert set(Record.objects.values_list("status", flat=True)) == {"active"}
    assert not Episode.objects.filter(text="").exists()


@pytest.mark.django_db
def test_a_broad_forget_without_the_previewed_ids_is_400_preview_required(alice_api):
    for n in range(services.MAX_UNPREVIEWED_FORGET + 1):
        remember(alice_api, f"Remember that invoice {n} went to the auditor.")
    response = alice_api.post("/memory/forget", {"scope": SCOPE, "selector": "auditor"})
    assert response.status_code == 400
    assert response.data["error"] == "preview_required"
    assert "preview first" in response.data["detail"]
    assert not Record.objects.filter(status="tombstoned").exists()
    preview = alice_api.post("/memory/forget/preview", {"scope": SCOPE, "selector": "auditor"})
    response = alice_api.post(
        "/memory/forget",
        {
            "scope": SCOPE,
            "selector": "auditor",
            "expected_record_ids": preview.data["record_ids"],
            # Above ten the count is typed back as well (issue 32 item 5).
            "confirm_count": preview.data["count"],
        },
    )
    assert response.status_code == 200
    assert len(response.data["purged_record_ids"]) == services.MAX_UNPREVIEWED_FORGET + 1


@pytest.mark.django_db
def test_forget_that_i_avoid_beef_finds_the_user_wording(alice_api):
    beef = remember(alice_api, "I avoid beef.")["records"][0]["record_id"]
    response = alice_api.post(
        "/memory/forget", {"scope": SCOPE, "utterance": "forget that I avoid beef"}
    )
    assert response.status_code == 200
    assert response.data["purged_record_ids"] == [beef]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "raw",
    [
        '{"scope": "acme:alice:proj", "selector": "back\\ud800up email"}',
        '{"scope": "acme:alice:proj", "utterance": "forget my \\ud800"}',
        '{"scope": "acme:alice:proj", "selector": "backup\\u0000email"}',
    ],
)
def test_odd_text_in_a_forget_is_a_400_naming_the_field_and_purges_nothing(alice_api, raw):
    remember(alice_api, "My backup email is a@example.com.")
    for path in ("/memory/forget/preview", "/memory/forget"):
        response = alice_api.post(path, raw=raw)
        assert response.status_code == 400, response.content
        assert response.data["field"] in {"selector", "utterance"}
    assert set(Record.objects.values_list("status", flat=True)) == {"active"}
