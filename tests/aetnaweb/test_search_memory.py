"""The top-bar search over what you may see (issue 33 item 2): records by content, fact
key, session ID and IDs, source messages by their text, across every scope the person may
read, with counts per scope, safe highlighting, filters and a link to each hit."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from aetnaweb import views
from aetnaweb.access import SYSTEM
from memory import selectors, services
from memory.errors import QueryError
from memory.models import Episode, Record
from tests.factories import access_matrix, login_as, make_operator

SCOPE = "acme:alice:proj"


@pytest.fixture
def world(db):
    """Records about pg-staging-3 in two of alice's scopes and in bob's; a chat session;
    a quarantined webpage fact; an ancestor's quarantined fact."""
    host = services.remember(
        principal=SYSTEM,
        scope=SCOPE,
        text="Remember that the database host is pg-staging-3.",
        session_id="chat-4711",
    )
    other = services.remember(
        principal=SYSTEM,
        scope="acme:alice:ops",
        text="Remember that pg-staging-3 runs Postgres 15.",
    )
    bob = services.remember(
        principal=SYSTEM, scope="acme:bob:proj", text="Remember that pg-staging-3 is bob's too."
    )
    editor = services.remember(principal=SYSTEM, scope=SCOPE, text="My editor is helix.")
    page = services.remember(
        principal=SYSTEM, scope=SCOPE, text="<webpage>My editor is pg-staging-3 vim.</webpage>"
    )
    ancestor = services.remember(
        principal=SYSTEM, scope="acme:*:*", text="<webpage>My wiki is pg-staging-3.</webpage>"
    )
    return {
        "host": host.records[0],
        "host_episode": host.episode_id,
        "other": other.records[0],
        "bob": bob.records[0],
        "editor": editor.records[0],
        "page": page.records[0],
        "ancestor": ancestor.records[0],
    }


@pytest.fixture
def alice(client, world):
    login_as(client, make_operator("ann", [("acme:alice:*", "viewer")]))
    return client


def search(client, q, **filters):
    return client.get(reverse("search"), {"q": q, **filters})


def record_ids(response) -> set[str]:
    return {record.record_id for record in response.context["found"].records}


def test_content_finds_records_in_every_scope_you_may_read(alice, world):
    # When ann (viewer of acme:alice:*) searches a host name
    response = search(alice, "pg-staging-3")
    # Then records in both of her scopes are found, bob's are not, nor the ancestor's
    # quarantined fact (an ancestor is read as a recall reads it: active records only)
    assert response.status_code == 200
    assert record_ids(response) == {
        world["host"].record_id,
        world["other"].record_id,
        world["page"].record_id,
    }
    html = response.content.decode()
    assert world["bob"].record_id not in html and world["ancestor"].record_id not in html
    # And each hit links to its record page, and the counts are per scope
    assert f'href="/memory/records/{world["host"].record_id}/"' in html
    assert response.context["found"].scope_counts == [(SCOPE, 2), ("acme:alice:ops", 1)]
    assert response.context["found"].counted == 3


def test_a_session_id_finds_its_records_and_messages(alice, world):
    response = search(alice, "chat-4711")
    assert record_ids(response) == {world["host"].record_id}
    assert [e.episode_id for e in response.context["found"].episodes] == [world["host_episode"]]


def test_a_fact_key_and_a_source_id_find_records(alice, world):
    assert world["editor"].record_id in record_ids(search(alice, "editor"))
    prefix = world["host_episode"][:10]
    assert world["host"].record_id in record_ids(search(alice, prefix))


def test_source_message_text_is_found(alice, world):
    response = search(alice, "database host")
    assert world["host_episode"] in [e.episode_id for e in response.context["found"].episodes]


def test_matches_are_highlighted_and_stored_text_is_escaped(alice, db):
    # Given a record whose content holds markup
    services.remember(
        principal=SYSTEM, scope=SCOPE, text="Remember that <b>zebra-42</b> is the build box."
    )
    # When it is found
    html = search(alice, "zebra-42").content.decode()
    # Then the match is marked and the markup is shown as text, never rendered
    assert "<mark>zebra-42</mark>" in html
    assert "&lt;b&gt;" in html and "<b>zebra" not in html


def test_highlight_cuts_long_text_around_the_match():
    text = "x" * 500 + " needle " + "y" * 500
    parts = views.highlighted(text, "NEEDLE", width=100)
    assert ("needle", True) in parts
    assert parts[0] == ("…", False) and parts[-1] == ("…", False)
    assert sum(len(p) for p, _ in parts) <= 104


def test_filters_by_status_scope_and_time(alice, world):
    # status: the quarantined webpage fact alone
    response = search(alice, "pg-staging-3", status="quarantined")
    assert record_ids(response) == {world["page"].record_id}
    # scope: one subtree
    response = search(alice, "pg-staging-3", scope="acme:alice:ops")
    assert record_ids(response) == {world["other"].record_id}
    # time: records stored in the last day (one is made older)
    Record.objects.filter(record_id=world["other"].record_id).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    Episode.objects.update(created_at=timezone.now() - timedelta(days=3))
    response = search(alice, "pg-staging-3", age="1")
    assert world["other"].record_id not in record_ids(response)
    assert world["host"].record_id in record_ids(response)
    assert response.context["found"].episodes == []


def test_a_filter_scope_out_of_reach_finds_nothing(alice, world):
    response = search(alice, "pg-staging-3", scope="acme:bob:proj")
    assert response.status_code == 200 and record_ids(response) == set()
    assert world["bob"].record_id not in response.content.decode()


@pytest.mark.parametrize("filters", [{"status": "lost"}, {"scope": "not a scope"}, {"age": "9"}])
def test_bad_filters_are_refused_with_a_reason(alice, world, filters):
    response = search(alice, "pg-staging-3", **filters)
    assert response.status_code == 400
    assert re.search(r'class="form-error" role="alert">[^<]+', response.content.decode())


def test_one_character_is_too_short_to_search(alice, world):
    with pytest.raises(QueryError):
        selectors.search_memory(SYSTEM, "p")
    assert search(alice, "p").status_code == 400


def test_counts_are_bounded(alice, world, monkeypatch):
    monkeypatch.setattr(selectors, "SEARCH_COUNT_CAP", 2)
    found = search(alice, "pg-staging-3").context["found"]
    assert found.capped and found.counted == 2


@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_search_memory_permission_matrix(client, world, case, django_assert_max_num_queries):
    # Given each kind of visitor, When they search the host name
    case.sign_in(client)
    with django_assert_max_num_queries(10):
        response = search(client, "pg-staging-3")
    # Then anonymous goes to log in, a grant elsewhere finds nothing of SCOPE, the right one finds it
    if case.grants is None:
        assert response.status_code == 302 and reverse("login") in response["Location"]
        return
    assert response.status_code == 200
    found = record_ids(response)
    assert (world["host"].record_id in found) is case.allowed
    assert world["host"].content not in response.content.decode() or case.allowed
    assert all(Record.objects.get(record_id=r).scope != SCOPE for r in found) or case.allowed
