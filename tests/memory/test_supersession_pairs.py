"""Supersession only of the same thing: the same entity and the same attribute (issue 30).

Each pair is two writes about one entity. Half must supersede (a new value of
the same attribute), half must not (another attribute of the entity, or
another scope: supersession happens only at the one scope written). A write
is a message (str) or an explicit fact (("fact", key, value)).
"""

from __future__ import annotations

from typing import Any

import pytest

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record

P = "acme:alice:proj"  # the project scope
U = "acme:alice:*"  # its ancestor, the user scope
SIB = "acme:alice:other"  # a sibling project


def fact(key: str, value: str) -> tuple[str, str, str]:
    return ("fact", key, value)


SUPERSEDE: list[tuple[Any, Any, str, str]] = [
    ("My son is 7.", "My son is 8.", P, P),
    ("My sister is a nurse.", "My sister is a doctor.", P, P),
    ("My car is red.", "My car is blue.", P, P),
    ("My flight is at 9am.", "My flight is at 11am.", P, P),
    ("My flight is delayed.", "My flight is cancelled.", P, P),
    ("My backup email is bob@example.com.", "My backup email is carol@example.org.", P, P),
    # a value whose first token is "a" (a@...) is still an address, not "a" + noun
    (
        "My backup email is a@example.com.",
        "Use b@example.com as my backup email from now on.",
        P,
        P,
    ),
    ("My sister is Maja.", "My sister is Maria.", P, P),
    ("My car is in the garage.", "My car is at the office.", P, P),
    ("My dog is a beagle.", "My dog is a poodle.", P, P),
    ("My editor is Neovim.", "My editor is Emacs.", P, P),
    ("My shell is bash.", "Use fish as my shell going forward.", P, P),
    ("My favourite colour is green.", "My favourite colour is purple.", P, P),
    ("My budget is 4000 euros.", "My budget is 5500 euros.", P, P),
    ("My meeting is on Tuesday.", "My meeting is on Thursday.", P, P),
    ("My son is at school.", "My son is at football practice.", P, P),
    ("My office is on the third floor.", "My office is in building B.", P, P),
    ("My phone is an old Android.", "My phone is an iPhone.", P, P),
    ("My manager is Priya.", "My manager is Tom.", P, P),
    ("My birthday is on the 9th of March.", "My birthday is on the 12th of March.", P, P),
    ("My train is at 8:15.", "My train is at 7:40.", P, P),
    (fact("seat", "aisle"), fact("seat", "window"), P, P),
    (fact("deploy window", "Tuesdays 9-11"), fact("deploy window", "Thursdays 14-16"), P, P),
    ("My seat is aisle.", fact("seat", "window"), P, P),
    (fact("son", "7"), "My son is 8.", P, P),
    ("My daughter is 12 years old.", "My daughter is 13.", P, P),
    ("My password manager is KeePass.", "My password manager is Bitwarden.", P, P),
    ("My landlord is Mr Jensen.", "My landlord is Mrs Olsen.", P, P),
    ("My laptop is charging.", "My laptop is updating.", P, P),
    ("My gym is in Oslo.", "My gym is near the station.", P, P),
    ("My appointment is tomorrow.", "My appointment is on Friday.", P, P),
    # The ancestor's own slot, written at the ancestor.
    ("My son is 7.", "My son is 8.", U, U),
    (fact("seat", "aisle"), fact("seat", "window"), U, U),
]

KEEP_BOTH: list[tuple[Any, Any, str, str]] = [
    ("My son is 7.", "My son is at school until 3pm.", P, P),
    ("My sister is a nurse.", "My sister is Maja.", P, P),
    ("My car is red.", "My car is in the garage.", P, P),
    ("My flight is at 9am.", "My flight is delayed.", P, P),
    ("My son is 7.", "My son is Max.", P, P),
    ("My dog is a beagle.", "My dog is 3 years old.", P, P),
    ("My meeting is on Tuesday.", "My meeting is in room 4.", P, P),
    ("My flight is delayed.", "My flight is at gate 12.", P, P),
    ("My manager is Priya.", "My manager is on holiday.", P, P),
    ("My brother is a pilot.", "My brother is in Berlin.", P, P),
    ("My daughter is 12.", "My daughter is a violinist.", P, P),
    ("My package is delayed.", "My package is at the post office.", P, P),
    ("My car is a Volvo.", "My car is blue.", P, P),
    ("My appointment is tomorrow.", "My appointment is with Dr Berg.", P, P),
    ("My train is at 8:15.", "My train is cancelled.", P, P),
    ("My laptop is charging.", "My laptop is a ThinkPad.", P, P),
    ("My partner is a teacher.", "My partner is Lee.", P, P),
    ("My cat is 4.", "My cat is at the vet.", P, P),
    ("My landlord is Mr Jensen.", "My landlord is 70 years old.", P, P),
    (fact("son", "7"), "My son is at school until 3pm.", P, P),
    ("My gym is in Oslo.", "My gym is 24 hours.", P, P),
    ("My brother is Tom.", "My brother is 30.", P, P),
    ("My phone is an iPhone.", "My phone is in the car.", P, P),
    ("My appointment is on Friday.", "My appointment is confirmed.", P, P),
    ("My daughter is at school.", "My daughter is 9.", P, P),
    ("My team is the platform team.", "My team is in Lisbon.", P, P),
    # Ancestors and siblings: a write supersedes only at the one scope written.
    ("My son is 7.", "My son is 8.", U, P),
    ("My car is red.", "My car is blue.", U, P),
    (fact("seat", "aisle"), fact("seat", "window"), U, P),
    ("My flight is at 9am.", "My flight is at 11am.", P, U),
    ("My sister is a nurse.", "My sister is a doctor.", P, SIB),
    (fact("son", "7"), fact("son", "8"), P, SIB),
]


def write(item: Any, scope: str) -> str:
    if isinstance(item, tuple):
        _, key, value = item
        result = services.remember_fact(principal=SYSTEM, scope=scope, key=key, value=value)
    else:
        result = services.remember(principal=SYSTEM, scope=scope, text=item)
    keyed = [r for r in result.records if r.fact_key]
    assert len(keyed) == 1, (item, result.records)
    return keyed[0].record_id


def test_the_pair_set_is_large_and_balanced():
    assert len(SUPERSEDE) >= 30 and len(KEEP_BOTH) >= 30
    assert abs(len(SUPERSEDE) - len(KEEP_BOTH)) <= 2
    written = [p for p in SUPERSEDE + KEEP_BOTH if any(isinstance(w, tuple) for w in p[:2])]
    assert len(written) >= 6  # explicit keyed facts on either side
    assert sum(p[2] != p[3] or p[2] == U for p in SUPERSEDE + KEEP_BOTH) >= 6  # ancestors


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second", "at", "then_at"), SUPERSEDE)
def test_a_new_value_of_the_same_attribute_supersedes(first, second, at, then_at):
    # Given a fact about an entity / When a new value of the same attribute is written
    old = write(first, at)
    new = write(second, then_at)
    # Then the old one is superseded by it, linked both ways
    held = Record.objects.get(record_id=old)
    assert (held.status, held.superseded_by_id) == ("superseded", new)
    assert Record.objects.get(record_id=new).supersedes_id == old


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second", "at", "then_at"), KEEP_BOTH)
def test_another_attribute_or_another_scope_keeps_both(first, second, at, then_at):
    # Given a fact about an entity / When another attribute (or another scope's value) is written
    old = write(first, at)
    new = write(second, then_at)
    # Then both stay active, and neither points at the other
    assert Record.objects.get(record_id=old).status == "active"
    assert Record.objects.get(record_id=new).supersedes_id is None


@pytest.mark.django_db
def test_consolidate_keeps_one_record_per_attribute_of_a_slot():
    # Given two attributes of one slot, and a stale duplicate value of one of them
    # written beside it (as an older release would have left it)
    age = write("My son is 7.", P)
    school = write("My son is at school until 3pm.", P)
    Record.objects.filter(record_id=age).update(status="active")
    stale = Record.objects.get(record_id=age)
    stale.pk, stale.record_id, stale.content = None, "mem_stale", "User's son is 6."
    stale.content_digest = "stale"
    stale.save()
    # When consolidated
    result = services.consolidate(principal=SYSTEM, scope=P)
    # Then the age keeps its newest value and the school is untouched
    statuses = dict(Record.objects.filter(scope=P).values_list("record_id", "status"))
    assert statuses[school] == "active"
    assert sorted(statuses.values()).count("active") == 2
    assert [k["fact_key"] for k in result.keys] == ["son"]
