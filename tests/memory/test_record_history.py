"""A record's history as a timeline (issue 33 item 4): values, events, sources, purges, reach."""

from __future__ import annotations

import pytest
from django.urls import reverse

from aetnaweb.access import SYSTEM, operator_principal
from memory import selectors, services
from memory.corrections import correct_record
from memory.models import Record
from tests.factories import access_matrix, login_as, make_operator

SCOPE = "acme:alice:*"


def say(text: str, session: str, **extra):
    return services.remember(
        scope=SCOPE, text=text, session_id=session, principal=SYSTEM, actor="user", **extra
    )


def lineage():
    """blue, then green (replacing blue), then red proposed by a tool and promoted."""
    blue = say("My favourite colour is blue", "chat-1").records[0].record_id
    green = say("My favourite colour is green", "chat-2").records[0].record_id
    red = (
        say("My favourite colour is red", "chat-3", source_type="tool_output").records[0].record_id
    )
    reviewer = make_operator("rita", [(SCOPE, "reviewer")])
    services.promote(
        scope=SCOPE,
        record_id=red,
        reason="she said so on the call",
        principal=operator_principal(reviewer),
    )
    return blue, green, red


def url(record_id: str) -> str:
    return reverse("memory:record_history", args=[record_id])


@pytest.mark.django_db
def test_the_history_lists_each_value_and_who_did_what_oldest_first():
    # Given a fact that changed twice, the last change proposed by a tool and promoted
    blue, green, red = lineage()
    viewer = operator_principal(make_operator("vic", [(SCOPE, "reviewer")]))
    # When its history is read from the middle value
    history = selectors.record_history(viewer, green)
    # Then every value is there, oldest first
    assert [v.record_id for v in history.values] == [blue, green, red]
    # And the events say what happened, to which value, by whom
    steps = [(e.verb, e.record.record_id, e.event.actor) for e in history.entries]
    assert steps == [
        ("created", blue, "user"),
        ("created", green, "user"),
        ("proposed", red, "user"),
        ("promoted", red, "rita"),
    ]
    created_green, promoted = history.entries[1], history.entries[3]
    assert created_green.replaced.record_id == blue
    assert promoted.replaced.record_id == green
    assert promoted.reason == "she said so on the call"
    # And the storing events carry their source message
    assert history.entries[0].episode.session_id == "chat-1"
    assert "blue" in history.entries[0].episode.text


@pytest.mark.django_db
def test_the_page_shows_the_timeline_and_the_record_page_links_to_it(client):
    _blue, green, _red = lineage()
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    record_page = client.get(reverse("memory:record", args=[green])).content.decode()
    assert f'href="{url(green)}"' in record_page
    html = client.get(url(green)).content.decode()
    for text in (
        "favourite colour is blue",
        "favourite colour is green",
        "favourite colour is red",
    ):
        assert text in html
    assert "Promoted</strong>" in html and "rita" in html
    assert "chat-1" in html  # the source message's session
    # A viewer does not see a reviewer's typed reason
    assert "she said so on the call" not in html


@pytest.mark.django_db
def test_a_forgotten_value_shows_as_forgotten_with_its_receipt_never_its_content(client):
    # Given a lineage whose newest value was forgotten (which purges the whole lineage)
    _blue, _green, red = lineage()
    receipt = services.forget(scope=SCOPE, record_ids=[red], principal=SYSTEM, actor="user")
    login_as(client, make_operator("vic", [(SCOPE, "reviewer")]))
    # When its history is opened
    html = client.get(url(red)).content.decode()
    # Then no value's content or source text is shown, and the receipt is linked
    for word in ("blue", "green", "red is", "favourite colour is"):
        assert word not in html
    assert "Forgotten</strong>" in html
    event_id = receipt["audit_event_id"]
    assert reverse("memory:receipt", args=[event_id]) in html


@pytest.mark.django_db
def test_a_row_put_back_after_its_chain_purged_it_still_shows_forgotten(client):
    # Given a forgotten value whose row was set back outside aetnaweb
    blue = say("My favourite colour is blue", "chat-1").records[0].record_id
    services.forget(scope=SCOPE, record_ids=[blue], principal=SYSTEM, actor="user")
    Record.objects.filter(record_id=blue).update(
        status="active", content="User's favourite colour is blue."
    )
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    # When its history is opened, the purge marker wins over the row
    html = client.get(url(blue)).content.decode()
    assert "favourite colour is blue" not in html
    assert "forgotten: content purged" in html


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_permission_matrix(client, case):
    blue = say("My favourite colour is blue", "chat-1").records[0].record_id
    case.sign_in(client)
    case.check(client.get(url(blue)))


@pytest.mark.django_db
def test_an_unknown_record_is_a_404(client):
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    assert client.get(url("mem_" + "0" * 32)).status_code == 404


@pytest.mark.django_db
def test_the_page_reads_in_a_bounded_number_of_queries(client, django_assert_max_num_queries):
    _blue, _green, _red = lineage()
    for n in range(5):
        say(f"My favourite colour is shade {n}", f"chat-x{n}")
    newest = Record.objects.filter(scope=SCOPE, status="active").get().record_id
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    with django_assert_max_num_queries(30):
        response = client.get(url(newest))
    assert response.status_code == 200
    assert response.content.decode().count('class="timeline-entry') == 9


@pytest.mark.django_db
def test_an_ancestor_reader_sees_the_values_but_not_the_source_messages(client):
    # Given a record at acme:alice:* and an operator granted only below it
    blue = say("My favourite colour is blue", "chat-1").records[0].record_id
    login_as(client, make_operator("pat", [("acme:alice:proj", "viewer")]))
    # When they open its history (they may read the ancestor's records, as recall does)
    response = client.get(url(blue))
    # Then the value shows, but not the stored message it came from
    assert response.status_code == 200
    html = response.content.decode()
    assert "favourite colour is blue" in html
    assert "My favourite colour is blue" not in html and "From message" not in html


@pytest.mark.django_db
def test_a_correction_shows_who_corrected_which_value_to_what():
    # Given a stated fact, then corrected by a reviewer
    blue = say("My favourite colour is blue", "chat-1").records[0].record_id
    fixer = make_operator("fay", [(SCOPE, "admin")])
    result = correct_record(
        record_id=blue,
        content="User's favourite colour is teal.",
        principal=operator_principal(fixer),
    )
    # When the history is read from the old value
    history = selectors.record_history(SYSTEM, blue)
    # Then the correction names who made it, the new value and the value it replaced
    corrected = next(e for e in history.entries if e.verb == "corrected")
    assert corrected.event.actor == "fay"
    assert corrected.record.record_id == result.record.record_id
    assert corrected.record.content == "User's favourite colour is teal."
    assert corrected.replaced.record_id == blue
    assert [v.record_id for v in history.values] == [blue, result.record.record_id]
