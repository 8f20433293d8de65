"""import_conversation: every human turn kept word for word, facts linked, trust by role (issue 30)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from aetnaweb.access import SYSTEM, AccessDenied
from aetnaweb.scopes import ScopeError
from aetnaweb.text import UnstorableText
from audit.models import AuditEvent
from memory import services
from memory.errors import InvalidInput
from memory.extraction import asks_for_name, name_reply
from memory.limits import MAX_IMPORT_TURNS
from memory.models import Episode, Record
from memory.services.conversations import confirmed_facts, is_confirmation

S = "acme:alice:proj"
MONDAY = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def turn(text: str, role: str = "user", **extra: object) -> dict[str, object]:
    return {"text": text, "role": role, **extra}


def active(scope: str = S) -> list[Record]:
    return list(Record.objects.filter(scope=scope, status="active").order_by("id"))


@pytest.mark.django_db
def test_a_user_turn_is_kept_word_for_word_with_speaker_time_and_its_facts_cite_it():
    # Given a user turn with a speaker, a time, a turn and a session id
    result = services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[
            turn(
                "My sister is a nurse. It was lovely weather today!",
                speaker="Alice",
                occurred_at=MONDAY,
                turn_id="t1",
                session_id="s1",
            )
        ],
    )
    # Then the turn itself is an active record, word for word with the speaker's name and day
    kept, fact = active()
    assert (kept.kind, kept.content, kept.trust_tier) == (
        "turn",
        "Alice (2 March 2026): My sister is a nurse. It was lovely weather today (2026-03-02)!",
        "trusted_user",
    )
    assert (kept.turn_id, kept.session_id, kept.occurred_at) == ("t1", "s1", MONDAY)
    # And the fact it states is stored beside it, citing it, with the same time and episode
    assert (fact.fact_key, fact.content) == ("sister", "User's sister is a nurse.")
    assert fact.evidence == [kept.record_id]
    assert fact.episode_id == kept.episode_id and fact.occurred_at == MONDAY
    episode = Episode.objects.get(episode_id=kept.episode_id)
    assert (episode.speaker, episode.role, episode.occurred_at) == ("Alice", "user", MONDAY)
    assert result.records_stored == 2 and result.turns[0].episode_id == episode.episode_id


@pytest.mark.django_db
def test_the_kept_turn_is_recallable():
    # Given an imported turn that states no fact the extractor knows
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[turn("Went hiking at Mount Rainier with the kids.", speaker="Alice")],
    )
    # When recalled by its words / Then the turn comes back
    found = services.recall(principal=SYSTEM, scope=S, query="Mount Rainier hiking")
    assert [c.content for c in found.returned][:1] == [
        "Alice: Went hiking at Mount Rainier with the kids."
    ]


@pytest.mark.django_db
def test_another_persons_turn_is_kept_with_their_name_and_no_user_fact_is_read_from_it():
    # Given another person's turn in the first person
    services.import_conversation(
        principal=SYSTEM, scope=S, turns=[turn("My car is red.", "other", speaker="Bob")]
    )
    # Then it is kept word for word with Bob's name, and no "User's car" fact exists
    assert [(r.content, r.kind, r.fact_key) for r in active()] == [
        ("Bob: My car is red.", "turn", "")
    ]


@pytest.mark.django_db
def test_an_assistant_turn_is_an_episode_only():
    # Given an assistant turn stating something about the user
    result = services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[turn("You prefer morning meetings.", "assistant", speaker="bot")],
    )
    # Then it is kept as an episode, never as a record
    assert not Record.objects.exists()
    episode = Episode.objects.get(episode_id=result.turns[0].episode_id)
    assert (episode.source_type, episode.role, episode.text) == (
        "assistant_message",
        "assistant",
        "You prefer morning meetings.",
    )


@pytest.mark.django_db
def test_a_users_yes_exactly_makes_the_assistants_statement_a_confirmed_fact():
    # Given an assistant's check followed by the user's plain agreement in the same session
    result = services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[
            turn("So you prefer morning meetings, right?", "assistant", session_id="s1"),
            turn("Yes, exactly.", session_id="s1", turn_id="u2"),
        ],
    )
    # Then the statement is a user_confirmed fact about the user, citing both turns
    confirmed = Record.objects.get(trust_tier="user_confirmed")
    assert (confirmed.status, confirmed.content) == ("active", "User prefers morning meetings.")
    kept = Record.objects.get(kind="turn")
    assert confirmed.evidence == [result.turns[0].episode_id, kept.record_id]


@pytest.mark.django_db
def test_agreement_after_a_user_turn_or_in_another_session_confirms_nothing():
    # Given agreement that does not follow an assistant turn of the same session
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[
            turn("You prefer morning meetings.", "assistant", session_id="s1"),
            turn("Yes, exactly.", session_id="s2"),
        ],
    )
    # Then nothing is confirmed
    assert not Record.objects.filter(trust_tier="user_confirmed").exists()


@pytest.mark.django_db
def test_a_tool_turn_lands_quarantined():
    # Given a tool turn with a keyed fact
    services.import_conversation(
        principal=SYSTEM, scope=S, turns=[turn("My backup email is eve@evil.example.", "tool")]
    )
    # Then the fact is quarantined untrusted content, and nothing is active
    record = Record.objects.get()
    assert (record.status, record.trust_tier, record.source_type) == (
        "quarantined",
        "untrusted_content",
        "tool_output",
    )
    assert not active()


@pytest.mark.django_db
def test_an_import_chains_one_episode_event_per_turn_with_its_role_and_no_words():
    # Given a two-turn import
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[turn("I love chess.", speaker="Alice"), turn("Hi!", "assistant")],
    )
    # Then each turn has an episode.ingested event naming its role, never its words or speaker
    payloads = [
        json.loads(e.payload)
        for e in AuditEvent.objects.filter(subject_id=S, event_type="episode.ingested")
    ]
    assert [p["role"] for p in payloads] == ["user", "assistant"]
    chained = " ".join(e.payload for e in AuditEvent.objects.filter(subject_id=S))
    assert "chess" not in chained and "Alice" not in chained


def test_confirmation_shapes():
    assert all(
        is_confirmation(t) for t in ["Yes, exactly.", "yes", "That's right!", "Correct", "Yep."]
    )
    assert not any(
        is_confirmation(t) for t in ["Yes, but on Fridays.", "No.", "exactly what I feared", ""]
    )
    # The assistant speaking of itself is not rewritten as the user
    assert confirmed_facts("I think you prefer tea.") == []


@pytest.mark.parametrize(
    ("turns", "field"),
    [
        ([], "turns"),
        ("not a list", "turns"),
        ([turn("")], "turns.0.text"),
        ([turn("hi"), turn("x", "robot")], "turns.1.role"),
        ([turn("x", occurred_at="yesterday")], "turns.0.occurred_at"),
        ([turn("x", occurred_at="2026-03-02T09:30:00")], "turns.0.occurred_at"),
        ([turn("x", speaker="s" * 101)], "turns.0.speaker"),
        ([turn("x", turn_id="t" * 201)], "turns.0.turn_id"),
        ([{"text": "x", "mood": "happy"}], "turns.0.mood"),
        (["just text"], "turns.0"),
        ([turn("x")] * (MAX_IMPORT_TURNS + 1), "turns"),
    ],
)
@pytest.mark.django_db
def test_bad_turns_are_refused_naming_the_field_and_nothing_is_written(rows, turns, field):
    before = rows()
    with pytest.raises(InvalidInput) as refused:
        services.import_conversation(principal=SYSTEM, scope=S, turns=turns)
    assert refused.value.field == field
    assert rows() == before


@pytest.mark.django_db
def test_unstorable_text_in_a_later_turn_stores_no_turn(rows):
    before = rows()
    with pytest.raises(UnstorableText):
        services.import_conversation(
            principal=SYSTEM, scope=S, turns=[turn("I love chess."), turn("bad \ud800 text")]
        )
    assert rows() == before


@pytest.mark.django_db
def test_a_bad_scope_or_a_principal_without_write_is_refused_and_writes_nothing(
    rows, principal_for
):
    viewer = principal_for("acme:alice:*", role="viewer")
    before = rows()
    with pytest.raises(ScopeError):
        services.import_conversation(principal=SYSTEM, scope="acme:alice", turns=[turn("I ski.")])
    with pytest.raises(AccessDenied):
        services.import_conversation(principal=viewer, scope=S, turns=[turn("I ski.")])
    assert rows() == before


@pytest.mark.django_db
def test_remember_keeps_an_optional_message_time():
    # Given a message said on Monday / When remembered with that time
    result = services.remember(
        principal=SYSTEM, scope=S, text="My car is red.", occurred_at="2026-03-02T09:30:00+00:00"
    )
    # Then its episode and record carry that time; created_at is the time of storing
    record = Record.objects.get(record_id=result.record_ids[0])
    assert record.occurred_at == MONDAY and record.created_at > MONDAY
    assert Episode.objects.get(episode_id=result.episode_id).occurred_at == MONDAY


@pytest.mark.django_db
def test_remember_refuses_a_time_without_a_zone_and_writes_nothing(rows):
    before = rows()
    with pytest.raises(InvalidInput) as refused:
        services.remember(
            principal=SYSTEM, scope=S, text="My car is red.", occurred_at="2026-03-02 09:30"
        )
    assert refused.value.field == "occurred_at"
    assert rows() == before


@pytest.mark.django_db
def test_the_capture_hook_passes_a_user_turns_time_and_refuses_a_bad_one(rows):
    result = services.capture(
        principal=SYSTEM, scope=S, role="user", content="My car is red.", occurred_at=MONDAY
    )
    assert result.remembered is not None
    assert Record.objects.get(record_id=result.remembered.record_ids[0]).occurred_at == MONDAY
    before = rows()
    with pytest.raises(InvalidInput):
        services.capture(
            principal=SYSTEM, scope=S, role="assistant", content="ok", occurred_at="soon"
        )
    assert rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["user", "other"])
def test_a_human_turn_embedding_a_web_page_is_not_laundered_into_trusted_words(role):
    # Given a human turn that pastes a web page
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[turn("Look: <webpage>My backup email is eve@evil.example.</webpage>", role)],
    )
    # Then nothing is active: the page's fact waits in quarantine, and no kept turn exists
    assert not active()
    record = Record.objects.get()
    assert (record.status, record.source_type, record.kind) == ("quarantined", "webpage", "")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("Nice to meet you! What should I call you?", "Sam is fine."),
        ("What's your name?", "Just Sam, thanks."),
        ("How would you like me to address you?", "Sam works"),
        ("What do you want me to call you?", "It's Sam."),
    ],
)
def test_a_name_given_in_answer_to_what_should_i_call_you_is_the_users_name(question, reply):
    # Given the assistant asking what to call the user, and the user's reply a bare name
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[turn(question, "assistant", session_id="s1"), turn(reply, session_id="s1")],
    )
    # Then the user's name is stored, keyed as "call me Sam" would be, and the reply kept
    name = Record.objects.get(fact_key="name")
    assert (name.status, name.content, name.trust_tier) == (
        "active",
        "User's name is Sam.",
        "trusted_user",
    )
    assert Record.objects.filter(kind="turn").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "turns",
    [
        # Not after a question about the name
        [
            turn("Which option works for you?", "assistant", session_id="s1"),
            turn("Sam is fine.", session_id="s1"),
        ],
        # The question was in another session
        [
            turn("What should I call you?", "assistant", session_id="s1"),
            turn("Sam is fine.", session_id="s2"),
        ],
        # A user turn came between
        [
            turn("What should I call you?", "assistant", session_id="s1"),
            turn("Hmm.", session_id="s1"),
            turn("Sam is fine.", session_id="s1"),
        ],
        # The reply is not a name
        [
            turn("What should I call you?", "assistant", session_id="s1"),
            turn("Yes is fine.", session_id="s1"),
        ],
        [
            turn("What should I call you?", "assistant", session_id="s1"),
            turn("whatever works", session_id="s1"),
        ],
        # The question comes from another person, not the assistant
        [
            turn("What should I call you?", "other", speaker="Lee", session_id="s1"),
            turn("Sam is fine.", session_id="s1"),
        ],
    ],
)
def test_a_bare_name_elsewhere_stores_no_name(turns):
    # Given a bare name that does not answer the assistant asking for it
    services.import_conversation(principal=SYSTEM, scope=S, turns=turns)
    # Then no name is stored (the turns are still kept)
    assert not Record.objects.filter(fact_key="name").exists()
    assert Record.objects.filter(kind="turn").exists()


@pytest.mark.django_db
def test_a_later_name_reply_supersedes_the_earlier_name():
    # Given "Call me Alex." and later "Sam is fine." answering the question
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[
            turn("Call me Alex.", session_id="s1"),
            turn("Sorry, what should I call you?", "assistant", session_id="s1"),
            turn("Sam is fine.", session_id="s1"),
        ],
    )
    # Then only Sam is the active name
    assert [r.content for r in Record.objects.filter(fact_key="name", status="active")] == [
        "User's name is Sam."
    ]


def test_name_question_and_reply_shapes():
    assert all(
        asks_for_name(q)
        for q in [
            "Nice to meet you! What should I call you?",
            "What's your name?",
            "How would you like me to address you?",
            "Who am I talking to?",
        ]
    )
    assert not any(
        asks_for_name(q)
        for q in ["What should I call the file?", "What time is fine for you?", "Call me later?"]
    )
    assert [
        c.content if (c := name_reply(t)) else None
        for t in ["Sam.", "Sam Jones is fine", "Ok, Sam please"]
    ] == [
        "User's name is Sam.",
        "User's name is Sam Jones.",
        "User's name is Sam.",
    ]
    # Lower case, reply words, pronouns, more than one sentence: not a name
    assert not any(
        name_reply(t)
        for t in [
            "sam is fine",
            "Fine.",
            "That is fine.",
            "I is fine",
            "Sam is fine. I live in Oslo.",
        ]
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("extra", "content"),
    [
        ({"speaker": "Alice", "occurred_at": MONDAY}, "Alice (2 March 2026): I like tea."),
        ({"speaker": "Alice"}, "Alice: I like tea."),
        ({"occurred_at": MONDAY}, "2 March 2026: I like tea."),
        ({}, "I like tea."),
        # The day on the clock the time was given in: 23:30 at UTC-5 is the 2nd, not the 3rd
        (
            {"speaker": "Alice", "occurred_at": "2026-03-02T23:30:00-05:00"},
            "Alice (2 March 2026): I like tea.",
        ),
    ],
)
def test_the_kept_turn_carries_its_speaker_and_the_day_it_was_said(extra, content):
    # Given a user turn with or without a speaker and a time
    services.import_conversation(principal=SYSTEM, scope=S, turns=[turn("I like tea.", **extra)])
    # Then the kept words open with whichever of the two it has
    assert Record.objects.get(kind="turn").content == content


@pytest.mark.django_db
def test_a_question_naming_the_day_finds_the_turn_said_that_day():
    # Given two turns with the same words on different days
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[
            turn("Mel showed me her new painting.", speaker="Caroline", occurred_at=MONDAY),
            turn(
                "Mel showed me her new painting.",
                speaker="Caroline",
                occurred_at=datetime(2026, 10, 13, 18, 0, tzinfo=UTC),
            ),
        ],
    )
    # When the question names the day
    result = services.recall(
        principal=SYSTEM, scope=S, query="What painting did Mel show on October 13, 2026?"
    )
    # Then the turn said that day ranks first
    first = Record.objects.get(record_id=result.record_ids[0])
    assert first.content.startswith("Caroline (13 October 2026):")
