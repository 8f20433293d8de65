"""Forget, completed over HTTP (issue 32 item 5): the scopes below, rows left out, the count
typed back above ten and a reference; each refusal a 400 with a code and a field, nothing purged."""

from __future__ import annotations

import pytest

from memory import services
from memory.models import ForgetBundle, Record
from tests.memory.conftest import snapshot

USER = "acme:alice:*"
PROJECT = "acme:alice:proj"


def remember(api, scope: str, text: str) -> str:
    response = api.post("/memory/remember", {"scope": scope, "text": text})
    assert response.status_code == 201, response.content
    return response.data["records"][0]["record_id"]


@pytest.mark.django_db
def test_the_preview_lists_the_scopes_below_and_include_below_returns_a_bundle(alice_api):
    # Given the words at the user scope and at a project below it
    here = remember(alice_api, USER, "Remember that the backup email is a@example.org.")
    below = remember(alice_api, PROJECT, "Remember that the project backup email is p@example.org.")
    # When previewed at the user scope
    preview = alice_api.post("/memory/forget/preview", {"scope": USER, "selector": "backup email"})
    # Then the project's match is named below, outside the lists
    assert preview.status_code == 200
    assert preview.data["record_ids"] == [here]
    assert preview.data["below"] == [
        {
            "scope": PROJECT,
            "record_ids": [below],
            "episode_ids": preview.data["below"][0]["episode_ids"],
            "count": 1,
        }
    ]
    wide = alice_api.post(
        "/memory/forget/preview",
        {"scope": USER, "selector": "backup email", "include_below": True},
    )
    assert sorted(wide.data["record_ids"]) == sorted([here, below]) and wide.data["count"] == 2
    # When forgotten with include_below and a reference
    response = alice_api.post(
        "/memory/forget",
        {
            "scope": USER,
            "selector": "backup email",
            "include_below": True,
            "expected_record_ids": wide.data["record_ids"],
            "expected_episode_ids": wide.data["episode_ids"],
            "reference": "REQ-9",
        },
    )
    # Then the answer is the bundle, one receipt per scope
    assert response.status_code == 200, response.content
    assert response.data["format"] == services.FORGET_BUNDLE_FORMAT
    assert response.data["reference"] == "REQ-9"
    assert sorted(r["subject_id"] for r in response.data["receipts"]) == sorted([PROJECT, USER])
    assert ForgetBundle.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("extra", "status", "code", "field"),
    [
        ({}, 400, "forget_count_not_confirmed", "confirm_count"),
        ({"confirm_count": 12}, 400, "forget_count_not_confirmed", "confirm_count"),
        ({"confirm_count": -1}, 400, "invalid_field", "confirm_count"),
        ({"confirm_count": 11, "reference": "x" * 201}, 400, "invalid_field", "reference"),
        ({"confirm_count": 11, "reference": "REQ\n9"}, 400, "invalid_field", "reference"),
        (
            {"confirm_count": 11, "exclude_record_ids": ["mem_" + "0" * 32]},
            400,
            "forget_selection_error",
            "exclude_record_ids",
        ),
    ],
)
def test_each_refusal_is_a_400_naming_the_field_and_purges_nothing(
    alice_api, extra, status, code, field
):
    # Given eleven matching records, previewed
    for n in range(11):
        remember(alice_api, PROJECT, f"Remember that ticket {n} is about the printer.")
    preview = alice_api.post("/memory/forget/preview", {"scope": PROJECT, "selector": "printer"})
    assert preview.data["count"] == 11 and preview.data["confirm_above"] == 10
    before = snapshot()
    # When forgotten with a missing or wrong count, a bad reference or an unknown row left out
    response = alice_api.post(
        "/memory/forget",
        {
            "scope": PROJECT,
            "selector": "printer",
            "expected_record_ids": preview.data["record_ids"],
            **extra,
        },
    )
    # Then refused with the code and the field, and nothing written
    assert response.status_code == status, response.content
    body = response.json()
    assert body["error"] == code and body["field"] == field
    assert snapshot() == before
    # And with the count right it goes
    done = alice_api.post(
        "/memory/forget",
        {
            "scope": PROJECT,
            "selector": "printer",
            "expected_record_ids": preview.data["record_ids"],
            "confirm_count": 11,
        },
    )
    assert done.status_code == 200 and len(done.data["purged_record_ids"]) == 11


@pytest.mark.django_db
def test_a_row_left_out_over_http_stays(alice_api):
    kept = remember(alice_api, PROJECT, "Remember that the backup email is a@example.org.")
    gone = remember(alice_api, PROJECT, "Remember that the other backup email is b@example.org.")
    preview = alice_api.post(
        "/memory/forget/preview", {"scope": PROJECT, "selector": "backup email"}
    )
    response = alice_api.post(
        "/memory/forget",
        {
            "scope": PROJECT,
            "selector": "backup email",
            "expected_record_ids": preview.data["record_ids"],
            "exclude_record_ids": [kept],
        },
    )
    assert response.status_code == 200 and response.data["purged_record_ids"] == [gone]
    assert Record.objects.get(record_id=kept).content
