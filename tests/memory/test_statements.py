"""First-person statements and the third-person rewrite (issue 12), on unseen words.

The made-up words below appear in no rule, so a rule that passed here by
naming a topic would be caught: the shapes work on closed-class words only
(pronouns, auxiliaries, determiners, discourse markers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.extraction import extract, third_person

ROOT = Path(__file__).resolve().parents[2]


def notes(text: str) -> list[str]:
    return [c.content for c in extract(text, statements=True)]


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        # plain "I <verb>" with agreement, -es / -ies / irregular / past kept
        ("I am allergic to florpex.", "User is allergic to florpex."),
        ("I commute by dremblit every day.", "User commutes by dremblit every day."),
        ("I teach skavorn on weekdays", "User teaches skavorn on weekdays."),
        ("I carry a yimbrel kit.", "User carries a yimbrel kit."),
        ("I usually go to quazzle at nine.", "User usually goes to quazzle at nine."),
        ("I need a trindolet every morning.", "User needs a trindolet every morning."),
        ("I moved to Wubbick in 2020.", "User moved to Wubbick in 2020."),
        ("I grew up near Wubbick.", "User grew up near Wubbick."),
        ("I have two florpexes.", "User has two florpexes."),
        ("I don't take dremblit.", "User doesn't take dremblit."),
        ("I haven't touched skavorn in years.", "User hasn't touched skavorn in years."),
        # contractions, curly and missing apostrophes, lowercase
        ("I'm a skavorn tuner.", "User is a skavorn tuner."),
        ("I\u2019m sensitive to yimbrel.", "User is sensitive to yimbrel."),
        ("I've got quazzle syndrome.", "User has got quazzle syndrome."),
        ("I'd never ride a trindolet.", "User would never ride a trindolet."),
        ("I'll be in Wubbick until 2030.", "User will be in Wubbick until 2030."),
        ("im a florpex collector", "User is a florpex collector."),
        ("ive got dremblit fever", "User has got dremblit fever."),
        ("i play skavorn", "User plays skavorn."),
        # the user as possessor or object, adverbial openers, compound subjects
        ("My florpex lives in Wubbick.", "User's florpex lives in Wubbick."),
        ("Dremblit gives me a rash.", "Dremblit gives User a rash."),
        ("Skavorns make me sneeze.", "Skavorns make User sneeze."),
        ("Every morning I polish my yimbrel.", "Every morning User polishes their yimbrel."),
        ("Twice a week I visit my quazzle.", "Twice a week User visits their quazzle."),
        ("My trindolet and I share a flat.", "User's trindolet and User share a flat."),
        ("Me and my florpex play skavorn.", "User and User's florpex play skavorn."),
        ("When I travel, I carry dremblit.", "When User travels, User carries dremblit."),
        ("We keep three yimbrels.", "We keep three yimbrels."),
        # lead-ins and hedges are not part of the fact
        ("Just so you know, I'm allergic to florpex.", "User is allergic to florpex."),
        ("For the record, I hate dremblit.", "User hates dremblit."),
        ("Background: I play skavorn.", "User plays skavorn."),
        ("I think I'm allergic to yimbrel.", "User is allergic to yimbrel."),
        ("I'm allergic to quazzle, so please keep that in mind.", "User is allergic to quazzle."),
        ("I'm allergic to quazzle, can you note that?", "User is allergic to quazzle."),
    ],
)
def test_a_first_person_statement_is_kept_as_a_third_person_note(said, stored):
    # Given trusted user text stating something about the user / When extracted
    candidates = extract(said, statements=True)
    # Then one unkeyed note in the third person
    assert [(c.content, c.fact_key) for c in candidates] == [(stored, "")]


def test_a_note_is_an_unkeyed_statement_rule_below_keyed_confidence():
    (note,) = extract("I am allergic to florpex.", statements=True)
    (keyed,) = extract("My florpex colour is teal.", statements=True)
    assert (note.rule, note.fact_key) == ("statement", "")
    assert note.confidence < keyed.confidence


def test_each_sentence_of_a_message_is_its_own_note_and_questions_in_it_are_not():
    assert notes("Hi! I play skavorn. My florpex is teal. Can you help me find a dremblit?") == [
        "User plays skavorn.",
        "User's florpex is teal.",
    ]


@pytest.mark.parametrize(
    "said",
    [
        # questions
        "Am I allergic to florpex?",
        "where did I leave my dremblit",
        "Do you know a skavorn shop?",
        "I wonder when the yimbrel opens?",
        # greetings and thanks
        "Hi!",
        "Good morning",
        "Thanks, I appreciate it.",
        "thx",
        # chit-chat and reactions to the conversation
        "I see.",
        "I agree.",
        "I think so.",
        "I'm fine, thanks.",
        "I don't know.",
        "I love it!",
        "I like that florpex.",
        "I'm glad to hear that.",
        "I'm sorry, I meant the quazzle.",
        "I changed my mind.",
        # instructions and requests to the assistant
        "Remind me to buy florpex.",
        "Add dremblit to my list.",
        "Translate my skavorn notes.",
        "Let me know when it's done.",
        "I want you to rewrite my yimbrel essay.",
        "I need help with my quazzle.",
        "I have a question about trindolets.",
        "I'd like to know more about florpex.",
        "Please book a skavorn for two.",
        "Don't tell my dremblit.",
        "Remember to feed the yimbrel.",
        "Check if I have any skavorn left.",
        "Find out whether I need a florpex.",
        # "im" without its apostrophe is "I'm" only as the first word
        "Wir wohnen im Zentrum.",
    ],
)
def test_questions_greetings_chit_chat_and_instructions_are_not_statements(said):
    assert extract(said, statements=True) == []


def test_third_party_text_gets_no_statement_notes():
    # Given first-person prose, read as third-party content (no statements rule)
    # Then nothing: a webpage's "I ..." is its author, not the user
    assert extract("I am allergic to florpex. I commute by dremblit.") == []
    # And the keyed shapes still apply to it, exactly as before
    assert [c.fact_key for c in extract("My florpex colour is teal.")] == ["florpex colour"]


# -- wording ------------------------------------------------------------------------------


def test_remember_that_uses_their_for_a_possessive_after_the_subject():
    assert notes("Remember that I take my coffee black") == ["User takes their coffee black."]
    assert notes("Remember that I wash my florpex on Sundays.") == [
        "User washes their florpex on Sundays."
    ]


@pytest.mark.parametrize(
    "said",
    [
        "my preferred airline is KLM now",
        "My preferred airline is now KLM.",
        "my preferred airline is KLM from now on",
        "My preferred airline is KLM these days!",
        "my preferred airline is currently KLM",
        "My preferred airline is KLM nowadays.",
        "my preferred airline is KLM at the moment",
        "Please remember that my preferred airline is KLM now.",
        "Use KLM as my preferred airline from now on",
    ],
)
def test_temporal_fillers_never_end_up_in_a_value(said):
    assert [(c.content, c.fact_key) for c in extract(said, statements=True)] == [
        ("User's preferred airline is KLM.", "preferred airline")
    ]


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        ("I cook for myself", "User cooks for themselves."),
        ("Myself, I prefer dremblit", "User, User prefers dremblit."),
        ("The teal florpex is mine", "The teal florpex is User's."),
        ("I lent him mine", "User lent him theirs."),
        ("My florpex likes me", "User's florpex likes User."),
        ("I fixed my florpex and my dremblit", "User fixed their florpex and User's dremblit."),
        ("I'm fond of my skavorn", "User is fond of their skavorn."),
        ("I've lost my yimbrel", "User has lost their yimbrel."),
        ("I'd lend my quazzle", "User would lend their quazzle."),
        ("I'd need a quazzle", "User would need a quazzle."),
        ("I'd broken my quazzle", "User had broken their quazzle."),
        ("I'd never polished a quazzle", "User had never polished a quazzle."),
        ("i walk my trindolet daily!!!", "User walks their trindolet daily."),
        ("i.e. the florpex", "I.e. the florpex."),
        ("I play skavorn\u2026", "User plays skavorn."),
        ("  my  florpex   bites ;", "User's florpex bites."),
        # a second verb joined by "and" agrees when the first one did
        ("I have a florpex and wear a dremblit", "User has a florpex and wears a dremblit."),
        ("I'm skavorn-free and need a yimbrel", "User is skavorn-free and needs a yimbrel."),
        ("I fix quazzles and always sell them", "User fixes quazzles and always sells them."),
        ("I can't polish and fix a florpex", "User can't polish and fix a florpex."),
        ("I moved and found a florpex", "User moved and found a florpex."),
        ("I like florpex and dremblit the most", "User likes florpex and dremblit the most."),
        ("I polish and she buffs the florpex", "User polishes and she buffs the florpex."),
    ],
)
def test_third_person_rewrite(said, stored):
    assert third_person(said) == stored


def test_scenario_vocabulary_never_appears_in_the_rules():
    # The rules must work on words they have never seen: the extraction
    # module names none of the write-coverage set's or the topics.
    source = (ROOT / "memory" / "extraction.py").read_text().lower()
    topics = [
        "penicillin", "bicycle", "allerg", "coffee", "airline", "klm", "commute",
        "vegetarian", "diabet", "wife", "sister", "nurse", "hives", "milk", "doctor",
        "kosher", "wheelchair", "asthma",
    ]  # fmt: skip
    assert [word for word in topics if word in source] == []


@pytest.mark.parametrize(
    ("text", "ending"),
    [
        ("my florpex is " + "now " * 24_000 + "teal", "User's florpex is teal."),
        ("my florpex is teal" + ", please" * 12_000, "User's florpex is teal."),
        ("I like skavorn" + " ." * 40_000 + "x", "User likes skavorn."),
        ("I like skavorn" + "," * 90_000 + " and yimbrel", "and yimbrel."),
        ("Dr. " * 24_000 + "I play skavorn.", "User plays skavorn."),
    ],
)
def test_a_maximal_message_of_repeated_fillers_is_read_whole(text, ending):
    # Given a message near the 100,000-character limit made of repeated
    # fillers (a shape that made the old trailing-filler regex backtrack
    # without end) / When extracted / Then it is read to the end
    assert len(text) < 100_000
    found = notes(text)
    assert found[0].endswith(ending)
