"""Forget, completed, in the dashboard (issue 32 item 5): the preview names the scopes below and
offers them, rows can be unticked, the count is typed above ten, a reference is kept; the bundle
page's permission matrix."""

from __future__ import annotations

import pytest
from django.urls import reverse

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import DeletionReceipt, Record, Status
from tests.factories import access_matrix, login_as, make_operator
from tests.memory.conftest import snapshot

USER = "acme:alice:*"
PROJECT = "acme:alice:proj"


def remember(scope: str, text: str) -> str:
    return services.remember(principal=SYSTEM, scope=scope, text=text).record_ids[0]


@pytest.fixture
def reviewer(client, db):
    login_as(client, make_operator("forget-reviewer", [(USER, "reviewer")]))
    return client


def post(client, data):
    return client.post(reverse("memory:forget", args=[USER]), data)


@pytest.mark.django_db
def test_the_preview_names_the_scopes_below_and_offers_to_include_them(reviewer):
    here = remember(USER, "Remember that the backup email is a@example.org.")
    below = remember(PROJECT, "Remember that the project backup email is p@example.org.")
    page = post(reviewer, {"step": "preview", "selector": "backup email"})
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="forget-below"' in text and PROJECT in text and below not in text
    assert here in text
    wide = post(reviewer, {"step": "preview", "selector": "backup email", "include_below": "on"})
    text = wide.content.decode()
    assert below in text and 'name="include_below" value="on"' in text


@pytest.mark.django_db
def test_an_unticked_row_stays_and_the_bundle_names_exactly_the_ticked(reviewer):
    # Given two matches here and one below, previewed with the scopes below
    kept = remember(USER, "Remember that the backup email is a@example.org.")
    gone = remember(USER, "Remember that the other backup email is b@example.org.")
    below = remember(PROJECT, "Remember that the project backup email is p@example.org.")
    preview = services.forget_preview(
        principal=SYSTEM, scope=USER, selector="backup email", include_below=True
    )
    # When applied with one row unticked and a reference
    response = post(
        reviewer,
        {
            "step": "apply",
            "selector": "backup email",
            "include_below": "on",
            "expected_record_ids": list(preview.record_ids),
            "expected_episode_ids": list(preview.episode_ids),
            "offered_record_ids": list(preview.record_ids),
            "keep_record_ids": [gone, below],
            "reference": "REQ-2041",
        },
    )
    # Then it redirects to the bundle page, which names the reference and both scopes
    assert response.status_code == 302, response.content
    page = reviewer.get(response["Location"])
    text = page.content.decode()
    assert page.status_code == 200 and "REQ-2041" in text
    assert USER in text and PROJECT in text
    assert Record.objects.get(record_id=kept).status == Status.ACTIVE
    assert {Record.objects.get(record_id=i).status for i in (gone, below)} == {Status.TOMBSTONED}
    receipt_ids = set(DeletionReceipt.objects.values_list("audit_event_id", flat=True))
    # And each receipt page shows the reference and links the bundle
    for event_id in receipt_ids:
        receipt_page = reviewer.get(reverse("memory:receipt", args=[event_id]))
        assert "REQ-2041" in receipt_page.content.decode()
    # And the download is the bundle as JSON
    closing = response["Location"].rstrip("/").split("/")[-1]
    download = reviewer.get(reverse("memory:forget_bundle_json", args=[closing]))
    assert download.json()["format"] == services.FORGET_BUNDLE_FORMAT


@pytest.mark.django_db
@pytest.mark.parametrize("typed", [None, "12"])
def test_above_ten_the_count_must_be_typed_and_a_wrong_one_purges_nothing(reviewer, typed):
    for n in range(11):
        remember(USER, f"Remember that ticket {n} is about the printer.")
    preview = services.forget_preview(principal=SYSTEM, scope=USER, selector="printer")
    page = post(reviewer, {"step": "preview", "selector": "printer"})
    assert 'id="confirm-count"' in page.content.decode()
    before = snapshot()
    data = {
        "step": "apply",
        "selector": "printer",
        "expected_record_ids": list(preview.record_ids),
        "offered_record_ids": list(preview.record_ids),
        "keep_record_ids": list(preview.record_ids),
    }
    if typed is not None:
        data["confirm_count"] = typed
    refused = post(reviewer, data)
    assert refused.status_code == 400
    assert 'id="forget-refused"' in refused.content.decode()
    expected = "type the count (11)" if typed is None else "count typed (12)"
    assert expected in refused.content.decode()
    assert snapshot() == before
    done = post(reviewer, {**data, "confirm_count": "11"})
    assert done.status_code == 302
    assert Record.objects.filter(status=Status.TOMBSTONED).count() == 11


@pytest.mark.django_db
def test_a_reference_that_is_not_one_printable_line_is_refused(reviewer):
    remember(USER, "Remember that the backup email is a@example.org.")
    preview = services.forget_preview(principal=SYSTEM, scope=USER, selector="backup email")
    before = snapshot()
    response = post(
        reviewer,
        {
            "step": "apply",
            "selector": "backup email",
            "expected_record_ids": list(preview.record_ids),
            "reference": "REQ\u00072041",
        },
    )
    assert response.status_code == 400
    assert snapshot() == before


def _bundle_event() -> str:
    remember(USER, "Remember that the backup email is a@example.org.")
    remember(PROJECT, "Remember that the project backup email is p@example.org.")
    preview = services.forget_preview(
        principal=SYSTEM, scope=USER, selector="backup email", include_below=True
    )
    bundle = services.forget(
        principal=SYSTEM,
        scope=USER,
        selector="backup email",
        include_below=True,
        expected_record_ids=list(preview.record_ids),
        expected_episode_ids=list(preview.episode_ids),
    )
    return str(bundle["closing_proof"]["event"]["event_id"])


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(USER, role="viewer"))
@pytest.mark.parametrize("name", ["memory:forget_bundle", "memory:forget_bundle_json"])
def test_bundle_page_permissions(client, case, name):
    event_id = _bundle_event()
    case.sign_in(client)
    response = client.get(reverse(name, args=[event_id]))
    case.check(response)


@pytest.mark.django_db
def test_a_bundle_is_not_found_for_an_operator_of_one_scope_below_only(client):
    # An operator of a sibling project reads the user scope as an ancestor, not the bundle
    event_id = _bundle_event()
    login_as(client, make_operator("zeus-viewer", [("acme:alice:zeus", "viewer")]))
    assert client.get(reverse("memory:forget_bundle", args=[event_id])).status_code == 404
