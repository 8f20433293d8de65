"""Readable audit (issue 13, loop 7): a one-line summary per event type, review reasons
readable by reviewers of the scope, copy buttons, and one time format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from aetnaweb.access import SYSTEM
from aetnaweb.templatetags.dashboard import when
from audit.models import AuditEvent
from audit.readable import SUMMARIES, event_summary
from memory import services
from memory.models import ReviewReason
from tests.factories import login_as, make_operator

SCOPE = "acme:alice:proj"


def event(event_type: str, payload: str, actor: str = "rita", record_id: str | None = None):
    return AuditEvent(event_type=event_type, payload=payload, actor=actor, record_id=record_id)


@pytest.mark.parametrize(
    ("event_type", "payload", "summary"),
    [
        ("memory.recall", '{"candidate_count": 7, "returned_ids": ["a", "b"]}',
         "rita recalled: 2 of 7 candidates returned"),
        ("memory.record_promoted", '{"record_id": "mem_0123456789abcdef", "superseded_ids": ["x"]}',
         "rita promoted mem_0123456789ab…, superseding 1"),
        ("memory.forget", '{"count": 1}', "rita forgot 1 record"),
        ("action.aborted", '{"reason_category": "denied", "aborted_by": "april"}',
         "april denied the plan"),
        ("action.resolution_recorded", '{"outcome": "fixed_by_hand", "owner": "ops"}',
         "rita recorded a resolution (fixed by hand, owner ops)"),
        ("agent.note", "{}", "rita: agent.note"),  # unknown type: its name
        ("memory.recall", "not json", "rita recalled: 0 of 0 candidates returned"),
        ("memory.recall", '{"candidate_count": "many", "returned_ids": 5}',
         "rita recalled: 5 of 0 candidates returned"),
        ("memory.forget", "[1, 2]", "rita forgot 0 records"),
    ],
)  # fmt: skip
def test_each_event_type_reads_as_one_line(event_type, payload, summary):
    assert event_summary(event(event_type, payload)) == summary


def test_every_known_type_has_a_summary_that_survives_an_empty_payload():
    for event_type in SUMMARIES:
        text = event_summary(event(event_type, "{}"))
        assert text and "\n" not in text


@pytest.mark.django_db
def test_the_explorer_and_event_page_show_the_summary(client):
    services.remember(principal=SYSTEM, scope=SCOPE, text="My editor is helix.")
    services.recall(principal=SYSTEM, scope=SCOPE, query="editor")
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    html = client.get(reverse("audit:explorer"), {"event_type": "memory.recall"}).content.decode()
    assert 'class="event-summary">agent recalled: 1 of 1 candidate returned<' in html
    recall = AuditEvent.objects.get(event_type="memory.recall")
    page = client.get(reverse("audit:event", args=[recall.event_id])).content.decode()
    assert "Agent recalled: 1 of 1 candidate returned." in page


# -- review reasons --------------------------------------------------------------------------


@pytest.fixture
def promoted(db):
    record = services.remember(
        principal=SYSTEM, scope=SCOPE, text="Read: <webpage>My shell is fish.</webpage>"
    ).records[0]
    services.promote(
        principal=SYSTEM, scope=SCOPE, record_id=record.record_id, reason="the user <b>said</b> so"
    )
    return record.record_id


@pytest.mark.django_db
def test_a_reviewer_reads_the_reason_a_viewer_does_not(client, promoted):
    url = reverse("memory:record", args=[promoted])
    login_as(client, make_operator("rex", [("acme:alice:*", "reviewer")]))
    assert "the user &lt;b&gt;said&lt;/b&gt; so" in client.get(url).content.decode()
    login_as(client, make_operator("vic", [("acme:alice:*", "viewer")]))
    html = client.get(url).content.decode()
    assert "said" not in html and "Reason given" not in html


@pytest.mark.django_db
def test_the_chain_keeps_only_the_reason_digest_and_forget_clears_the_text(promoted):
    event = AuditEvent.objects.get(event_type="memory.record_promoted")
    assert "said" not in event.payload and "reason_sha256" in event.payload
    assert ReviewReason.objects.get(record_id=promoted).reason == "the user <b>said</b> so"
    services.forget(principal=SYSTEM, scope=SCOPE, record_ids=[promoted])
    assert ReviewReason.objects.get(record_id=promoted).reason == ""


@pytest.mark.django_db
def test_a_reject_reason_is_kept_and_a_missing_reason_stores_nothing(db):
    one, two = (
        services.remember(
            principal=SYSTEM, scope=SCOPE, text=f"Read: <webpage>My {w} is {w}x.</webpage>"
        ).records[0]
        for w in ("pager", "shell")
    )
    services.reject(principal=SYSTEM, scope=SCOPE, record_id=one.record_id, reason="injected")
    services.promote(principal=SYSTEM, scope=SCOPE, record_id=two.record_id)
    assert list(ReviewReason.objects.values_list("decision", "reason")) == [("reject", "injected")]


# -- copy buttons and time --------------------------------------------------------------------


@pytest.mark.django_db
def test_copy_buttons_carry_the_value_escaped_and_start_hidden(client, promoted):
    login_as(client, make_operator("vic", [("acme:alice:*", "viewer")]))
    html = client.get(reverse("memory:record", args=[promoted])).content.decode()
    assert f'data-copy="{promoted}" aria-label="Copy record ID" hidden>Copy</button>' in html
    assert 'src="/static/js/copy.js"' in html
    rendered = Template('{% copy_button value "x" %}').render(Context({"value": '"><script>'}))
    assert 'data-copy="&quot;&gt;&lt;script&gt;"' in rendered


def test_when_is_relative_with_the_exact_utc_time_on_hover():
    now = timezone.now()
    recent = when(now - timedelta(minutes=5))
    assert ">5 minutes ago</time>" in recent
    assert f'title="{(now - timedelta(minutes=5)).astimezone(UTC):%Y-%m-%d %H:%M}' in recent
    old = when("2026-01-05T10:00:00+00:00")
    assert old == (
        '<time datetime="2026-01-05T10:00:00Z" title="2026-01-05 10:00:00 UTC">'
        "2026-01-05 10:00 UTC</time>"
    )
    assert when(datetime(2026, 1, 5, 11, 0)).startswith('<time datetime="2026-01-05T11:00:00Z"')
    assert when("") == "" and when("not a time") == "not a time"
    assert "just now" in when(now)


@pytest.mark.django_db
def test_the_one_time_token_secret_has_a_copy_button(client):
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = make_operator("adm", [("acme:*:*", "admin")])
    html = render_to_string(
        "access/token_created.html", {"secret": "aetna_s3cr3t", "token": None}, request=request
    )
    assert 'data-copy="aetna_s3cr3t" aria-label="Copy the token"' in html
