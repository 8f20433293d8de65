"""Every stored word is forgettable: messages with no record, by words, episode ID or session.

memory-engine.md "L0 episode" and "Forget"; issue 29, item 5.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from aetnaweb.access import SYSTEM, AccessDenied
from audit.canonical import digest, sha256_text
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from memory import services
from memory.errors import EpisodeNotFound, ForgetPreviewStale, RecordStateError, SelectorError
from memory.models import Episode, Record

pytestmark = pytest.mark.django_db

S = "acme:carol:proj"
PARENT = "acme:carol:*"
WIFI = "The wifi password at the office is tulip-42."
TOOL = Path(__file__).resolve().parents[2] / "tools" / "verify_audit.py"


def payload(event_id: str) -> dict:
    return json.loads(AuditEvent.objects.get(event_id=event_id).payload)


def scene_texts(scope: str = S) -> list[str]:
    scenes = services.scenes(principal=SYSTEM, scope=scope)
    return [episode["text"] for scene in scenes for episode in scene.episodes]


def forget_events() -> int:
    return AuditEvent.objects.filter(event_type="memory.forget").count()


def test_an_ignored_statement_is_forgotten_by_the_users_words():
    # Given a statement the extractor ignores: no record, its text in the episode
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI)
    assert said.records == () and WIFI in scene_texts()
    # When the user asks to forget it
    receipt = services.forget(principal=SYSTEM, scope=S, utterance="forget the wifi password")
    # Then the message's text is purged, no scene serves it, and the receipt lists it
    episode = Episode.objects.get(episode_id=said.episode_id)
    assert (episode.text, episode.is_purged) == ("", True)
    assert "tulip" not in " ".join(scene_texts())
    assert receipt["purged_record_ids"] == [] and receipt["purged_episode_ids"] == [said.episode_id]
    event = payload(receipt["audit_event_id"])
    assert event["purged_episode_ids"] == [said.episode_id] and event["mode"] == "utterance"
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []


def test_a_duplicate_of_an_ancestors_fact_is_forgotten_at_its_own_scope():
    # Given a fact at the user's scope, repeated at the project (no record of its own there)
    services.remember(principal=SYSTEM, scope=PARENT, text="My shoe size is 44.")
    repeated = services.remember(principal=SYSTEM, scope=S, text="My shoe size is 44.")
    assert repeated.records == () and repeated.duplicate_of
    # When the user forgets it at the project
    receipt = services.forget(principal=SYSTEM, scope=S, utterance="forget my shoe size")
    # Then the project's message is purged, and the parent's fact is untouched (no cascade)
    assert receipt["purged_episode_ids"] == [repeated.episode_id]
    assert Episode.objects.get(episode_id=repeated.episode_id).text == ""
    assert Record.objects.get(record_id=repeated.duplicate_of[0]).status == "active"


def test_words_in_a_message_are_matched_as_whole_words_only():
    # Given a message holding "password", and one that does not
    services.remember(principal=SYSTEM, scope=S, text=WIFI)
    other = services.remember(principal=SYSTEM, scope=S, text="The passage north is closed.")
    # When a selector names part of a word, then nothing matches
    with pytest.raises(SelectorError) as refused:
        services.forget(principal=SYSTEM, scope=S, selector="pass")
    assert refused.value.reason == "nothing_matched"
    # And a whole word matches only the message holding it
    receipt = services.forget(principal=SYSTEM, scope=S, selector="PASSWORD")
    assert other.episode_id not in receipt["purged_episode_ids"]
    assert Episode.objects.get(episode_id=other.episode_id).text != ""


def test_a_vague_request_is_refused_even_with_messages_stored(rows):
    # Given stored messages
    services.remember(principal=SYSTEM, scope=S, text=WIFI)
    before = rows()
    # When the request names nothing in particular, then it is refused and writes no purge
    for utterance in ("forget it", "forget everything"):
        with pytest.raises(SelectorError):
            services.forget(principal=SYSTEM, scope=S, utterance=utterance)
    after = rows()
    assert after["episodes"] == before["episodes"] and forget_events() == 0


def test_forget_by_episode_id_purges_the_message_and_every_fact_drawn_from_it():
    # Given a message with a fact, the fact later superseded, and an unrelated message
    first = services.remember(principal=SYSTEM, scope=S, text="My backup email is a@example.com.")
    newer = services.remember(
        principal=SYSTEM, scope=S, text="Use b@example.com as my backup email from now on."
    )
    other = services.remember(principal=SYSTEM, scope=S, text="My car is red.")
    # When the first message is forgotten by its ID
    receipt = services.forget(principal=SYSTEM, scope=S, episode_ids=[first.episode_id])
    # Then its fact goes with its whole lineage (and the newer value's message), the other stays
    assert sorted(receipt["purged_record_ids"]) == sorted(first.record_ids + newer.record_ids)
    assert receipt["purged_episode_ids"] == sorted([first.episode_id, newer.episode_id])
    assert Record.objects.get(record_id=other.record_ids[0]).status == "active"
    event = payload(receipt["audit_event_id"])
    assert event["mode"] == "episode_ids"
    assert event["selector_sha256"] == digest([first.episode_id]) == receipt["selector_sha256"]
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []


def test_forget_by_session_purges_its_messages_and_facts_and_nothing_else():
    # Given two sessions, one with an ignored statement, a fact and an explicit key/value
    ignored = services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    fact = services.remember(principal=SYSTEM, scope=S, text="My car is red.", session_id="s-1")
    keyed = services.remember_fact(
        principal=SYSTEM, scope=S, key="locker", value="12", session_id="s-1"
    )
    kept = services.remember(principal=SYSTEM, scope=S, text="My cat is Tom.", session_id="s-2")
    # When session s-1 is forgotten
    receipt = services.forget(principal=SYSTEM, scope=S, session_id="s-1")
    # Then its messages and facts are purged and session s-2 is untouched
    assert sorted(receipt["purged_record_ids"]) == sorted(fact.record_ids + keyed.record_ids)
    assert receipt["purged_episode_ids"] == sorted([ignored.episode_id, fact.episode_id])
    assert payload(receipt["audit_event_id"])["selector_sha256"] == sha256_text("s-1")
    assert Record.objects.get(record_id=kept.record_ids[0]).status == "active"
    assert [text for text in scene_texts() if text] == ["My cat is Tom."]
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "reason"),
    [
        ({"episode_ids": []}, SelectorError, "empty_selector"),
        ({"episode_ids": "ep_x"}, SelectorError, "bad_episode_ids"),
        ({"episode_ids": ["ep_" + "0" * 32]}, EpisodeNotFound, None),
        ({"session_id": "   "}, SelectorError, "empty_selector"),
        ({"session_id": "no-such-session"}, SelectorError, "nothing_matched"),
        ({"session_id": "s-1", "selector": "wifi"}, SelectorError, "ambiguous_request"),
        ({"episode_ids": ["x"], "record_ids": ["y"]}, SelectorError, "ambiguous_request"),
    ],
)
def test_bad_episode_and_session_forgets_are_refused_and_purge_nothing(rows, kwargs, error, reason):
    # Given a stored message
    services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    before = rows()
    # When the forget names no episode of this scope, or no session that holds words
    with pytest.raises(error) as refused:
        services.forget(principal=SYSTEM, scope=S, **kwargs)
    # Then it is refused with a reason and nothing is purged (a refusal is only recorded)
    if reason:
        assert refused.value.reason == reason
    after = rows()
    assert (after["episodes"], after["records"]) == (before["episodes"], before["records"])
    assert forget_events() == 0
    rejected = AuditEvent.objects.filter(event_type="memory.forget_rejected").count()
    assert rejected == (1 if error is SelectorError else 0)


def test_an_episode_at_another_scope_is_not_found_and_stays(rows):
    # Given a message at the parent scope
    parents = services.remember(principal=SYSTEM, scope=PARENT, text=WIFI)
    before = rows()
    # When a forget at the project names it, then it is not found there (no cascade, no leak)
    with pytest.raises(EpisodeNotFound):
        services.forget(principal=SYSTEM, scope=S, episode_ids=[parents.episode_id])
    assert rows() == before


def test_an_already_purged_message_is_a_state_error(rows):
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI)
    services.forget(principal=SYSTEM, scope=S, episode_ids=[said.episode_id])
    before = rows()
    with pytest.raises(RecordStateError, match="already purged"):
        services.forget(principal=SYSTEM, scope=S, episode_ids=[said.episode_id])
    assert rows() == before


def test_episode_forgets_need_the_forget_capability(rows, principal_for):
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    viewer = principal_for(S, role="viewer")
    before = rows()
    for kwargs in ({"episode_ids": [said.episode_id]}, {"session_id": "s-1"}):
        with pytest.raises(AccessDenied):
            services.forget(principal=viewer, scope=S, **kwargs)
        with pytest.raises(AccessDenied):
            services.forget_preview(principal=viewer, scope=S, **kwargs)
    assert rows() == before


def test_the_preview_lists_the_messages_and_writes_nothing(rows):
    # Given a fact and an ignored statement holding the same words
    fact = services.remember(principal=SYSTEM, scope=S, text="My office is in Leeds.")
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI)
    before = rows()
    # When a forget by those words is previewed
    preview = services.forget_preview(principal=SYSTEM, scope=S, selector="office")
    # Then it lists both messages, saying which matched itself, and writes nothing
    assert rows() == before
    assert preview.record_ids == tuple(fact.record_ids)
    assert preview.episode_ids == tuple(sorted([fact.episode_id, said.episode_id]))
    by_id = {row["episode_id"]: row for row in preview.episodes}
    assert by_id[said.episode_id]["matched"] is True and by_id[said.episode_id]["text"] == WIFI
    assert by_id[fact.episode_id]["text"] == "My office is in Leeds."
    # And applying it with the previewed lists purges exactly those
    receipt = services.forget(
        principal=SYSTEM,
        scope=S,
        selector="office",
        expected_record_ids=list(preview.record_ids),
        expected_episode_ids=list(preview.episode_ids),
    )
    assert receipt["purged_episode_ids"] == list(preview.episode_ids)


def test_a_message_stored_after_the_preview_makes_the_confirmation_stale(rows):
    # Given a preview of a forget by words
    services.remember(principal=SYSTEM, scope=S, text=WIFI)
    preview = services.forget_preview(principal=SYSTEM, scope=S, selector="wifi password")
    # When another message with those words arrives before the confirmation
    services.remember(principal=SYSTEM, scope=S, text="Is the wifi password still tulip-42?")
    before = rows()
    # Then the confirmation is refused as stale (either way of confirming), purging nothing
    for expected in (
        {"expected_episode_ids": list(preview.episode_ids)},
        {"expected_record_ids": list(preview.record_ids)},
    ):
        with pytest.raises(ForgetPreviewStale):
            services.forget(principal=SYSTEM, scope=S, selector="wifi password", **expected)
    assert rows() == before


def test_many_messages_need_a_preview(rows):
    # Given more messages holding the words than a forget may purge unpreviewed
    for n in range(services.MAX_UNPREVIEWED_FORGET + 1):
        services.remember(principal=SYSTEM, scope=S, text=f"The gate code {n} is obsolete.")
    before = rows()
    # When they are forgotten without a preview, then it is refused
    with pytest.raises(SelectorError) as refused:
        services.forget(principal=SYSTEM, scope=S, selector="gate code")
    assert refused.value.reason == "preview_required"
    assert rows()["episodes"] == before["episodes"]
    # And with the previewed lists it goes through
    preview = services.forget_preview(principal=SYSTEM, scope=S, selector="gate code")
    receipt = services.forget(
        principal=SYSTEM,
        scope=S,
        selector="gate code",
        expected_record_ids=[],
        expected_episode_ids=list(preview.episode_ids),
        confirm_count=preview.count,
    )
    assert len(receipt["purged_episode_ids"]) == services.MAX_UNPREVIEWED_FORGET + 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_a_receipt_for_messages_alone_verifies_with_the_standalone_tool(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("tools/verify_audit.py reads SQLite files; the receipt rule is checked above")
    # Given a committed forget of a message that produced no record
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI)
    receipt = services.forget(principal=SYSTEM, scope=S, utterance="forget the wifi password")
    assert receipt["purged_record_ids"] == []
    path = tmp_path / "receipt.json"

    def verify(claimed: dict) -> subprocess.CompletedProcess[str]:
        path.write_text(json.dumps(claimed))
        command = [sys.executable, str(TOOL), connection.settings_dict["NAME"], "--receipt"]
        return subprocess.run(
            [*command, str(path)], capture_output=True, text=True, timeout=60, check=False
        )

    # When the independent verifier checks it against the database, then it verifies
    run = verify(receipt)
    assert run.returncode == 0, run.stdout + run.stderr
    # And the same receipt does not verify once the message's text is back
    Episode.objects.filter(episode_id=said.episode_id).update(text=WIFI)
    assert verify(receipt).returncode == 1
