"""Corrections, negations and names in what the user says (issue 30)."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record

S = "acme:alice:proj"


MONDAY = "2026-03-02T09:30:00+00:00"


def say(text: str, scope: str = S, when: str | None = None) -> services.RememberResult:
    return services.remember(principal=SYSTEM, scope=scope, text=text, occurred_at=when)


def active(scope: str = S) -> list[str]:
    return list(
        Record.objects.filter(scope=scope, status="active")
        .order_by("id")
        .values_list("content", flat=True)
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("first", "negation", "now"),
    [
        ("I am vegetarian.", "I'm no longer vegetarian.", "User is no longer vegetarian."),
        ("I live in Oslo.", "I no longer live in Oslo.", "User no longer lives in Oslo."),
        ("I'm vegetarian.", "I am not vegetarian anymore.", "User is not vegetarian anymore."),
        ("I play golf.", "I don't play golf anymore.", "User doesn't play golf anymore."),
    ],
)
def test_a_negation_supersedes_the_statement_it_negates_and_only_it(first, negation, now):
    # Given the statement and an unrelated one
    old = say(first).records[0].record_id
    say("I speak Dutch.")
    # When the user says it is no longer so
    result = say(negation)
    # Then the old statement is superseded by the negation; the other stays
    assert [r.content for r in result.records] == [now]
    assert result.superseded_ids == (old,)
    assert active() == ["User speaks Dutch.", now]


@pytest.mark.django_db
def test_x_not_y_replaces_the_record_holding_y_and_only_it():
    # Given two records, only one of them about the Berlin flight on Tuesday
    berlin = say("My flight to Berlin is next Tuesday.", when=MONDAY).records[0]
    say("My dentist appointment is next Tuesday.", when=MONDAY)
    # When corrected (on the same day)
    result = say(
        "Actually, scratch that about Berlin: the flight is on Wednesday, not Tuesday.", when=MONDAY
    )
    # Then the Berlin record is replaced by the corrected value in the same slot
    assert result.superseded_ids == (berlin.record_id,)
    stored = result.records[0]
    assert (stored.content, stored.fact_key) == (
        "User's flight to Berlin is next Wednesday (2026-03-11).",
        berlin.fact_key,
    )
    assert "User's dentist appointment is next Tuesday (2026-03-10)." in active()
    assert "User's flight to Berlin is next Tuesday (2026-03-10)." not in active()


@pytest.mark.django_db
def test_i_was_wrong_about_retires_the_record_about_it():
    old = say("My gym is open until 10pm.").records[0].record_id
    say("My office is open until 6pm.")
    result = say("I was wrong about the gym: it closes at 9pm.")
    assert result.superseded_ids == (old,)
    assert "User's office is open until 6pm." in active()


@pytest.mark.django_db
def test_a_correction_that_matches_nothing_is_kept_and_replaces_nothing():
    say("My car is red.")
    result = say("Actually, the meeting is on Monday, not Sunday.")
    assert result.superseded_ids == ()
    assert active() == ["User's car is red.", "The meeting is on Monday, not Sunday."]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "text",
    ["Call me Sam.", "Please call me Sam.", "I go by Sam.", "You can call me Sam from now on."],
)
def test_names_are_stored_in_the_name_slot(text):
    say("My name is Samantha.")
    result = say(text)
    assert [(r.content, r.fact_key) for r in result.records] == [("User's name is Sam.", "name")]
    assert active() == ["User's name is Sam."]


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["Call me tomorrow.", "Call me when you land."])
def test_call_me_without_a_name_names_no_one(text):
    assert not any(r.fact_key == "name" for r in say(text).records)


@pytest.mark.django_db
def test_statements_about_other_people_keep_their_names():
    result = say("My sister Maja is a nurse and my partner Lee is a pilot.")
    assert [r.content for r in result.records] == [
        "User's sister Maja is a nurse.",
        "User's partner Lee is a pilot.",
    ]
