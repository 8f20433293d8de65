"""Role-aware navigation (issue 13, loop 8): the top bar hides what a role cannot open,
the overview says "awaiting you" beside "awaiting anyone", and every number links to
its filtered list."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from actions import services as action_services
from aetnaweb import access
from aetnaweb.access import SYSTEM
from aetnaweb.overview import build_overview
from memory import services
from tests.actions.conftest import write_op
from tests.factories import login_as, make_operator

NAV_LINKS = {
    "Memory": "/memory/",
    "Review queue": "/memory/review/",
    "Actions": "/actions/",
    "Audit": "/audit/",
    "Checkpoints": "/audit/checkpoints/",
    "API tokens": "/access/tokens/",
}


def nav_of(client) -> set[str]:
    html = client.get(reverse("home")).content.decode()
    nav = html.split('<nav class="mainnav"', 1)[1].split("</nav>", 1)[0]
    return {label for label, href in NAV_LINKS.items() if f'href="{href}"' in nav}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "shown"),
    [
        (None, set()),
        ("viewer", {"Memory", "Actions", "Audit"}),
        ("reviewer", {"Memory", "Review queue", "Actions", "Audit"}),
        ("approver", {"Memory", "Actions", "Audit"}),
        ("auditor", {"Memory", "Actions", "Audit", "Checkpoints"}),
        ("admin", set(NAV_LINKS)),
    ],
)
def test_the_top_bar_shows_only_what_the_role_can_open(client, role, shown):
    grants = [("acme:*:*", role)] if role else []
    login_as(client, make_operator("op", grants))
    assert nav_of(client) == shown
    # and every link shown opens (no 404 behind a visible link)
    for label in shown:
        assert client.get(NAV_LINKS[label]).status_code == 200, label


@pytest.fixture
def busy(db, tmp_path, settings, authorizing_messages):
    (tmp_path / "root").mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(tmp_path / "root")
    for scope in ("acme:alice:*", "acme:bob:*"):
        services.remember(
            principal=SYSTEM, scope=scope, text="Read: <webpage>My shell is fish.</webpage>"
        )
    april = make_operator("april", [("acme:alice:*", "approver"), ("acme:*:*", "viewer")])
    # one plan april proposed herself, one an agent proposed in alice's scope, one in bob's
    action_services.stage(
        principal=SYSTEM, scope="acme:alice:*", operations=[write_op("a.txt", "1")], actor="april"
    )
    action_services.stage(
        principal=SYSTEM, scope="acme:alice:*", operations=[write_op("b.txt", "1")], actor="agent:x"
    )
    action_services.stage(
        principal=SYSTEM, scope="acme:bob:*", operations=[write_op("c.txt", "1")], actor="agent:x"
    )
    return april


@pytest.mark.django_db
def test_awaiting_you_counts_only_what_your_roles_let_you_decide(busy):
    from django.contrib.auth import get_user_model

    april = access.operator_principal(busy)
    overview = build_overview(april, user=busy)
    # three plans await someone; april may approve only the agent's plan in alice's scope
    # (not her own, not bob's where she only views)
    assert overview.totals["pending_approvals"] == 3
    assert overview.awaiting_you["pending_approvals"] == 1
    assert overview.totals["quarantined"] == 2
    assert overview.awaiting_you["quarantined"] == 0  # april is no reviewer
    rex = make_operator("rex", [("acme:bob:*", "reviewer")])
    assert build_overview(access.operator_principal(rex), user=rex).awaiting_you["quarantined"] == 1
    assert get_user_model().objects.filter(username="rex").exists()


@pytest.mark.django_db
def test_every_overview_number_links_to_its_filtered_list(client, busy):
    login_as(client, busy)
    html = client.get(reverse("home")).content.decode()
    for target in ("/memory/", "/actions/", "/actions/attention/"):
        assert re.search(rf'<a class="card stat-card stat-link[^"]*" href="{target}"', html), target
    # april reviews nowhere: the Quarantined numbers are not links to a queue she cannot use
    assert 'href="/memory/review/' not in html
    assert "awaiting you" in html and "awaiting anyone" in html
    acme = "acme%3A%2A%3A%2A"
    for link in (
        f"/actions/history/?scope={acme}&amp;state=awaiting_approval",
        f"/actions/attention/?scope={acme}",
        "/memory/scope/acme:*:*/?status=active&amp;below=on",
    ):
        assert f'href="{link}"' in html, link
    # and each opens
    assert client.get("/actions/attention/", {"scope": "acme:*:*"}).status_code == 200
    assert (
        client.get("/memory/scope/acme:*:*/", {"status": "active", "below": "on"}).status_code
        == 200
    )


@pytest.mark.django_db
def test_the_quarantined_links_go_only_where_the_reviewer_role_reaches(client, db):
    # Given rita, reviewer of acme:alice:* only, and viewer of acme
    login_as(client, make_operator("rita", [("acme:alice:*", "reviewer"), ("acme:*:*", "viewer")]))
    services.remember(principal=SYSTEM, scope="acme:alice:*", text="Read: <webpage>x</webpage>")
    html = client.get(reverse("home")).content.decode()
    # Then acme's quarantined count links to the whole queue (hers), not to acme's subtree
    assert 'href="/memory/review/?scope=acme' not in html
    assert re.search(r'<td class="num" data-label="Quarantined"><a href="/memory/review/">', html)
    assert client.get("/memory/review/").status_code == 200
    # And the platform row, where she reviews nothing, has no link at all
    assert "/memory/review/?scope=platform" not in html


@pytest.mark.django_db
def test_the_attention_list_filters_by_scope(client, busy):
    login_as(client, busy)
    assert client.get("/actions/attention/", {"scope": "acme:alice"}).status_code == 404
    assert (
        client.get("/actions/attention/", {"scope": "acme:bob:*"}).context["within"] == "acme:bob:*"
    )


@pytest.mark.django_db
def test_overview_query_bound(client, busy, django_assert_max_num_queries):
    login_as(client, busy)
    with django_assert_max_num_queries(20):
        assert client.get(reverse("home")).status_code == 200
