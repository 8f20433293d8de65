"""Forget of stored messages from the command line and the dashboard (issue 29, item 5)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import services
from memory.models import Episode
from tests.factories import login_as, make_operator

pytestmark = pytest.mark.django_db

S = "acme:alice:proj"
WIFI = "The wifi password at the office is tulip-42."


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("memory", *args, stdout=out)
    return out.getvalue()


# -- command ---------------------------------------------------------------------------


def test_the_command_previews_and_forgets_a_message_by_id():
    # Given an ignored statement
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI)
    # When its forget is previewed, then the text is shown and nothing is purged
    preview = run("forget", S, "--episode-id", said.episode_id, "--preview")
    assert f"{said.episode_id} (matched): {WIFI}" in preview
    assert Episode.objects.get(episode_id=said.episode_id).text == WIFI
    # When it is forgotten with the previewed ID as the expectation
    receipt = json.loads(
        run(
            "--json",
            "forget",
            S,
            "--episode-id",
            said.episode_id,
            "--expect-episode",
            said.episode_id,
        )
    )
    # Then the receipt lists it and its text is gone
    assert receipt["purged_episode_ids"] == [said.episode_id]
    assert Episode.objects.get(episode_id=said.episode_id).text == ""


def test_the_command_forgets_a_session_and_words_reach_messages():
    services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    other = services.remember(principal=SYSTEM, scope=S, text="The gate code is 9911.")
    assert "1 episode(s)" in run("forget", S, "--session", "s-1")
    assert "1 episode(s)" in run("forget", S, "--selector", "gate code")
    assert Episode.objects.get(episode_id=other.episode_id).text == ""


@pytest.mark.parametrize(
    "args",
    [
        ("forget", S, "--episode-id", "ep_" + "0" * 32),
        ("forget", S, "--session", "nobody"),
        ("forget", S, "--session", "s-1", "--selector", "wifi"),
    ],
)
def test_command_refusals_are_one_line_and_purge_nothing(rows, args):
    services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    before = rows()
    with pytest.raises(CommandError) as caught:
        call_command("memory", *args, stdout=io.StringIO())
    assert caught.value.returncode == 2 and "\n" not in str(caught.value)
    after = rows()
    assert (after["episodes"], after["records"]) == (before["episodes"], before["records"])


# -- dashboard -------------------------------------------------------------------------


@pytest.fixture
def reviewer(client):
    login_as(client, make_operator("rita", [("acme:alice:*", "reviewer")]))
    return client


def forget_url() -> str:
    return reverse("memory:forget", args=[S])


def test_the_dashboard_previews_then_forgets_a_message_by_its_words(reviewer):
    # Given an ignored statement
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI)
    # When an operator previews a forget by its words
    preview = reviewer.post(forget_url(), {"step": "preview", "selector": "wifi password"})
    page = preview.content.decode()
    # Then the preview shows the message and offers to forget exactly it
    assert preview.status_code == 200
    assert WIFI in page and "1 stored message" in page
    assert f'name="expected_episode_ids" value="{said.episode_id}"' in page
    assert Episode.objects.get(episode_id=said.episode_id).text == WIFI
    # When the operator confirms
    applied = reviewer.post(
        forget_url(),
        {
            "step": "apply",
            "selector": "wifi password",
            "expected_episode_ids": [said.episode_id],
        },
    )
    # Then it is purged and the receipt page lists it
    assert applied.status_code == 302
    assert Episode.objects.get(episode_id=said.episode_id).text == ""
    receipt = reviewer.get(applied["Location"]).content.decode()
    assert said.episode_id in receipt


@pytest.mark.parametrize(
    "fields",
    [
        lambda said: {"episode_ids": said.episode_id},
        lambda said: {"session_id": "s-1"},
    ],
)
def test_the_dashboard_forgets_by_message_id_or_session(reviewer, fields):
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    preview = reviewer.post(forget_url(), {"step": "preview", **fields(said)})
    assert preview.status_code == 200 and WIFI in preview.content.decode()
    applied = reviewer.post(
        forget_url(),
        {"step": "apply", **fields(said), "expected_episode_ids": [said.episode_id]},
    )
    assert applied.status_code == 302
    assert Episode.objects.get(episode_id=said.episode_id).text == ""


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"episode_ids": "not-an-id"}, "is not a message ID"),
        ({"episode_ids": "ep_" + "0" * 32}, "no episode"),
        ({"session_id": "s-1", "selector": "wifi"}, "one thing at a time"),
        ({"session_id": "nobody"}, "nothing matched"),
    ],
)
def test_the_dashboard_refuses_bad_requests_and_purges_nothing(reviewer, rows, fields, message):
    services.remember(principal=SYSTEM, scope=S, text=WIFI, session_id="s-1")
    before = rows()
    response = reviewer.post(forget_url(), {"step": "preview", **fields})
    assert response.status_code == 400
    assert message.lower() in response.content.decode().lower()
    assert rows() == before
    assert not AuditEvent.objects.filter(event_type="memory.forget").exists()


def test_an_apply_without_a_preview_is_refused(reviewer, rows):
    said = services.remember(principal=SYSTEM, scope=S, text=WIFI)
    before = rows()
    response = reviewer.post(forget_url(), {"step": "apply", "episode_ids": said.episode_id})
    assert response.status_code == 400
    assert "Nothing was previewed" in response.content.decode()
    assert rows() == before
