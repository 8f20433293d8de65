"""The two memory pages that were slow at a million records, and what made them fast.

- the scope page lists a scope's records newest first through an index on
  ``(scope, id)`` (it used to sort every record of a busy scope to keep 51);
- the scopes page draws its tree from the per-scope counters in one pass of
  Python (``memory.views.tree_html``), not a template include per node, and
  says when the tree is cut at ``TREE_MAX_SCOPES``.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from aetnaweb.access import SYSTEM
from aetnaweb.scopes import Scope
from memory import selectors, services
from memory.models import Record, ScopeStats
from memory.views import tree_html
from tests.factories import login_as, make_operator

pytestmark = pytest.mark.django_db


def stored_scopes(*scopes: str, active: int = 1, quarantined: int = 0) -> None:
    """Counter rows for ``scopes``, as if each held memory (the tree reads nothing else)."""
    now = timezone.now()
    ScopeStats.objects.bulk_create(
        ScopeStats(
            scope=scope,
            **Scope.parse(scope).columns(),
            depth=Scope.parse(scope).depth,
            active=active,
            quarantined=quarantined,
            updated_at=now,
        )
        for scope in scopes
    )


def tree_links(html: str) -> list[str]:
    return re.findall(r'<a href="/memory/scope/([^"/]+)/">', html)


def tree_section(page: str) -> str:
    """The scopes page's tree card (not the grants beside it)."""
    return page.split('id="tree-heading"')[1].split("</section>")[0]


def test_tree_html_nests_tenant_user_project_with_exact_links_and_badges():
    # Given counters at the root, a tenant, a user and two projects (one quarantined)
    stored_scopes("platform:*:*", "acme:*:*", "acme:al.ice_1-x:*", "acme:al.ice_1-x:p-2")
    stored_scopes("acme:bob:crm", active=4, quarantined=2)
    tree = selectors.scope_tree(selectors.access.system_principal())
    # When the tree is drawn
    html = str(tree_html(tree))
    # Then each scope links to its page (the link reverse() would build), once, root first
    assert tree_links(html) == [
        "platform:*:*",
        "acme:*:*",
        "acme:al.ice_1-x:*",
        "acme:al.ice_1-x:p-2",
        "acme:bob:*",
        "acme:bob:crm",
    ]
    assert f'href="{reverse("memory:scope", args=["acme:al.ice_1-x:p-2"])}"' in html
    # And users nest in their tenant, projects in their user
    assert html.count("<ul>") == 3 and html.count("</ul>") == 3
    assert html.count("<li>") == html.count("</li>") == 6
    # And the counters are those stored at exactly each scope (zeros for a level without memory)
    assert "4 active</span>" in html and "2 quarantined</span>" in html
    bob = html.split('href="/memory/scope/acme:bob:*/"')[1].split("</div>")[0]
    assert "0 active" in bob and "quarantined" not in bob


def test_a_counter_row_whose_columns_disagree_with_its_scope_is_not_drawn():
    # Given a counter row edited behind the services' back (scope and columns disagree)
    stored_scopes("acme:*:*", "acme:alice:proj")
    ScopeStats.objects.filter(scope="acme:alice:proj").update(tenant="globex")
    # Then the tree shows only the consistent row
    tree = selectors.scope_tree(selectors.access.system_principal())
    assert [node["scope"] for node in tree] == ["acme:*:*"] and tree[0]["children"] == []


def test_tree_html_escapes_what_it_is_given():
    # A scope can never hold markup, but the renderer must not trust that it cannot
    node = {
        "scope": 'x"><script>alert(1)</script>',
        "level": "<b>",
        "counts": {"active": 1, "quarantined": 0, "superseded": 0, "tombstoned": 0},
        "children": [],
    }
    html = str(tree_html([node]))
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "&quot;" in html and "&lt;b&gt;" in html


def test_the_scopes_page_says_when_the_tree_is_cut(client, monkeypatch):
    # Given five stored scopes in acme and a cap of three
    stored_scopes("acme:*:*", "acme:a:*", "acme:a:p1", "acme:a:p2", "acme:b:*")
    stored_scopes("acmecorp:a:p1")  # a prefix twin, out of the viewer's reach
    monkeypatch.setattr(selectors, "TREE_MAX_SCOPES", 3)
    login_as(client, make_operator("vic", [("acme:*:*", "viewer")]))
    # When the viewer opens the scopes page
    response = client.get(reverse("memory:scopes"))
    text = response.content.decode()
    # Then the first three stored scopes are drawn, with a note naming the total
    assert tree_links(tree_section(text)) == [
        "acme:*:*",
        "acme:a:*",
        "acme:a:p1",
    ]
    assert "The first 3 of the 5 scopes holding memory" in text
    # And with room for all of them, there is no note
    monkeypatch.setattr(selectors, "TREE_MAX_SCOPES", 5000)
    assert (
        "scopes holding memory that you may read are"
        not in client.get(reverse("memory:scopes")).content.decode()
    )


def test_count_scopes_with_memory_counts_only_reachable_scopes(principal_for):
    stored_scopes("platform:*:*", "acme:*:*", "acme:a:p1", "acme:b:p2", "acmecorp:a:p1")
    assert selectors.count_scopes_with_memory(selectors.access.system_principal()) == 5
    # a user grant reads its subtree and its ancestors, never a sibling or a prefix twin
    assert selectors.count_scopes_with_memory(principal_for("acme:a:*")) == 3
    assert selectors.count_scopes_with_memory(principal_for("acme:*:*"), tenant="acme") == 3


def test_the_scopes_page_costs_the_same_queries_for_many_scopes(
    client, django_assert_max_num_queries
):
    # Given 600 stored scopes and a platform viewer
    stored_scopes(*(f"t{n // 60}:u{n % 60 // 10}:p{n % 10}" for n in range(600)))
    login_as(client, make_operator("root", [("platform:*:*", "viewer")]))
    # When the page is drawn, it is a handful of queries, none per scope
    with django_assert_max_num_queries(8):
        response = client.get(reverse("memory:scopes"))
    links = tree_links(tree_section(response.content.decode()))
    assert len(links) == len(set(links)) == 600 + 10 + 60  # projects, tenants, users


def test_a_scopes_records_page_is_read_newest_first_from_an_index():
    # Given records at a scope and at its siblings
    for n in range(3):
        services.remember(
            principal=SYSTEM, scope="acme:alice:proj", text=f"My editor number {n} is helix."
        )
        services.remember(
            principal=SYSTEM, scope="acme:bob:proj", text=f"My shell number {n} is fish."
        )
    system = selectors.access.system_principal()
    # When its page is listed
    page = selectors.list_records(system, scope="acme:alice:proj", limit=2)
    # Then newest first, by key, only that scope
    ids = list(
        Record.objects.filter(scope="acme:alice:proj").order_by("-id").values_list("id", flat=True)
    )
    assert [r.id for r in page.items] == ids[:2] and page.next_cursor == str(ids[1])
    more = selectors.list_records(system, scope="acme:alice:proj", after=page.next_cursor, limit=2)
    assert [r.id for r in more.items] == ids[2:]
    # And on SQLite the plan walks the (scope, id) index with no sort of the scope's records
    if connection.vendor == "sqlite":
        queryset = Record.objects.filter(scope="acme:alice:proj").order_by("-id")[:51]
        plan = queryset.explain()
        assert "mem_record_scope_id" in plan and "TEMP B-TREE" not in plan
