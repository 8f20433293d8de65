"""Forget that forgets exactly what was asked: lineage, whole words, refusals (issue 9)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from memory import search, services
from memory.errors import ForgetPreviewStale, SelectorError
from memory.extraction import utterance_needle, word_tokens
from memory.models import Episode, Record, RetrievalEvent

S = "acme:carol:audit2"


def status(record_id: str) -> str:
    return Record.objects.get(record_id=record_id).status


def last_event() -> AuditEvent:
    return AuditEvent.objects.order_by("-sequence").first()


def backup_email_lineage() -> tuple[str, str, str, str]:
    old = services.remember(
        principal=SYSTEM, scope=S, text="My backup email is carol.old@example.com."
    )
    new = services.remember(
        principal=SYSTEM, scope=S, text="Use carol.new@example.com as my backup email from now on."
    )
    return old.record_ids[0], new.record_ids[0], old.episode_id, new.episode_id


# -- 1. the whole lineage -----------------------------------------------------------


@pytest.mark.django_db
def test_forgetting_the_current_value_purges_the_superseded_one_too():
    # Given an email corrected once
    old, new, old_episode, new_episode = backup_email_lineage()
    # When the user asks to forget it
    preview = services.forget_preview(principal=SYSTEM, scope=S, utterance="forget my backup email")
    receipt = services.forget(
        principal=SYSTEM,
        scope=S,
        utterance="forget my backup email",
        expected_record_ids=list(preview.record_ids),
    )
    # Then the preview showed both values, and the receipt lists both and their messages
    assert preview.record_ids == (old, new)
    assert receipt["purged_record_ids"] == [old, new]
    assert receipt["purged_episode_ids"] == sorted([old_episode, new_episode])
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []
    # And no row still holds either value
    assert not Record.objects.filter(content__contains="carol.").exists()
    assert not Episode.objects.filter(text__contains="carol.").exists()


@pytest.mark.django_db
def test_a_superseded_record_can_be_forgotten_by_id_with_its_lineage():
    old, new, *_ = backup_email_lineage()
    assert status(old) == "superseded"
    # When the old value is forgotten by its ID
    preview = services.forget_preview(principal=SYSTEM, scope=S, record_ids=[old])
    receipt = services.forget(principal=SYSTEM, scope=S, record_ids=[old])
    # Then the newer value that superseded it goes too (one fact, one lineage)
    assert [r["matched"] for r in preview.records] == [True, False]
    assert receipt["purged_record_ids"] == [old, new]
    assert status(old) == status(new) == "tombstoned"
    assert search.index_size() == 0


@pytest.mark.django_db
def test_matching_a_superseded_value_by_text_purges_its_lineage():
    old, new, *_ = backup_email_lineage()
    receipt = services.forget(principal=SYSTEM, scope=S, selector="carol.old@example.com")
    assert receipt["purged_record_ids"] == [old, new]


@pytest.mark.django_db
def test_expected_ids_must_cover_the_whole_lineage(rows):
    old, new, *_ = backup_email_lineage()
    before = rows()
    # When a caller confirms only the newest value / Then refused, nothing purged
    with pytest.raises(ForgetPreviewStale, match=old):
        services.forget(
            principal=SYSTEM, scope=S, selector="backup email", expected_record_ids=[new]
        )
    assert rows() == before


@pytest.mark.django_db
def test_lineage_stays_within_the_scope_named():
    above = services.remember(
        principal=SYSTEM, scope="acme:carol:*", text="My backup email is carol.p@x.example."
    )
    local = services.remember(
        principal=SYSTEM, scope=S, text="My backup email is carol.q@x.example."
    )
    receipt = services.forget(principal=SYSTEM, scope=S, selector="backup email")
    assert receipt["purged_record_ids"] == [local.record_ids[0]]
    assert status(above.record_ids[0]) == "active"


@pytest.mark.django_db
def test_a_shared_message_loses_its_text_but_the_other_fact_stays():
    # Given one message stating two facts
    both = services.remember(principal=SYSTEM, scope=S, text="My car is red. My bike is blue.")
    car, bike = both.record_ids
    # When one is forgotten
    receipt = services.forget(principal=SYSTEM, scope=S, selector="car")
    # Then the message text (which holds the car too) is cleared; the bike fact stays
    assert receipt["purged_record_ids"] == [car]
    assert receipt["purged_episode_ids"] == [both.episode_id]
    assert Episode.objects.get(episode_id=both.episode_id).text == ""
    assert Record.objects.get(record_id=bike).content == "User's bike is blue."


@pytest.mark.django_db
def test_stored_recall_queries_that_repeat_the_forgotten_value_are_cleared(settings):
    settings.AETNAWEB_STORE_RECALL_QUERIES = True
    services.remember(principal=SYSTEM, scope=S, text="My backup email is carol.old@example.com.")
    considered = services.recall(
        principal=SYSTEM, scope=S, query="backup email please"
    ).retrieval_id
    repeating = services.recall(
        principal=SYSTEM, scope="acme:carol:audit2", query="is carol.old@example.com ok"
    )
    unrelated = services.recall(principal=SYSTEM, scope=S, query="weather tomorrow").retrieval_id
    services.forget(principal=SYSTEM, scope=S, selector="carol.old@example.com")
    texts = dict(RetrievalEvent.objects.values_list("retrieval_id", "query_text"))
    assert texts[considered] == "" and texts[repeating.retrieval_id] == ""
    assert texts[unrelated] == "weather tomorrow"


# -- 2. whole words, and refusals ----------------------------------------------------


@pytest.mark.django_db
def test_needles_match_whole_words_never_inside_a_word():
    meetings = services.remember(
        principal=SYSTEM, scope=S, text="Remember that I hate loud meetings."
    )
    hammer = services.remember(principal=SYSTEM, scope=S, text="My tool is hammer-2.")
    favourite = services.remember(
        principal=SYSTEM, scope=S, text="My favourite colours are teal and rust."
    )
    with pytest.raises(SelectorError, match="nothing matched"):
        services.forget(principal=SYSTEM, scope=S, selector="eet")
    with pytest.raises(SelectorError, match="nothing matched"):
        services.forget(principal=SYSTEM, scope=S, selector="colour")
    receipt = services.forget(principal=SYSTEM, scope=S, selector="HAMMER")
    assert receipt["purged_record_ids"] == hammer.record_ids
    assert status(meetings.record_ids[0]) == status(favourite.record_ids[0]) == "active"


@pytest.mark.django_db
def test_matching_is_case_insensitive_across_unicode():
    ecole = services.remember(
        principal=SYSTEM, scope=S, text="Remember that the École Verte closes at noon."
    )
    strasse = services.remember(principal=SYSTEM, scope=S, text="My street is Ölweg 4.")
    assert services.forget(principal=SYSTEM, scope=S, selector="école verte")[
        "purged_record_ids"
    ] == (ecole.record_ids)
    assert (
        services.forget(principal=SYSTEM, scope=S, selector="ÖLWEG")["purged_record_ids"]
        == strasse.record_ids
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"utterance": "forget it please"},
        {"utterance": "forget me"},
        {"utterance": "forget a"},
        {"utterance": "forget everything"},
        {"utterance": "forget all of it"},
        {"utterance": "forget e"},
        {"selector": "it"},
        {"selector": "me"},
        {"selector": "a"},
        {"selector": "the of and"},
        {"selector": "ab"},
    ],
)
def test_vague_needles_are_refused_and_write_only_the_rejection(rows, request_kwargs):
    # Given records a vague needle would once have matched inside words
    services.remember(principal=SYSTEM, scope=S, text="Remember that I hate loud meetings.")
    services.remember(principal=SYSTEM, scope=S, text="My favourite colours are teal and rust.")
    before = rows()
    # When / Then refused with the message telling the user what to say
    with pytest.raises(SelectorError, match=r"say what to forget, e\.g\. 'forget my backup email'"):
        services.forget(principal=SYSTEM, scope=S, **request_kwargs)
    with pytest.raises(SelectorError, match="too vague"):
        services.forget_preview(principal=SYSTEM, scope=S, **request_kwargs)
    # And only the memory.forget_rejected event was written
    after = rows()
    assert after["records"] == before["records"] and after["episodes"] == before["episodes"]
    assert after["DeletionReceipt"] == before["DeletionReceipt"] == 0
    assert after["AuditEvent"] == before["AuditEvent"] + 1
    event = last_event()
    assert event.event_type == "memory.forget_rejected"
    assert json.loads(event.payload)["reason"] == "vague_selector"


@pytest.mark.django_db
def test_utterances_find_records_in_the_stored_user_wording():
    beef = services.remember(principal=SYSTEM, scope=S, text="I avoid beef.").record_ids[0]
    assert Record.objects.get(record_id=beef).content == "User avoids beef."
    assert services.forget_preview(
        principal=SYSTEM, scope=S, utterance="forget that I avoid beef"
    ).record_ids == (beef,)
    assert services.forget_preview(
        principal=SYSTEM, scope=S, utterance="Forget that I don't eat beef"
    ).record_ids == (beef,)
    receipt = services.forget(
        principal=SYSTEM, scope=S, utterance="please forget that I avoid beef"
    )
    assert receipt["purged_record_ids"] == [beef]


@pytest.mark.django_db
def test_an_utterance_matching_nothing_is_refused_and_recorded(rows):
    services.remember(principal=SYSTEM, scope=S, text="My car is red.")
    before = rows()
    with pytest.raises(SelectorError, match="nothing matched"):
        services.forget_preview(principal=SYSTEM, scope=S, utterance="forget my boat")
    assert rows() == before  # a preview writes nothing, even a refused one
    with pytest.raises(SelectorError, match="nothing matched"):
        services.forget(principal=SYSTEM, scope=S, utterance="forget my boat")
    after = rows()
    assert after["records"] == before["records"]
    assert after["AuditEvent"] == before["AuditEvent"] + 1
    payload = json.loads(last_event().payload)
    assert payload["reason"] == "nothing_matched" and payload["mode"] == "utterance"
    assert "boat" not in last_event().payload


@pytest.mark.django_db
def test_a_broad_forget_needs_the_previewed_ids(rows):
    # Given more matching records than a forget may purge unpreviewed
    for n in range(services.MAX_UNPREVIEWED_FORGET + 1):
        services.remember(
            principal=SYSTEM, scope=S, text=f"Remember that ticket {n} is about the printer."
        )
    before = rows()
    # When applied blind / Then refused, told to preview first, only the rejection written
    with pytest.raises(SelectorError, match="preview first") as caught:
        services.forget(principal=SYSTEM, scope=S, selector="printer")
    assert caught.value.reason == "preview_required"
    after = rows()
    assert after["records"] == before["records"]
    assert after["AuditEvent"] == before["AuditEvent"] + 1
    assert json.loads(last_event().payload)["reason"] == "preview_required"
    # And with the previewed IDs it goes ahead
    preview = services.forget_preview(principal=SYSTEM, scope=S, selector="printer")
    receipt = services.forget(
        principal=SYSTEM,
        scope=S,
        selector="printer",
        expected_record_ids=list(preview.record_ids),
        # Above ten, the count is typed back as well.
        confirm_count=preview.count,
    )
    assert len(receipt["purged_record_ids"]) == services.MAX_UNPREVIEWED_FORGET + 1


@pytest.mark.django_db
def test_a_forget_at_the_bound_applies_without_a_preview():
    for n in range(services.MAX_UNPREVIEWED_FORGET):
        services.remember(
            principal=SYSTEM, scope=S, text=f"Remember that ticket {n} is about the printer."
        )
    receipt = services.forget(principal=SYSTEM, scope=S, selector="printer")
    assert len(receipt["purged_record_ids"]) == services.MAX_UNPREVIEWED_FORGET


# -- the property: nothing but whole-word matches is ever touched -----------------------

WORDS = ["amber", "Amber", "amberly", "hammer", "me", "meetings", "it", "item", "Ölweg", "ölweg"]
word = st.one_of(
    st.sampled_from(WORDS),
    st.text(alphabet="abc\u00c9\u00e9\u00df\u1e9e\u0130\u0131-.' ", min_size=1, max_size=6),
)
content = st.lists(word, min_size=1, max_size=6).map(" ".join).filter(str.strip)
fresh = itertools.count()


@pytest.mark.django_db
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    contents=st.lists(content, min_size=1, max_size=6),
    utterance=st.one_of(
        st.sampled_from(WORDS).map(lambda w: f"forget {w}"),
        st.lists(word, min_size=1, max_size=3).map(lambda ws: "forget my " + " ".join(ws)),
    ),
)
def test_every_purged_record_holds_the_needle_as_whole_words(contents, utterance):
    # Given unkeyed notes (no supersession, so no lineage) at a fresh scope
    scope = f"prop:u{next(fresh)}:*"
    stored = {}
    for text in contents:
        result = services.remember(principal=SYSTEM, scope=scope, text=text, force=True)
        for record in result.records:
            stored[record.record_id] = record.content
    # When the utterance is forgotten (refusals are fine: they touch nothing)
    try:
        receipt = services.forget(principal=SYSTEM, scope=scope, utterance=utterance)
        purged = set(receipt["purged_record_ids"])
    except SelectorError:
        purged = set()
    needle = None
    try:
        needle = utterance_needle(utterance)
    except SelectorError:
        assert purged == set()
    # Then every purged record held one of the needle's phrases as whole words,
    # every record that held one was purged, and nothing else changed
    for record_id, text in stored.items():
        row = Record.objects.get(record_id=record_id)
        tokens = word_tokens(text)
        holds = needle is not None and any(
            tuple(tokens[i : i + len(p)]) == p
            for p in needle.phrases
            for i in range(len(tokens) - len(p) + 1)
        )
        if record_id in purged:
            assert holds and row.status == "tombstoned" and row.content == ""
        else:
            assert row.status == "active" and row.content == text
            assert not (holds and needle is not None and purged)
