"""The top-bar search (issue 13, loop 5): jump to an ID or the one match of its prefix,
list matches of a prefix, find scopes by part of a tenant or user name, never reveal
what the operator may not see."""

from __future__ import annotations

import pytest
from django.urls import reverse

from actions import services as action_services
from aetnaweb import views
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import services
from tests.actions.conftest import write_op
from tests.factories import access_matrix, login_as, make_operator

SCOPE = "acme:alice:proj"


@pytest.fixture
def world(db, tmp_path, settings, authorizing_messages):
    (tmp_path / "root").mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(tmp_path / "root")
    alice = services.remember(principal=SYSTEM, scope=SCOPE, text="My editor is helix.").records[0]
    bob = services.remember(
        principal=SYSTEM, scope="acme:bob:*", text="My editor is emacs."
    ).records[0]
    globex = services.remember(
        principal=SYSTEM, scope="globex:carol:*", text="My shell is zsh."
    ).records[0]
    recall = services.recall(principal=SYSTEM, scope=SCOPE, query="editor")
    txn = action_services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("notes.txt", "hi\n")], actor="agent:bot"
    )
    return {
        "alice": alice.record_id,
        "bob": bob.record_id,
        "globex": globex.record_id,
        "recall": recall.retrieval_id,
        "txn": txn.transaction_id,
    }


def search(client, q):
    return client.get(reverse("search"), {"q": q})


@pytest.fixture
def vic(client, world):
    login_as(client, make_operator("vic", [("acme:alice:*", "viewer")]))
    return client


@pytest.mark.django_db
def test_anonymous_is_sent_to_login(client, world):
    response = search(client, world["alice"])
    assert response.status_code == 302 and reverse("login") in response["Location"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("key", "page"),
    [("alice", "memory:record"), ("recall", "memory:retrieval"), ("txn", "actions:detail")],
)
def test_a_whole_id_jumps_to_its_page(vic, world, key, page, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        response = search(vic, world[key])
    assert response.status_code == 302
    assert response["Location"] == reverse(page, args=[world[key]])


@pytest.mark.django_db
def test_an_audit_event_id_jumps_and_a_prefix_of_one_match_too(vic, world):
    event = AuditEvent.objects.filter(subject_id=SCOPE).first()
    assert search(vic, event.event_id)["Location"] == reverse("audit:event", args=[event.event_id])
    # an ID pasted in capitals, with a zero-width space, still matches
    pasted = "\u200b" + world["alice"].upper()
    assert search(vic, pasted)["Location"] == reverse("memory:record", args=[world["alice"]])


@pytest.mark.django_db
def test_ids_out_of_reach_are_not_found(vic, world):
    for key in ("bob", "globex"):
        response = search(vic, world[key])
        assert response.status_code == 200
        assert "Nothing you may see has an ID starting with" in response.content.decode()
        assert response.context["hits"] == []


@pytest.mark.django_db
def test_a_prefix_lists_the_visible_matches_sorted(vic, world, monkeypatch):
    # Given many records in alice's project and one in bob's
    for n in range(30):
        services.remember(principal=SYSTEM, scope=SCOPE, text=f"My tool{n} is t{n}.")
    # When a prefix that every record shares is searched (the minimum lowered for the test)
    monkeypatch.setattr(views, "MIN_PREFIX_HEX", 0)
    response = search(vic, "mem_")
    # Then the first 20 visible matches are listed in ID order, bob's never
    found = [hit["id"] for hit in response.context["hits"]]
    assert len(found) == 20 and found == sorted(found)
    assert world["bob"] not in found and world["globex"] not in found
    assert all(hit["kind"] == "Record" for hit in response.context["hits"])


@pytest.mark.django_db
def test_a_too_short_prefix_says_what_to_type(vic, world):
    response = search(vic, "mem_ab")
    assert response.status_code == 400
    assert "Type at least 4 characters" in response.content.decode()


@pytest.mark.django_db
def test_scopes_are_found_by_part_of_a_tenant_or_user_name(client, world):
    login_as(client, make_operator("ann", [("acme:*:*", "viewer")]))
    by_user = search(client, "LIC").context["scopes"]
    assert by_user == [SCOPE]  # "lic" in alice, whatever the letter case
    by_tenant = search(client, "acm").context["scopes"]
    assert "acme:bob:*" in by_tenant and "globex:carol:*" not in by_tenant
    assert search(client, "glob").context["scopes"] == []


@pytest.mark.django_db
def test_a_whole_scope_jumps_to_its_page(vic, world):
    response = search(vic, SCOPE)
    assert response["Location"] == reverse("memory:scope", args=[SCOPE])


@pytest.mark.django_db
@pytest.mark.parametrize("q", ["<script>", "a%b", "\x00", "\ufffd", "x" * 500])
def test_odd_input_is_refused_with_a_reason_or_finds_nothing(vic, world, q):
    response = search(vic, q)
    assert response.status_code in (200, 400)
    assert "<script>" not in response.content.decode().replace("&lt;script&gt;", "")


@pytest.mark.django_db
def test_the_top_bar_has_the_search_box(vic):
    html = vic.get(reverse("home")).content.decode()
    assert 'role="search"' in html and 'name="q"' in html


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_search_permission_matrix(client, world, case, django_assert_max_num_queries):
    case.sign_in(client)
    with django_assert_max_num_queries(8):
        response = search(client, world["alice"])
    if case.grants is None:
        assert response.status_code == 302 and reverse("login") in response["Location"]
    elif case.allowed:
        assert response["Location"] == reverse("memory:record", args=[world["alice"]])
    else:
        # the search page answers everyone, and finds nothing out of reach
        assert response.status_code == 200 and response.context["hits"] == []


# -- a scope page with the scopes below it -------------------------------------------------


@pytest.mark.django_db
def test_a_scope_page_can_include_the_scopes_below(client, world, django_assert_max_num_queries):
    # Given a reviewer of acme:*:* and records at alice's user scope and project
    services.remember(principal=SYSTEM, scope="acme:alice:*", text="My timezone is Europe/Paris.")
    login_as(client, make_operator("rex", [("acme:*:*", "reviewer")]))
    url = reverse("memory:scope", args=["acme:alice:*"])
    # When the user scope's page is opened plainly, then with the scopes below
    plain = client.get(url)
    with django_assert_max_num_queries(25):
        below = client.get(url, {"below": "on"})
    # Then only the plain page lists exactly its own records, and offers forget ticks
    plain_ids = {r.record_id for r in plain.context["page"].items}
    below_ids = {r.record_id for r in below.context["page"].items}
    assert world["alice"] not in plain_ids and world["alice"] in below_ids
    assert plain_ids < below_ids and world["bob"] not in below_ids
    assert 'name="record_ids"' in plain.content.decode()
    html = below.content.decode()
    assert 'name="record_ids"' not in html  # forget acts at one scope: no mixed selection
    assert f'at <a href="{reverse("memory:scope", args=[SCOPE])}"' in html


@pytest.mark.django_db
def test_the_scopes_below_never_include_what_the_grant_does_not_reach(client, world):
    # Given a viewer of alice's project only, on the tenant page (readable as an ancestor)
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    response = client.get(reverse("memory:scope", args=["acme:*:*"]), {"below": "on"})
    ids = {r.record_id for r in response.context["page"].items}
    assert world["alice"] in ids and world["bob"] not in ids
