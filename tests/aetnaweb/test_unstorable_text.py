"""Issue 10 item 2: text no store can keep (a lone surrogate, NUL) is refused at every
boundary, and a bad string that is already stored never breaks a page.

A lone surrogate (``"\\ud800"`` in JSON) cannot be encoded as UTF-8: stored once
in an append-only audit row, it made every page that showed it a 500 for good.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from django import forms
from django.core.management import CommandError, call_command
from django.urls import reverse

from actions import services as action_services
from actions.models import ActionPayload, ActionTransaction
from aetnaweb.access import SYSTEM
from aetnaweb.text import (
    REPLACEMENT,
    StorableTextMixin,
    UnstorableText,
    check_storable_text,
    displayable,
    unstorable_text_in,
)
from audit.models import AuditEvent
from memory import services as memory_services
from memory.forms import ForgetForm
from memory.models import Episode, Record
from tests.actions.conftest import write_op
from tests.api.conftest import issue_token
from tests.audit.conftest import tamper
from tests.factories import login_as, make_operator
from tests.mcp.conftest import REPO, subprocess_env

SCOPE = "acme:alice:proj"
LONE = "\ud800"


@pytest.fixture(autouse=True)
def _authorizing_messages(authorizing_messages) -> None:
    """The user message the action evidence here cites exists (evidence must resolve)."""


@pytest.fixture
def actions_root(tmp_path, settings):
    root = tmp_path / "root"
    root.mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(root)
    return root


def row_counts() -> tuple[int, int, int, int]:
    return (
        AuditEvent.objects.count(),
        Record.objects.count(),
        Episode.objects.count(),
        ActionTransaction.objects.count(),
    )


# -- the shared rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("ok\ud800", ""),
        ("ok\udfff", ""),
        ("a\x00b", ""),
        ({"k": ["fine", {"deep": "x\udc80"}]}, "k.1.deep"),
        ({"bad\ud800key": 1}, ""),
        ({"outer": {"bad\x00key": 1}}, "outer"),
        (("t", "u\ud800"), "1"),
    ],
)
def test_unstorable_text_is_found_with_its_path(value, where):
    # Given a value hiding bad text; when it is checked; then the path names where
    found = unstorable_text_in(value)
    assert found is not None and found[0] == where


@pytest.mark.parametrize("value", ["plain", "emoji \U0001f600 and é", {"k": [1, 2.5, None, True]}])
def test_storable_text_passes(value):
    assert unstorable_text_in(value) is None
    check_storable_text(value, "field")


def test_refusal_names_the_field_and_never_echoes_the_character():
    # When a payload hides a surrogate
    with pytest.raises(UnstorableText) as caught:
        check_storable_text({"k": LONE}, "payload")
    # Then the field is named and the message itself is encodable
    assert caught.value.field == "payload.k"
    str(caught.value).encode("utf-8")
    assert "unpaired surrogate" in str(caught.value)


def test_displayable_replaces_only_unencodable_code_points():
    assert displayable("a\ud800b\U0001f600") == f"a{REPLACEMENT}b\U0001f600"


# -- services: the last line of defence --------------------------------------------------------


@pytest.mark.django_db
def test_log_action_service_refuses_a_surrogate_and_writes_nothing():
    before = row_counts()
    with pytest.raises(UnstorableText) as caught:
        memory_services.log_action(
            principal=SYSTEM, scope=SCOPE, event_type="agent.x", payload={"k": LONE}
        )
    assert caught.value.field == "payload.k"
    assert row_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("text", [f"My pet is {LONE}", "My pet is fi\x00do"])
def test_remember_service_refuses_bad_text_and_writes_nothing(text):
    before = row_counts()
    with pytest.raises(UnstorableText) as caught:
        memory_services.remember(principal=SYSTEM, scope=SCOPE, text=text)
    assert caught.value.field == "text"
    assert row_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("operation", "field"),
    [
        (write_op("a\udc80.txt", "x"), "operations.0.arguments.path"),
        (write_op("a.txt", f"x{LONE}"), "operations.0.arguments.content"),
    ],
)
def test_stage_service_refuses_bad_text_and_writes_nothing(actions_root, operation, field):
    before = row_counts()
    with pytest.raises(UnstorableText) as caught:
        action_services.stage(principal=SYSTEM, scope=SCOPE, operations=[operation])
    assert caught.value.field == field
    assert row_counts() == before


@pytest.mark.django_db
def test_append_event_refuses_a_surrogate_in_any_argument():
    from django.db import transaction

    from audit.services import append_event

    with pytest.raises(UnstorableText), transaction.atomic():
        append_event(subject=SCOPE, event_type="agent.x", actor=f"a{LONE}", payload={})
    assert AuditEvent.objects.count() == 0


# -- the HTTP API --------------------------------------------------------------------------------


BAD_BODIES = [
    (
        "/memory/log-action",
        r'{"scope": "acme:alice:proj", "event_type": "agent.x", "payload": {"k": "\ud800"}}',
        "payload.k",
    ),
    (
        "/memory/log-action",
        r'{"scope": "acme:alice:proj", "event_type": "agent.x", "payload": {"\udfff": 1}}',
        "payload",
    ),
    ("/memory/remember", r'{"scope": "acme:alice:proj", "text": "My pet is \udc80"}', "text"),
    (
        "/actions/stage",
        r'{"scope": "acme:alice:proj", "operations": [{"key": "w1", "adapter": "filesystem",'
        r' "operation": "write_text", "arguments": {"path": "a\udc80.txt", "content": "x"}}]}',
        "operations.0.arguments.path",
    ),
    (
        "/actions/stage",
        r'{"scope": "acme:alice:proj", "operations": [{"key": "w1", "adapter": "filesystem",'
        r' "operation": "write_text", "arguments": {"path": "a.txt", "content": "x\ud800"}}]}',
        "operations.0.arguments.content",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "raw", "field"), BAD_BODIES)
def test_api_refuses_a_lone_surrogate_naming_the_field(client, actions_root, path, raw, field):
    # Given a token and a body whose JSON spells a lone surrogate
    secret = issue_token("acme:alice:*")
    before = row_counts()
    # When it is posted
    response = client.post(
        f"/api/v1{path}",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    # Then a 400 names the field, and nothing was written
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field and body["error"] == "invalid_field"
    assert "unpaired surrogate" in body["detail"]
    assert row_counts() == before


# -- commands ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_command_refuses_a_surrogate_payload():
    before = row_counts()
    with pytest.raises(
        CommandError, match=r"payload\.k: text may not contain an unpaired surrogate"
    ):
        call_command("audit", "log", SCOPE, "agent.x", "--payload", r'{"k": "\ud800"}')
    assert row_counts() == before


@pytest.mark.django_db(transaction=True)
def test_command_line_with_undecodable_bytes_exits_with_one_line():
    # Given a command line whose text is not UTF-8 (Python hands it over as a lone surrogate)
    before = row_counts()
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "manage.py"),
            "memory",
            "remember",
            SCOPE,
            b"My pet is \xff".decode("utf-8", "surrogateescape"),
        ],
        env=subprocess_env(),
        capture_output=True,
        timeout=120,
    )
    # Then it exits non-zero with one line on stderr naming the field, and wrote nothing
    assert result.returncode != 0
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    assert len(lines) == 1 and "text: text may not contain an unpaired surrogate" in lines[0]
    assert row_counts() == before


# -- forms ----------------------------------------------------------------------------------------


def test_a_form_field_with_a_surrogate_is_a_form_error():
    form = ForgetForm(data={"selector": f"my pet {LONE}"})
    assert not form.is_valid()
    assert "unpaired surrogate" in " ".join(form.errors["selector"])


def test_a_form_field_with_nul_is_a_form_error():
    class NoteForm(StorableTextMixin, forms.Form):
        note = forms.JSONField()

    form = NoteForm(data={"note": '{"k": "a\\u0000b"}'})
    assert not form.is_valid() and "NUL" in " ".join(form.errors["note"])


# -- pages render an already-stored bad string ----------------------------------------------------


def stored_bad_event() -> AuditEvent:
    """An event whose stored payload spells a lone surrogate (as one could before the fix)."""
    event = memory_services.log_action(
        principal=SYSTEM, scope=SCOPE, event_type="agent.x", payload={"k": "v"}
    )
    tamper(
        "UPDATE audit_log SET payload = %s WHERE event_id = %s",
        ['{"k":"\\ud800"}', event["audit_event_id"]],
    )
    return AuditEvent.objects.get(event_id=event["audit_event_id"])


@pytest.mark.django_db
def test_audit_pages_render_a_stored_surrogate(client):
    # Given an audit row holding a lone surrogate, and a viewer of its scope
    event = stored_bad_event()
    login_as(client, make_operator("vera", [("acme:*:*", "viewer")]))
    # When the explorer, its fragment, the event page and the memory chain page are opened
    pages = [
        client.get(reverse("audit:explorer")),
        client.get(reverse("audit:explorer"), {"scope": SCOPE}, HTTP_HX_REQUEST="true"),
        client.get(reverse("audit:event", args=[event.event_id])),
        client.get(reverse("memory:chain", args=[SCOPE])),
    ]
    # Then each renders; the pretty-printed payloads show a replacement character
    assert [response.status_code for response in pages] == [200, 200, 200, 200]
    for response in pages[:3]:
        assert REPLACEMENT in response.content.decode("utf-8")


@pytest.mark.django_db
def test_plan_page_renders_a_stored_surrogate_path(client, actions_root):
    # Given a staged plan whose stored arguments spell a lone surrogate in the path
    patch = action_services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("notes.txt", "x")]
    )
    for payload in ActionPayload.objects.filter(payload__contains="notes.txt"):
        tamper(
            "UPDATE action_payloads SET payload = %s WHERE id = %s",
            [payload.payload.replace("notes.txt", "n\\udc80tes.txt"), payload.pk],
        )
    login_as(client, make_operator("ada", [("acme:*:*", "approver")]))
    # When the plan page is opened
    response = client.get(reverse("actions:detail", args=[patch.transaction_id]))
    # Then it renders, with a replacement character for the surrogate
    assert response.status_code == 200
    assert f"n{REPLACEMENT}tes.txt" in response.content.decode("utf-8")
