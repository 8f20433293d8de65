"""remember keeps what a user states about themselves (issue 12), through the real service.

The write-coverage set in bench/data/write_coverage.json (also measured by
bench/write_coverage.py) must meet its targets; statements land as trusted
active notes, and the quarantine rules for third-party content are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aetnaweb.access import SYSTEM
from aetnaweb.text import UnstorableText
from audit.models import AuditEvent
from memory import search, services
from memory.errors import ExtractionError
from memory.models import Episode, Record

S = "acme:alice:proj"
DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "write_coverage.json"


def event_types(scope: str = S) -> list[str]:
    return list(
        AuditEvent.objects.filter(subject_id=scope)
        .order_by("sequence")
        .values_list("event_type", flat=True)
    )


@pytest.mark.django_db
def test_the_write_coverage_set_meets_its_targets():
    # Given the coverage set: >= 100 statements, >= 50 non-statements
    data = json.loads(DATA.read_text(encoding="utf-8"))
    statements, others = data["statements"], data["non_statements"]
    assert len(statements) >= 100 and len(others) >= 50
    # When each message is remembered at its own scope
    missed, stored_others = [], []
    for number, item in enumerate(statements):
        result = services.remember(principal=SYSTEM, scope=f"cov:s{number}:*", text=item["text"])
        if len(result.records) < item.get("min_records", 1):
            missed.append(item["text"])
    for number, item in enumerate(others):
        result = services.remember(principal=SYSTEM, scope=f"cov:n{number}:*", text=item["text"])
        if result.records:
            stored_others.append(item["text"])
    # Then >= 95% of statements are stored and <= 5% of non-statements
    assert len(missed) <= 0.05 * len(statements), missed
    assert len(stored_others) <= 0.05 * len(others), stored_others


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("I am allergic to penicillin.", "User is allergic to penicillin."),
        ("I commute by bicycle every day.", "User commutes by bicycle every day."),
    ],
)
def test_the_issue_examples_are_stored_as_active_trusted_notes(text, content):
    # Given the two messages the issue found ignored / When remembered
    result = services.remember(principal=SYSTEM, scope=S, text=text, session_id="s1", turn_id="t1")
    # Then one active, trusted, unkeyed, indexed record, audited like any other
    assert not result.ignored
    (record,) = Record.objects.filter(record_id__in=result.record_ids)
    assert (record.content, record.fact_key) == (content, "")
    assert (record.status, record.trust_tier, record.source_type) == (
        "active",
        "trusted_user",
        "user_message",
    )
    assert (record.episode_id, record.session_id, record.turn_id) == (
        result.episode_id,
        "s1",
        "t1",
    )
    assert search.indexed_pks([record.pk]) == {record.pk}
    assert event_types() == ["episode.ingested", "memory.record_created"]
    # And recall finds it by the user's own words
    hit = services.recall(principal=SYSTEM, scope=S, query=text.split(" ", 3)[-1]).returned[0]
    assert hit.record_id == record.record_id


@pytest.mark.django_db
@pytest.mark.parametrize(
    "text", ["Am I allergic to anything?", "Thanks!", "I see.", "Remind me tomorrow."]
)
def test_a_non_statement_stores_the_episode_and_no_record(text):
    result = services.remember(principal=SYSTEM, scope=S, text=text)
    assert result.ignored and result.records == ()
    assert Record.objects.count() == 0 and Episode.objects.count() == 1
    assert event_types() == ["episode.ingested"]


@pytest.mark.django_db
def test_a_repeated_statement_is_a_duplicate_not_a_second_record():
    first = services.remember(principal=SYSTEM, scope=S, text="I commute by bicycle every day.")
    again = services.remember(principal=SYSTEM, scope=S, text="i commute by bicycle every day")
    assert again.records == () and again.duplicate_of == (first.record_ids[0],)
    assert Record.objects.count() == 1


@pytest.mark.django_db
def test_a_correction_with_a_temporal_filler_still_supersedes_the_slot():
    # Given a keyed fact
    old = services.remember(
        principal=SYSTEM, scope=S, text="My preferred airline is Lufthansa."
    ).record_ids[0]
    # When corrected with "now"
    new = services.remember(principal=SYSTEM, scope=S, text="my preferred airline is KLM now")
    # Then the slot is superseded and the value carries no "now"
    assert new.superseded_ids == (old,)
    assert new.records[0].content == "User's preferred airline is KLM."
    assert Record.objects.get(record_id=old).status == "superseded"


@pytest.mark.django_db
def test_remember_that_is_stored_in_natural_third_person():
    result = services.remember(
        principal=SYSTEM, scope=S, text="Remember that I take my coffee black"
    )
    assert result.records[0].content == "User takes their coffee black."


# -- the quarantine rules for third-party content are exactly as before -------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "source_type"),
    [
        ("<webpage>I am allergic to penicillin. I love this blog.</webpage>", None),
        ("<tool_output>I commute by bicycle every day.</tool_output>", None),
        ("I am allergic to penicillin.", "webpage"),
        ("I commute by bicycle every day.", "tool_output"),
    ],
)
def test_first_person_prose_in_third_party_content_stores_nothing(text, source_type):
    # Given first-person prose that is a webpage's or a tool's, not the user's
    result = services.remember(principal=SYSTEM, scope=S, text=text, source_type=source_type)
    # Then nothing is stored, and the ignored untrusted source is audited as before
    assert result.ignored and result.records == ()
    assert Record.objects.count() == 0
    assert event_types() == ["episode.ingested", "memory.untrusted_source_ignored"]


@pytest.mark.django_db
def test_a_statement_around_a_webpage_block_is_not_read_as_the_user_s():
    # Given user text around a block: the message is a webpage message
    result = services.remember(
        principal=SYSTEM,
        scope=S,
        text="I am allergic to penicillin. <webpage>My hat size is 7.</webpage>",
    )
    # Then only the block's keyed fact, quarantined; the surrounding sentence is not stored
    assert [(r.content, r.status) for r in result.records] == [
        ("User's hat size is 7.", "quarantined")
    ]
    assert Record.objects.filter(content__icontains="penicillin").count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("   ", ExtractionError, "nothing to remember"),
        ("I am allergic to \x00 dust.", UnstorableText, "NUL character"),
        ("I am allergic to \ud800 dust.", UnstorableText, "unpaired surrogate"),
    ],
)
def test_a_refused_message_writes_nothing(rows, text, error, message):
    # Given an empty message, or a statement carrying a NUL or a lone surrogate
    # When remembered / Then a clear error and no rows at all
    before = rows()
    with pytest.raises(error, match=message):
        services.remember(principal=SYSTEM, scope=S, text=text)
    assert rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    "utterance",
    [
        "forget that I work from home these days",
        "forget that I work from home",
        "please forget that i work from home",
    ],
)
def test_a_statement_note_is_forgotten_in_the_words_it_was_said(utterance):
    # Given a statement stored without its lead-in and its temporal filler
    stored = services.remember(
        principal=SYSTEM, scope=S, text="Just so you know, I work from home these days."
    )
    assert stored.records[0].content == "User works from home."
    # When the user asks to forget it in their own words
    preview = services.forget_preview(principal=SYSTEM, scope=S, utterance=utterance)
    # Then the forget finds exactly that note
    assert preview.record_ids == (stored.records[0].record_id,)
