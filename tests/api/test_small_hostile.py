"""Issue 10 item 8 through the API: event_type refusals name ``event_type``, and a record
that recall handed a token (an ancestor's) opens by ID, and nothing more."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import services
from memory.models import Record

SCOPE = "acme:alice:proj"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "event_type", ["memory.forget", "agent", "Agent.X", "agent.x y", "action.committed"]
)
def test_a_refused_event_type_names_the_event_type_field(alice_api, event_type):
    before = AuditEvent.objects.count()
    response = alice_api.post(
        "/memory/log-action", {"scope": SCOPE, "event_type": event_type, "payload": {}}
    )
    assert response.status_code == 400
    assert response.data["field"] == "event_type"
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_a_refused_payload_still_names_the_payload_field():
    # A payload that does not survive a JSON round trip (a tuple) is the payload's fault
    from memory.errors import ActionLogError

    with pytest.raises(ActionLogError) as caught:
        services.log_action(
            principal=SYSTEM, scope=SCOPE, event_type="agent.x", payload={"k": (1, 2)}
        )
    assert caught.value.field == "payload"


def recalled_ids(api) -> list[str]:
    response = api.post("/memory/recall", {"scope": SCOPE, "query": "office", "limit": 10})
    assert response.status_code == 200
    return [candidate["record_id"] for candidate in response.data["candidates"]]


@pytest.mark.django_db
def test_a_token_opens_the_ancestor_record_recall_gave_it(alice_api):
    # Given a tenant-wide fact that recall at alice's project returns to her token
    tenant = services.remember(principal=SYSTEM, scope="acme:*:*", text="My office city is Lisbon")
    record_id = tenant.records[0].record_id
    assert record_id in recalled_ids(alice_api)
    # When the token opens that record by ID
    response = alice_api.get(f"/memory/records/{record_id}")
    # Then it gets the record (what recall showed), without the tenant's source message
    assert response.status_code == 200, response.data
    assert response.data["record"]["record_id"] == record_id
    assert response.data["episode"] is None
    # And nothing from the tenant's chain is listed
    assert all(event["subject_id"] != "acme:*:*" for event in response.data["audit_events"])


@pytest.mark.django_db
def test_recall_never_shown_records_stay_404(alice_api):
    # Given a quarantined tenant record, a retired one and a sibling's record
    quarantined = services.remember(
        principal=SYSTEM, scope="acme:*:*", text="My office city is Porto", source_type="webpage"
    ).records[0]
    retired = services.remember(
        principal=SYSTEM, scope="acme:*:*", text="My office floor is two"
    ).records[0]
    Record.objects.filter(record_id=retired.record_id).update(status="superseded")
    sibling = services.remember(
        principal=SYSTEM, scope="acme:bob:*", text="My office desk is blue"
    ).records[0]
    # When alice's token asks for each by ID
    for record in (quarantined, retired, sibling):
        response = alice_api.get(f"/memory/records/{record.record_id}")
        # Then each is a 404, exactly like an unknown ID
        assert response.status_code == 404
        assert response.data["error"] == "not_found"
