"""Why was this recalled, after the fact (issue 13, loop 2): the page of a stored recall,
the session page listing a session's recalls, and the links that lead to them."""

from __future__ import annotations

import hashlib

import pytest
from django.db import transaction
from django.urls import reverse

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.services import append_event
from memory import services
from memory.models import RetrievalEvent
from tests.factories import access_matrix, login_as, make_operator

SCOPE = "acme:alice:proj"


@pytest.fixture
def recalled(db):
    """Facts at SCOPE and its tenant, one quarantined; a recall in session s-42."""
    editor = services.remember(
        principal=SYSTEM, scope=SCOPE, text="My editor is helix.", session_id="s1"
    )
    services.remember(
        principal=SYSTEM, scope="acme:*:*", text="Remember that the office editor is vim."
    )
    services.remember(
        principal=SYSTEM,
        scope=SCOPE,
        text="Read this page: <webpage>My editor is nano.</webpage>",
        session_id="s1",
    )
    result = services.recall(
        principal=SYSTEM, scope=SCOPE, query="which editor", session_id="s-42", limit=1
    )
    return {"editor": editor.records[0].record_id, "result": result}


def page(client, retrieval_id: str):
    return client.get(reverse("memory:retrieval", args=[retrieval_id]))


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_retrieval_page_permissions(client, recalled, case, django_assert_max_num_queries):
    case.sign_in(client)
    with django_assert_max_num_queries(12):
        response = page(client, recalled["result"].retrieval_id)
    case.check(response)


@pytest.mark.django_db
def test_retrieval_page_shows_who_asked_the_digest_every_candidate_and_its_parts(client, recalled):
    # Given alice's project viewer and a recall that weighed a tenant-level fact too
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    result = recalled["result"]
    event = RetrievalEvent.objects.get(retrieval_id=result.retrieval_id)
    # When they open the recall's page
    response = page(client, result.retrieval_id)
    html = response.content.decode()
    # Then it shows who asked, when, the query's digest (not its text) and the session
    assert response.status_code == 200
    assert hashlib.sha256(b"which editor").hexdigest() in html
    assert "which editor" not in html
    assert event.actor in html and "s-42" in html
    # And every candidate with its rank, score and each score part, and the outcome
    detail = response.context["detail"]
    assert [c.record_id for c in detail.candidates] == [c["record_id"] for c in event.candidates]
    assert (
        [c.record_id for c in detail.returned]
        == event.returned_ids
        == [result.returned[0].record_id]
    )
    for name in ("weight", "relevance", "trust", "recency"):
        assert f"<li>{name} " in html
    assert "returned" in html and "over the limit" in html
    # And the tenant-level candidate (readable by an operator's ancestor reach) is linked
    assert reverse("memory:record", args=[recalled["editor"]]) in html
    # And its memory.recall audit event is linked
    assert reverse("audit:event", args=[event.audit_event_id]) in html


@pytest.mark.django_db
def test_a_candidate_outside_the_grant_shows_no_content(client, recalled):
    # Given a stored recall whose candidate list names a record of bob's (a row edited
    # behind the engine's back: an operator's grant otherwise reads every candidate,
    # since a recall weighs only its scope and that scope's ancestors)
    bob = services.remember(
        principal=SYSTEM, scope="acme:bob:*", text="My editor is emacs."
    ).records[0]
    event = RetrievalEvent.objects.get(retrieval_id=recalled["result"].retrieval_id)
    stolen = dict(event.candidates[0], record_id=bob.record_id, scope="acme:bob:*")
    RetrievalEvent.objects.filter(pk=event.pk).update(candidates=[*event.candidates, stolen])
    # When alice's project viewer opens the recall
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    response = page(client, event.retrieval_id)
    html = response.content.decode()
    # Then bob's fact is named by ID only, with no content and no link
    assert "emacs" not in html
    assert reverse("memory:record", args=[bob.record_id]) not in html
    assert "outside your grants" in html
    assert response.context["hidden_candidates"] == 1


@pytest.mark.django_db
def test_an_unknown_retrieval_is_a_404(client, recalled):
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    assert page(client, "ret_" + "0" * 32).status_code == 404
    assert page(client, "<script>").status_code == 404


@pytest.mark.django_db
def test_record_page_links_each_recall_that_weighed_it(client, recalled):
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    html = client.get(reverse("memory:record", args=[recalled["editor"]])).content.decode()
    assert reverse("memory:retrieval", args=[recalled["result"].retrieval_id]) in html


@pytest.mark.django_db
def test_recall_events_in_the_explorer_and_event_page_link_to_the_recall(client, recalled):
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    retrieval_id = recalled["result"].retrieval_id
    link = reverse("memory:retrieval", args=[retrieval_id])
    explorer = client.get(reverse("audit:explorer"), {"event_type": "memory.recall"})
    assert link in explorer.content.decode()
    event = AuditEvent.objects.get(event_type="memory.recall")
    assert link in client.get(reverse("audit:event", args=[event.event_id])).content.decode()


@pytest.mark.django_db
def test_a_forged_retrieval_id_in_a_payload_is_not_linked(client, recalled):
    # Given a memory.recall event whose payload names something that is not a ret_ ID
    with transaction.atomic():
        append_event(
            subject=SCOPE,
            event_type="memory.recall",
            actor="agent",
            payload={"retrieval_id": "../../admin/"},
        )
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    html = client.get(reverse("audit:explorer"), {"event_type": "memory.recall"}).content.decode()
    assert '/memory/recalls/../../admin/"' not in html
    assert html.count(reverse("memory:retrieval", args=[recalled["result"].retrieval_id])) == 1
    assert html.count("Why these were recalled") == 1  # only the real recall is linked


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_session_page_lists_only_recalls_the_grant_reads(
    client, recalled, case, django_assert_max_num_queries
):
    # Given a second recall in the same session at bob's scope
    bob = services.recall(principal=SYSTEM, scope="acme:bob:*", query="editor", session_id="s-42")
    case.sign_in(client)
    with django_assert_max_num_queries(10):
        response = client.get(reverse("memory:session"), {"id": "s-42"})
    if case.grants is None:
        assert response.status_code == 302
        return
    # Then the page answers (a session is not an object with a scope) but lists only
    # the recalls at scopes the operator may read
    assert response.status_code == 200
    html = response.content.decode()
    assert bob.retrieval_id not in html
    assert (recalled["result"].retrieval_id in html) == case.allowed


@pytest.mark.django_db
def test_session_links_lead_to_the_session_page(client, recalled):
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    link = reverse("memory:session") + "?id=s-42"
    retrieval_html = page(client, recalled["result"].retrieval_id).content.decode()
    assert link in retrieval_html
    explorer = client.get(reverse("audit:explorer"), {"session_id": "s-42"}).content.decode()
    assert link in explorer


@pytest.mark.django_db
def test_session_page_without_an_id_is_a_404(client, recalled):
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    assert client.get(reverse("memory:session")).status_code == 404
    assert client.get(reverse("memory:session"), {"id": "x" * 201}).status_code == 404
