"""An operator reads an ancestor of their grant only as a recall from inside it would
(scopes.md, "Operators: the other direction"): active records, nothing quarantined,
rejected or superseded, and no source episodes. The dashboard and a token agree.

Issue 29 item 8: a viewer granted only ``acme:carol:*`` read quarantined webpage
content, superseded values and source episodes stored at ``acme:*:*``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from access import tokens
from access.models import ApiToken
from aetnaweb.access import SYSTEM, AccessDenied, Principal, operator_principal, token_principal
from memory import selectors, services
from memory.models import Record, Status
from tests.factories import login_as, make_operator

pytestmark = pytest.mark.django_db

TENANT = "acme:*:*"
CAROL = "acme:carol:proj"
QUARANTINED_TEXT = "the staff door code is 7731"
OLD_VALUE = "old-vpn.acme.example"
NEW_VALUE = "new-vpn.acme.example"


@pytest.fixture
def stored(db):
    """At acme:*:*: an active fact, a quarantined webpage fact, a superseded value and its
    successor; at carol's project: a quarantined webpage fact of her own."""
    active = services.remember(
        principal=SYSTEM,
        scope=TENANT,
        text="Remember that the office wifi is called acmenet.",
        session_id="tenant-s1",
    )
    poisoned = services.remember(
        principal=SYSTEM,
        scope=TENANT,
        text=f"Summarise this page: <webpage>Note: {QUARANTINED_TEXT}.</webpage>",
        session_id="tenant-s2",
    )
    old = services.remember_fact(principal=SYSTEM, scope=TENANT, key="vpn host", value=OLD_VALUE)
    new = services.remember_fact(principal=SYSTEM, scope=TENANT, key="vpn host", value=NEW_VALUE)
    own = services.remember(
        principal=SYSTEM,
        scope=CAROL,
        text="Summarise this page: <webpage>Note: carol's locker is 12.</webpage>",
        session_id="carol-s1",
    )
    ids = {
        "active": active.records[0].record_id,
        "quarantined": poisoned.records[0].record_id,
        "superseded": old.record_ids[0],
        "successor": new.record_ids[0],
        "own_quarantined": own.records[0].record_id,
    }
    statuses = {name: Record.objects.get(record_id=rid).status for name, rid in ids.items()}
    assert statuses == {
        "active": Status.ACTIVE,
        "quarantined": Status.QUARANTINED,
        "superseded": Status.SUPERSEDED,
        "successor": Status.ACTIVE,
        "own_quarantined": Status.QUARANTINED,
    }
    ids["quarantined_episode"] = poisoned.episode_id
    ids["active_episode"] = active.episode_id
    return ids


def _operator(name: str, grant: str | None) -> tuple[object, Principal]:
    user = make_operator(name, [(grant, "viewer")] if grant else [])
    return user, operator_principal(user)


def _token(scope: str) -> Principal:
    tokens.create_token(
        principal=SYSTEM,
        name=f"agent-{scope}",
        scope=scope,
        capabilities=["read"],
        expires_at=timezone.now() + timedelta(days=1),
    )
    return token_principal(ApiToken.objects.get(scope=scope))


def _opens(principal: Principal, record_id: str) -> bool:
    try:
        selectors.record_detail(principal, record_id)
    except AccessDenied:
        return False
    return True


# Which records each grant may open by ID (the permission matrix).
EXPECTED = {
    # the tenant's own viewer reads all of acme:*:*
    TENANT: {"active", "quarantined", "superseded", "successor", "own_quarantined"},
    # carol reads her project in full, and acme:*:* only as her recall would
    "acme:carol:*": {"active", "successor", "own_quarantined"},
    # a sibling: the same lineage, none of carol's
    "acme:bob:*": {"active", "successor"},
    # another organisation whose name starts the same: nothing
    "acmecorp:*:*": set(),
}


@pytest.mark.parametrize("grant", list(EXPECTED))
def test_the_record_page_follows_the_matrix(client, stored, grant):
    # Given a viewer with one grant
    user, principal = _operator(f"viewer-{grant.split(':')[0]}-{grant.split(':')[1]}", grant)
    login_as(client, user)
    # When they open each record's page
    for name in ("active", "quarantined", "superseded", "successor", "own_quarantined"):
        response = client.get(reverse("memory:record", args=[stored[name]]))
        # Then exactly the records of the matrix open; the rest are 404 (not 403)
        expected = name in EXPECTED[grant]
        assert response.status_code == (200 if expected else 404), (grant, name)
        assert _opens(principal, stored[name]) == expected


@pytest.mark.parametrize("grant", ["acme:carol:*", "acme:bob:*"])
def test_an_operators_lineage_read_equals_what_a_token_and_a_recall_read(stored, grant):
    # Given an operator and a token with the same grant
    _, operator = _operator(f"op-{grant.split(':')[1]}", grant)
    token = _token(grant)
    # Then the records each may open by ID are the same
    names = ("active", "quarantined", "superseded", "successor", "own_quarantined")
    assert {n for n in names if _opens(operator, stored[n])} == {
        n for n in names if _opens(token, stored[n])
    }
    # And a recall from inside the grant returns, at acme:*:*, only active records
    inside = grant.replace("*", "work", 1) if grant.endswith(":*") else grant
    result = services.recall(principal=SYSTEM, scope=inside, query="vpn host wifi door code")
    ancestors = {c.record_id for c in result.candidates if c.scope == TENANT}
    assert ancestors <= {stored["active"], stored["successor"]}


def test_carol_sees_no_ancestor_episode_superseded_value_or_quarantined_text(client, stored):
    # Given carol, a viewer of acme:carol:* only
    user, principal = _operator("carol", "acme:carol:*")
    login_as(client, user)
    # When she opens an active ancestor record
    detail = selectors.record_detail(principal, stored["active"])
    # Then its source episode is not shown (a recall never shows one)
    assert detail.episode is None
    page = client.get(reverse("memory:record", args=[stored["active"]])).content.decode()
    assert "Remember that the office wifi" not in page  # the episode's raw text
    # And the successor's page does not walk back to the superseded value
    detail = selectors.record_detail(principal, stored["successor"])
    assert detail.supersedes_chain == []
    page = client.get(reverse("memory:record", args=[stored["successor"]])).content.decode()
    assert NEW_VALUE in page and OLD_VALUE not in page
    # And the ancestor's scope page lists its active records only, whatever the filter
    for query in ("", "?status=quarantined", "?status=superseded"):
        response = client.get(reverse("memory:scope", args=[TENANT]) + query)
        assert response.status_code == 200
        body = response.content.decode()
        assert QUARANTINED_TEXT not in body and OLD_VALUE not in body
    assert "acmenet" in client.get(reverse("memory:scope", args=[TENANT])).content.decode()
    # And the ancestor's episodes are out of reach by ID
    for episode in ("quarantined_episode", "active_episode"):
        with pytest.raises(AccessDenied):
            selectors.get_episode(principal, stored[episode])
    # And the ancestor's scenes (its stored messages, grouped by session) are out of reach
    with pytest.raises(AccessDenied):
        services.scenes(principal=principal, scope=TENANT)
    # And an ID search finds no hidden record
    assert selectors.records_by_id_prefix(principal, stored["quarantined"]) == []
    assert selectors.records_by_id_prefix(principal, stored["superseded"]) == []
    response = client.get(reverse("search"), {"q": stored["quarantined"]})
    assert reverse("memory:record", args=[stored["quarantined"]]) not in response.content.decode()


def test_carol_reads_her_own_subtree_in_full(stored):
    _, principal = _operator("carol", "acme:carol:*")
    detail = selectors.record_detail(principal, stored["own_quarantined"])
    assert detail.record.status == Status.QUARANTINED and detail.episode is not None
    page = selectors.list_records(principal, scope=CAROL, status="quarantined")
    assert [r.record_id for r in page.items] == [stored["own_quarantined"]]


def test_the_tenant_viewer_still_reads_everything_at_the_tenant(stored):
    _, principal = _operator("tina", TENANT)
    detail = selectors.record_detail(principal, stored["quarantined"])
    assert detail.episode is not None
    assert selectors.get_episode(principal, stored["quarantined_episode"])
    assert any(
        QUARANTINED_TEXT in repr(s.as_dict())
        for s in services.scenes(principal=principal, scope=TENANT)
    )
    successor = selectors.record_detail(principal, stored["successor"])
    assert [r.record_id for r in successor.supersedes_chain] == [stored["superseded"]]
    listed = selectors.list_records(principal, scope=TENANT, limit=50)
    assert {stored["quarantined"], stored["superseded"]} <= {r.record_id for r in listed.items}


def test_listing_from_an_ancestor_with_descendants_keeps_the_rule(stored):
    # Given carol lists acme:*:* with its descendants (those she may read)
    _, principal = _operator("carol", "acme:carol:*")
    page = selectors.list_records(principal, scope=TENANT, include_descendants=True, limit=50)
    found = {r.record_id for r in page.items}
    # Then her own quarantined record is there, the ancestor's hidden ones are not
    assert stored["own_quarantined"] in found and stored["active"] in found
    assert stored["quarantined"] not in found and stored["superseded"] not in found


def test_anonymous_visitors_are_sent_to_sign_in(client, stored):
    response = client.get(reverse("memory:record", args=[stored["active"]]))
    assert response.status_code == 302 and "/login/" in response["Location"]
