"""One fact per clause (issue 30): compound sentences split; forgetting one clause's fact leaves the other."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from memory import services
from memory.extraction import extract, split_clauses
from memory.models import Record

S = "acme:alice:proj"


@pytest.mark.parametrize(
    ("sentence", "clauses"),
    [
        (
            "I'm allergic to peanuts and my partner Lee is a pilot.",
            ["I'm allergic to peanuts", "my partner Lee is a pilot."],
        ),
        ("I live in Oslo; my office is in Bergen.", ["I live in Oslo", "my office is in Bergen."]),
        ("I love tea, but my sister prefers coffee.", ["I love tea", "my sister prefers coffee."]),
        ("My car is red and my bike is blue.", ["My car is red", "my bike is blue."]),
        ("I play chess while my son paints.", ["I play chess", "my son paints."]),
        # One clause: a joined subject, a shared subject, a coordinated object
        ("My son and I went hiking.", ["My son and I went hiking."]),
        ("I ski and swim.", ["I ski and swim."]),
        ("I like apples and pears.", ["I like apples and pears."]),
        # A subordinate clause before a comma stays with its main clause
        (
            "While I'm away, my sister feeds the cat.",
            ["While I'm away, my sister feeds the cat."],
        ),
        (
            "I'm away until Monday, so I can't do meetings.",
            ["I'm away until Monday", "I can't do meetings."],
        ),
    ],
)
def test_a_sentence_splits_where_a_coordinator_brings_a_new_subject(sentence, clauses):
    assert split_clauses(sentence) == clauses


def test_each_clause_is_its_own_fact():
    found = extract("I'm allergic to peanuts and my partner Lee is a pilot.", statements=True)
    assert [(c.content, c.fact_key) for c in found] == [
        ("User is allergic to peanuts.", ""),
        ("User's partner Lee is a pilot.", "partner lee"),
    ]


@pytest.mark.django_db
def test_forgetting_one_clauses_fact_leaves_the_other():
    # Given one compound message stating two facts
    result = services.remember(
        principal=SYSTEM, scope=S, text="I'm allergic to peanuts and my partner Lee is a pilot."
    )
    assert len(result.records) == 2
    # When the peanut fact is forgotten
    services.forget(principal=SYSTEM, scope=S, selector="peanuts")
    # Then the partner's fact is still active and recallable
    assert list(
        Record.objects.filter(scope=S, status="active").values_list("content", flat=True)
    ) == ["User's partner Lee is a pilot."]
    found = services.recall(principal=SYSTEM, scope=S, query="What does Lee do?")
    assert "User's partner Lee is a pilot." in [c.content for c in found.returned]
