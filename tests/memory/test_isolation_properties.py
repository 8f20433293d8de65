"""Scope isolation as a property (scopes.md), on the Scope type and through recall and selectors.

Generated scope trees deliberately include prefix twins (``acme``/``acmecorp``,
``al``/``alice``): a read never sees a sibling's memory or a twin's, the
platform scope is visible from every scope, and weights are 0.5 to the power
of the distance.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aetnaweb.access import READ, SYSTEM, AccessDenied, Principal
from aetnaweb.scopes import Scope
from memory import selectors, services
from memory.models import Record

SEGMENT = st.from_regex(r"[A-Za-z0-9._-]{1,8}", fullmatch=True).filter(lambda s: s != "platform")
TWIN_TENANTS = ["acme", "acmecorp", "acm", "ac.me"]
TWIN_USERS = ["al", "alice", "alicex", "bob"]
TWIN_PROJECTS = ["p", "proj", "proj2"]


@st.composite
def scopes(draw, tenants=SEGMENT, users=SEGMENT, projects=SEGMENT):
    depth = draw(st.integers(0, 3))
    if depth == 0:
        return Scope.platform()
    tenant = draw(tenants)
    if depth == 1:
        return Scope.of(tenant)
    user = draw(users)
    if depth == 2:
        return Scope.of(tenant, user)
    return Scope.of(tenant, user, draw(projects))


twin_scopes = scopes(
    st.sampled_from(TWIN_TENANTS), st.sampled_from(TWIN_USERS), st.sampled_from(TWIN_PROJECTS)
)


def is_lineage_member(query: Scope, memory: Scope) -> bool:
    """Ground truth by construction: memory is query itself or one of its ancestors."""
    prefix = {0: (), 1: (query.tenant,), 2: (query.tenant, query.user), 3: query.segments}
    if memory.is_platform:
        return True
    return memory.depth <= query.depth and prefix[memory.depth] == memory.segments[: memory.depth]


# -- the value type --------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(query=st.one_of(scopes(), twin_scopes), memory=st.one_of(scopes(), twin_scopes))
def test_a_read_sees_exactly_its_lineage(query, memory):
    assert query.sees(memory) == is_lineage_member(query, memory)
    assert query.sees(memory) == (str(memory) in query.visible_strings())
    expected = 0.5 ** (query.depth - memory.depth) if is_lineage_member(query, memory) else 0.0
    assert query.weight(memory) == expected


@settings(max_examples=200, deadline=None)
@given(query=st.one_of(scopes(), twin_scopes))
def test_platform_is_visible_from_every_scope(query):
    assert query.sees(Scope.platform())
    assert query.weight(Scope.platform()) == 0.5**query.depth
    assert query.visible_strings()[-1] == "platform:*:*"
    assert len(query.visible_strings()) == query.depth + 1


@settings(max_examples=200, deadline=None)
@given(base=SEGMENT, suffix=SEGMENT, user=SEGMENT)
def test_prefix_twins_share_nothing(base, suffix, user):
    twin = base + suffix
    if len(twin) > 64 or twin == "platform":
        return
    a, b = Scope.of(base, user), Scope.of(twin, user)
    assert not a.sees(b) and not b.sees(a) and not a.covers(b) and not b.covers(a)
    assert not Scope.of("t", base).sees(Scope.of("t", twin))
    assert not Scope.of("t", twin, "p").sees(Scope.of("t", base))


@settings(max_examples=200, deadline=None)
@given(grant=st.one_of(scopes(), twin_scopes), row=st.one_of(scopes(), twin_scopes))
def test_subtree_filter_columns_agree_with_covers(grant, row):
    columns = row.columns()
    matches = all(columns[name] == value for name, value in grant.subtree_filter().items())
    assert matches == grant.covers(row)


# -- through the services and selectors ------------------------------------------------------


@pytest.mark.django_db
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tree=st.sets(twin_scopes, min_size=2, max_size=7),
    queries=st.lists(twin_scopes, min_size=1, max_size=4),
)
def test_recall_sees_exactly_the_lineage_weighted_by_distance(tree, queries):
    with transaction.atomic():
        # Given one equally relevant fact at every scope of a generated tree
        stored = {}
        for scope in tree:
            stored[str(scope)] = services.remember_fact(
                principal=SYSTEM, scope=scope, key="launch code", value=str(scope)
            ).record_ids[0]
        for query in queries:
            # When recalled at any scope
            result = services.recall(principal=SYSTEM, scope=query, query="launch code", limit=10)
            # Then exactly the stored scopes in its lineage come back, weighted 0.5^distance
            seen = {c.scope: c.parts["weight"] for c in result.candidates}
            expected = {
                str(scope): 0.5 ** (query.depth - scope.depth)
                for scope in tree
                if is_lineage_member(query, scope)
            }
            assert seen == expected
            assert {c.record_id for c in result.candidates} == {stored[s] for s in expected}
            # And nearer scopes never rank below farther ones for equally relevant facts
            depths = [Scope.parse(c.scope).depth for c in result.candidates]
            assert depths == sorted(depths, reverse=True)
        transaction.set_rollback(True)


@pytest.mark.django_db
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=st.sets(twin_scopes, min_size=2, max_size=7), grant=twin_scopes)
def test_selectors_never_return_a_row_outside_what_the_grant_may_read(tree, grant):
    with transaction.atomic():
        for scope in tree:
            services.remember_fact(principal=SYSTEM, scope=scope, key="launch code", value="x")
            services.remember(
                principal=SYSTEM, scope=scope, text="<webpage>My launch code is y.</webpage>"
            )
        token = Principal(label="agent:p", kind="token", bindings=((grant, frozenset({READ})),))
        operator = Principal(label="op", kind="operator", bindings=((grant, frozenset({READ})),))
        for principal, may_read in (
            (token, grant.covers),
            (operator, lambda s: grant.covers(s) or s.covers(grant)),
        ):
            # Listing from the root with descendants: only readable scopes come back
            try:
                page = selectors.list_records(
                    principal, scope="platform:*:*", include_descendants=True, limit=200
                )
                assert all(may_read(Scope.parse(r.scope)) for r in page.items)
                # (at an operator's ancestors, only what a recall reads: active records)
                assert all(
                    grant.covers(Scope.parse(r.scope)) or r.status == "active" for r in page.items
                )
            except AccessDenied:
                assert not may_read(Scope.platform())
            # Every record by ID: visible iff inside the grant, or an active ancestor
            # record, which a recall from the grant returns (issue 10 item 8); an
            # operator's lineage read is no wider than that (issue 29 item 8)
            for record in Record.objects.all():
                try:
                    selectors.record_detail(principal, record.record_id)
                    visible = True
                except AccessDenied:
                    visible = False
                scope = Scope.parse(record.scope)
                recalled = scope.covers(grant) and record.status == "active"
                assert visible == (grant.covers(scope) or recalled)
        transaction.set_rollback(True)


@pytest.mark.django_db
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tree=st.sets(twin_scopes, min_size=2, max_size=6),
    queries=st.lists(twin_scopes, min_size=1, max_size=3),
)
def test_semantic_recall_sees_exactly_the_lineage_and_never_quarantine(tree, queries):
    with transaction.atomic():
        # Given at every scope the same fact that only meaning can match, and a
        # quarantined near-copy from a webpage
        stored = {}
        for number, scope in enumerate(tree):
            # (numbered: an identical text visible from an ancestor would be a duplicate)
            stored[str(scope)] = services.remember(
                principal=SYSTEM,
                scope=scope,
                text=f"I avoid beef at business dinners in room {number}.",
            ).record_ids[0]
            services.remember(
                principal=SYSTEM,
                scope=scope,
                text=f"<webpage>I avoid pork at business dinners in room {number}.</webpage>",
            )
        for query in queries:
            # When asked by meaning (no word in common with the fact)
            result = services.recall(
                principal=SYSTEM, scope=query, query="Which meat do I refuse to eat?", limit=10
            )
            # Then exactly the lineage's trusted facts are candidates, each by meaning,
            # weighted 0.5^distance; no sibling, twin or quarantined record
            expected = {str(s) for s in tree if is_lineage_member(query, s)}
            assert {c.record_id for c in result.candidates} == {stored[s] for s in expected}
            for candidate in result.candidates:
                assert candidate.parts["semantic"] > 0 and candidate.parts["lexical"] == 0
                scope = Scope.parse(candidate.scope)
                assert candidate.parts["weight"] == 0.5 ** (query.depth - scope.depth)
        transaction.set_rollback(True)
