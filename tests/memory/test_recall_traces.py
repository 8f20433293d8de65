"""Issue 10 item 5: a recall's trace stays in the caller's own subtree.

A viewer of ``acme:alice:apollo`` may read ``platform:*:*`` (what a recall in
her subtree reads), but a recall *at* the platform wrote a ``memory.recall``
event naming her into the platform chain, which a ``globex`` operator can
read. Reads that leave evidence now run only inside the caller's subtree.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import services
from memory.models import RetrievalEvent
from tests.factories import login_as, make_operator

OWN = "acme:alice:apollo"
PLATFORM = "platform:*:*"

pytestmark = pytest.mark.django_db


@pytest.fixture
def platform_fact() -> str:
    stored = services.remember(
        principal=SYSTEM, scope=PLATFORM, text="My incident channel is ops-bridge."
    )
    return stored.records[0].record_id


def traces() -> tuple[int, int]:
    return RetrievalEvent.objects.count(), AuditEvent.objects.count()


def viewer() -> access.Principal:
    return access.operator_principal(make_operator("vera", [(OWN, "viewer")]))


@pytest.mark.parametrize(
    "call",
    [
        lambda p: services.recall(scope=PLATFORM, query="incident channel", principal=p),
        lambda p: services.recall_block(
            scope=PLATFORM, query="incident channel", min_score=0, principal=p
        ),
        lambda p: services.persona(scope=PLATFORM, principal=p),
    ],
    ids=["recall", "recall_block", "persona"],
)
def test_a_read_that_leaves_evidence_is_refused_at_an_ancestor(platform_fact, call):
    # Given a viewer of acme:alice:apollo, who may read the platform scope
    principal = viewer()
    assert access.may(principal, access.READ, PLATFORM)
    before = traces()
    # When she recalls (or builds a persona) at the platform itself
    with pytest.raises(access.AncestorOnly, match="recall from one of those instead"):
        call(principal)
    # Then nothing is written anywhere, least of all into the platform chain
    assert traces() == before


def test_recalling_from_her_own_scope_reads_the_platform_and_leaves_the_trace_there(
    platform_fact,
):
    # Given a viewer of acme:alice:apollo and a platform fact
    principal = viewer()
    # When she recalls from her own scope
    result = services.recall(scope=OWN, query="incident channel", principal=principal)
    # Then the platform fact is returned (reads look up the lineage)
    assert [c.record_id for c in result.candidates if c.returned] == [platform_fact]
    # And the trace is in her scope's chain only; the platform chain does not name her
    event = AuditEvent.objects.get(event_id=result.audit_event_id)
    assert (event.subject_id, event.event_type, event.actor) == (OWN, "memory.recall", "vera")
    platform_chain = AuditEvent.objects.filter(subject_id=PLATFORM)
    assert list(platform_chain.values_list("event_type", flat=True)) == [
        "episode.ingested",
        "memory.record_created",
    ]
    assert not platform_chain.filter(actor="vera").exists()


def test_operators_of_a_tenant_and_the_platform_still_recall_where_they_act(platform_fact):
    tenant_admin = access.operator_principal(make_operator("ada", [("acme:*:*", "admin")]))
    services.recall(scope="acme:*:*", query="incident", principal=tenant_admin)
    services.recall(scope=OWN, query="incident", principal=tenant_admin)
    root = access.operator_principal(make_operator("root", [(PLATFORM, "viewer")]))
    result = services.recall(scope=PLATFORM, query="incident", principal=root)
    assert AuditEvent.objects.get(event_id=result.audit_event_id).subject_id == PLATFORM


def test_the_recall_tester_on_an_ancestor_page_is_replaced_by_a_pointer(client, platform_fact):
    # Given the viewer signed in
    login_as(client, make_operator("vera", [(OWN, "viewer")]))
    # When she opens the platform's page, which she may read
    page = client.get(reverse("memory:scope", args=[PLATFORM]))
    # Then there is no recall form there, only a link to recall from her own scope
    body = page.content.decode()
    assert page.status_code == 200
    assert reverse("memory:recall", args=[PLATFORM]) not in body
    assert reverse("memory:scope", args=[OWN]) in body
    assert "you do not recall here" in body
    # And posting to it anyway is refused with the reason, writing nothing
    before = traces()
    response = client.post(
        reverse("memory:recall", args=[PLATFORM]),
        {"query": "incident channel", "limit": 5, "min_score": 0},
    )
    assert response.status_code == 400
    assert "recall from one of those instead" in response.content.decode()
    assert traces() == before
    # While the tester on her own page still runs, and its trace stays there
    own = client.post(
        reverse("memory:recall", args=[OWN]),
        {"query": "incident channel", "limit": 5, "min_score": 0},
    )
    assert own.status_code == 200
    assert not AuditEvent.objects.filter(subject_id=PLATFORM, event_type="memory.recall").exists()
