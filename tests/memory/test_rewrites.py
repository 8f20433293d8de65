"""Grammatical rewrites (issue 30): a corpus of first-person sentences, checked by rules.

The corpus (tests/memory/data/rewrite_corpus.txt, one sentence a line) is our
own: present, past and perfect tenses, adverbs before the verb, contractions,
modals, possessives, reflexives, joined subjects and coordinated verbs. Every
fact extracted from each sentence must pass tests/memory/rewrite_rules.py: no
first-person word left, the verb agrees after "User", and no word the speaker
did not say except the few a rewrite needs; or be the speaker's own words.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import extraction
from memory.extraction import clean_rewrite, extract
from tests.memory.rewrite_rules import problems

CORPUS = [
    line.strip()
    for line in (Path(__file__).parent / "data" / "rewrite_corpus.txt").read_text().splitlines()
    if line.strip()
]


def test_the_corpus_is_large_and_varied():
    assert len(CORPUS) >= 300 and len(set(CORPUS)) == len(CORPUS)
    starts = {sentence.split()[0] for sentence in CORPUS}
    assert {"I", "I'm", "I've", "My", "When", "Last"} <= starts


@pytest.mark.parametrize("sentence", CORPUS)
def test_every_rewrite_is_grammatical_or_the_speakers_words(sentence):
    found = extract(sentence, statements=True)
    assert found, sentence
    for candidate in found:
        assert problems(sentence, candidate.content) == [], (sentence, candidate.content)


@pytest.mark.parametrize(
    ("sentence", "rewritten"),
    [
        ("I once spent a week in Oslo.", "User once spent a week in Oslo."),
        ("I barely sleep before exams.", "User barely sleeps before exams."),
        ("I hardly ever watch TV.", "User hardly ever watches TV."),
        ("I recently changed jobs.", "User recently changed jobs."),
        # A coordinated verb agrees too (the issue's "User ... and do User's best work")
        (
            "I'm a night owl and do my best work after 9pm.",
            "User is a night owl and does User's best work after 9pm.",
        ),
        ("I'm sick and have a cold.", "User is sick and has a cold."),
        ("I cook and clean up afterwards.", "User cooks and cleans up afterwards."),
        ("I like apples and pears.", "User likes apples and pears."),
    ],
)
def test_adverbs_before_the_verb_and_coordinated_verbs_agree(sentence, rewritten):
    assert [c.content for c in extract(sentence, statements=True)] == [rewritten]


def test_the_rules_catch_the_mistakes_the_issue_found():
    assert problems("I once spent a week in Oslo.", "User onces spent a week in Oslo.")
    assert problems("While I'm away, I read.", "While I'm away, User reads.")
    assert problems("I do my best work at night.", "User do User's best work at night.")


def test_an_unclean_rewrite_keeps_the_speakers_words(monkeypatch):
    # Given a rewrite that would leave a first-person word behind
    monkeypatch.setattr(extraction, "third_person", lambda text: "User told me about it.")
    # Then the note keeps what the speaker said
    assert [c.content for c in extract("I heard about it from Kim.", statements=True)] == [
        "I heard about it from Kim."
    ]
    assert not clean_rewrite("User onces spent a week there.")
    assert clean_rewrite("User's sister once spent a week there.")
