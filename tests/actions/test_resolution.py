"""Needs attention can be closed (issue 13, loop 4): an audited "record resolution" step for
uncertain and recovery-required transactions, a resolved filter, and overview counts."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from actions import selectors, services
from actions.errors import ActionInputError, ActionStateError
from actions.models import ActionResolution, ActionTransaction
from aetnaweb import access
from aetnaweb.access import SYSTEM
from aetnaweb.overview import build_overview
from audit.models import AuditEvent
from tests.actions.conftest import SCOPE
from tests.actions.test_views import approved_write, interrupted_write, stage_write
from tests.factories import access_matrix, make_operator

NOTE = "Checked the file on the server: the write landed in full. Nothing to undo."


@pytest.fixture
def uncertain(actions_root, approval_key, monkeypatch) -> str:
    """A transaction whose write failed in a way that leaves its effect unknown."""
    txn_id = approved_write()
    monkeypatch.setattr(
        "actions.adapters.filesystem.FilesystemAdapter.execute",
        lambda self, prepared, key: (_ for _ in ()).throw(RuntimeError("disk went away")),
    )
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    assert ActionTransaction.objects.get(pk=txn_id).state == "uncertain"
    return txn_id


def approver():
    """Ada, an approver on the tenant (created once per test)."""
    user = get_user_model().objects.filter(username="ada").first()
    return access.operator_principal(user or make_operator("ada", [("acme:*:*", "approver")]))


def audit_count() -> int:
    return AuditEvent.objects.count()


def resolve(txn_id: str, principal=None, **overrides):
    arguments = {"outcome": "applied", "note": NOTE, "owner": "ops team"} | overrides
    return services.record_resolution(
        transaction_id=txn_id, principal=principal or approver(), **arguments
    )


# -- the service -------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_resolution_is_recorded_and_audited_without_changing_the_state(uncertain):
    principal = approver()
    result = resolve(uncertain, principal)
    txn = ActionTransaction.objects.get(pk=uncertain)
    assert txn.state == "uncertain"  # ST-1: nothing leaves a terminal state
    row = ActionResolution.objects.get(transaction_id=uncertain)
    assert (row.outcome, row.owner, row.note, row.resolved_by) == (
        "applied",
        "ops team",
        NOTE,
        principal.label,
    )
    event = AuditEvent.objects.get(event_id=result.audit_event_id)
    assert event.event_type == "action.resolution_recorded"
    assert event.actor == principal.label and event.record_id == uncertain
    payload = json.loads(event.payload)
    assert payload["outcome"] == "applied" and payload["owner"] == "ops team"
    assert NOTE not in event.payload  # the note's digest only
    assert len(payload["note_sha256"]) == 64


@pytest.mark.django_db
def test_recovery_required_takes_a_resolution_too(actions_root, approval_key):
    txn_id = interrupted_write()
    services.recover(principal=SYSTEM, transaction_id=txn_id)
    assert resolve(txn_id, outcome="not_applied").state == "recovery_required"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"outcome": "done"}, ActionInputError),
        ({"note": "   "}, ActionInputError),
        ({"note": "x" * 2001}, ActionInputError),
        ({"note": "nul \x00 inside"}, ActionInputError),
        ({"note": "lone \ud800 surrogate"}, ActionInputError),
        ({"owner": ""}, ActionInputError),
        ({"owner": "two\nlines"}, ActionInputError),
        ({"owner": "o" * 151}, ActionInputError),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(uncertain, overrides, error):
    principal = approver()
    before = audit_count()
    with pytest.raises(error):
        resolve(uncertain, principal, **overrides)
    assert audit_count() == before and not ActionResolution.objects.exists()


@pytest.mark.django_db
def test_only_attention_states_take_a_resolution_and_only_once(uncertain, actions_root):
    staged = stage_write("other.txt")
    principal = approver()
    before = audit_count()
    with pytest.raises(ActionStateError, match="only uncertain or recovery_required"):
        resolve(staged, principal)
    assert audit_count() == before
    resolve(uncertain)
    before = audit_count()
    with pytest.raises(ActionStateError, match="already has a recorded resolution"):
        resolve(uncertain, outcome="fixed_by_hand")
    assert audit_count() == before and ActionResolution.objects.count() == 1


@pytest.mark.django_db
def test_a_viewer_cannot_resolve(uncertain):
    viewer = access.operator_principal(make_operator("vic", [("acme:*:*", "viewer")]))
    with pytest.raises(access.AccessDenied):
        resolve(uncertain, viewer)
    assert not ActionResolution.objects.exists()


# -- the queue, its filter and the overview ---------------------------------------------------


@pytest.mark.django_db
def test_the_queue_filters_by_resolution_and_counts_follow(uncertain, actions_root):
    principal = approver()
    ada = get_user_model().objects.get(username="ada")
    assert [i["transaction_id"] for i in selectors.attention_queue(principal)] == [uncertain]
    assert build_overview(principal, user=ada).totals["uncertain"] == 1
    resolve(uncertain, principal)
    assert selectors.attention_queue(principal) == []
    resolved = selectors.attention_queue(principal, resolved="resolved")
    assert [i["resolution"].owner for i in resolved] == ["ops team"]
    assert len(selectors.attention_queue(principal, resolved="all")) == 1
    assert build_overview(principal, user=ada).totals["uncertain"] == 0
    with pytest.raises(ValueError):
        selectors.attention_queue(principal, resolved="maybe")


# -- the pages ----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="approver", wrong_role="viewer"))
def test_resolve_post_permissions(client, uncertain, case, django_assert_max_num_queries):
    case.sign_in(client)
    before = audit_count()
    with django_assert_max_num_queries(23):
        response = client.post(
            reverse("actions:resolve", args=[uncertain]),
            {"outcome": "applied", "owner": "ops", "note": NOTE},
        )
    case.check(response, ok=302)
    if not case.allowed:
        assert audit_count() == before and not ActionResolution.objects.exists()
    else:
        assert ActionResolution.objects.get().owner == "ops"


@pytest.mark.django_db
def test_the_detail_page_offers_the_form_then_shows_the_resolution(client, uncertain):
    client.force_login(make_operator("ada", [("acme:*:*", "approver")]))
    url = reverse("actions:detail", args=[uncertain])
    html = client.get(url).content.decode()
    assert 'action="' + reverse("actions:resolve", args=[uncertain]) in html
    assert 'value="ada"' in html  # the owner defaults to the person recording it
    response = client.post(
        reverse("actions:resolve", args=[uncertain]),
        {"outcome": "fixed_by_hand", "owner": "ada", "note": "<b>restored</b> by hand"},
    )
    assert response.status_code == 302
    html = client.get(url).content.decode()
    assert "Fixed by hand" in html and "&lt;b&gt;restored&lt;/b&gt; by hand" in html
    assert 'action="' + reverse("actions:resolve", args=[uncertain]) not in html


@pytest.mark.django_db
def test_an_invalid_resolution_form_says_why_and_writes_nothing(client, uncertain):
    client.force_login(make_operator("ada", [("acme:*:*", "approver")]))
    before = audit_count()
    response = client.post(
        reverse("actions:resolve", args=[uncertain]), {"outcome": "", "owner": "", "note": ""}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "Say what you found in the world." in html and "Name who owns" in html
    assert audit_count() == before


@pytest.mark.django_db
def test_the_attention_page_has_open_resolved_and_all(
    client, uncertain, django_assert_max_num_queries
):
    resolve(uncertain)
    client.force_login(get_user_model().objects.get(username="ada"))
    url = reverse("actions:attention")
    with django_assert_max_num_queries(8):
        open_page = client.get(url).content.decode()
    assert uncertain[:16] not in open_page and "Nothing needs attention" in open_page
    resolved_page = client.get(url, {"resolved": "resolved"}).content.decode()
    assert uncertain[:16] in resolved_page and "ops team" in resolved_page
    assert uncertain[:16] in client.get(url, {"resolved": "all"}).content.decode()
    # an unknown filter falls back to the open list
    assert client.get(url, {"resolved": "<x>"}).status_code == 200
