from __future__ import annotations

import pytest

from aetnaweb.scopes import Scope, ScopeError


@pytest.mark.parametrize(
    ("raw", "depth"),
    [("platform:*:*", 0), ("acme:*:*", 1), ("acme:alice:*", 2), ("acme:alice:proj", 3)],
)
def test_parse_valid_scopes_and_depth(raw, depth):
    # Given a valid scope string / When parsed / Then it round-trips with its depth
    scope = Scope.parse(raw)
    assert str(scope) == raw
    assert scope.depth == depth


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("acme:alice", "three segments"),
        ("a:b:c:d", "three segments"),
        ("acme:*:secret", "ambiguous"),
        ("platform:bob:*", "reserved"),
        ("platform:*:proj", "ambiguous"),
        ("acme corp:*:*", "tenant segment"),
        ("acme:al ice:*", "user segment"),
        ("acme:alice:p%20", "project segment"),
        ("acme::*", "user segment is empty"),
        ("*:*:*", "must name a tenant"),
        ("x" * 65 + ":*:*", "longer than 64"),
        ("acme:alice:proj\n", "project segment"),
        ("ACME:alice:é", "project segment"),
    ],
)
def test_parse_refuses_and_names_the_problem(raw, fragment):
    # Given an invalid scope / When parsed / Then a ScopeError names what is wrong
    with pytest.raises(ScopeError, match=fragment):
        Scope.parse(raw)


def test_parse_never_repairs_case_or_whitespace():
    assert str(Scope.parse("Acme:Alice:*")) == "Acme:Alice:*"
    with pytest.raises(ScopeError):
        Scope.parse(" acme:*:*")


def test_ancestors_and_weights():
    scope = Scope.parse("acme:alice:proj")
    assert scope.visible_strings() == [
        "acme:alice:proj",
        "acme:alice:*",
        "acme:*:*",
        "platform:*:*",
    ]
    assert [scope.weight(s) for s in scope.lineage()] == [1.0, 0.5, 0.25, 0.125]
    assert scope.weight(Scope.parse("acme:bob:*")) == 0.0


def test_covers_is_segment_wise_not_prefix():
    assert Scope.parse("acme:*:*").covers(Scope.parse("acme:alice:proj"))
    assert not Scope.parse("acme:*:*").covers(Scope.parse("acmecorp:*:*"))
    assert not Scope.parse("acme:al:*").covers(Scope.parse("acme:alice:*"))
    assert not Scope.parse("acme:alice:*").covers(Scope.parse("acme:*:*"))
    assert Scope.platform().covers(Scope.parse("zeta:u:p"))


def test_subtree_filter_uses_column_equality():
    assert Scope.platform().subtree_filter() == {}
    assert Scope.parse("acme:*:*").subtree_filter() == {"tenant": "acme"}
    assert Scope.parse("acme:alice:*").subtree_filter("scope_") == {
        "scope_tenant": "acme",
        "scope_user": "alice",
    }
