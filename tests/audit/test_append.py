"""append_event and log_agent_event: the only ways a row enters audit_log."""

from __future__ import annotations

import datetime
import json

import pytest
from django.db import transaction

from access.models import Role, ScopeGrant
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.chain import compute_event_hash
from audit.errors import AuditError
from audit.models import AuditDailyCount, AuditEvent, AuditSubject
from audit.services import append_event, log_agent_event
from tests.audit.conftest import append

pytestmark = pytest.mark.django_db


def nothing_written() -> bool:
    return not (
        AuditEvent.objects.exists()
        or AuditSubject.objects.exists()
        or AuditDailyCount.objects.exists()
    )


def test_append_chains_events_per_subject_and_keeps_the_index():
    # Given appends interleaved across two subjects
    a1 = append("acme:alice:proj", payload={"n": 1})
    b1 = append("acme:bob:*", payload={"n": 2})
    a2 = append("acme:alice:proj", payload={"n": 3}, session_id="s", record_id="rec_1")
    # Then each chain links to its own previous event only
    assert a1.prev_hash is None and b1.prev_hash is None
    assert a2.prev_hash == a1.event_hash
    assert a1.sequence < b1.sequence < a2.sequence
    # And the stored row is exactly what was returned, hash included
    row = AuditEvent.objects.get(event_id=a2.event_id)
    assert row.payload == '{"n":3}'
    assert row.event_hash == compute_event_hash(
        event_id=row.event_id,
        subject_id=row.subject_id,
        event_type=row.event_type,
        created_at=row.created_at,
        actor=row.actor,
        session_id=row.session_id,
        turn_id=row.turn_id,
        record_id=row.record_id,
        payload=json.loads(row.payload),
        prev_hash=row.prev_hash,
    )
    assert row.event_id.startswith("aud_") and len(row.event_id) == 36
    assert datetime.datetime.fromisoformat(row.created_at).utcoffset() == datetime.timedelta(0)
    # And the subject index and daily counters were kept in the same transaction
    alice = AuditSubject.objects.get(subject_id="acme:alice:proj")
    assert (alice.tenant, alice.user, alice.project) == ("acme", "alice", "proj")
    assert (alice.event_count, alice.head_sequence, alice.head_hash) == (
        2,
        a2.sequence,
        a2.event_hash,
    )
    today = datetime.date.fromisoformat(a2.created_at[:10])
    assert AuditDailyCount.objects.get(subject_id="acme:alice:proj", day=today).event_count == 2
    assert AuditDailyCount.objects.get(subject_id="acme:bob:*", day=today).event_count == 1


@pytest.mark.django_db(transaction=True)
def test_append_outside_a_transaction_is_refused_and_writes_nothing():
    # Autocommit mode: no transaction.atomic() around the call
    with pytest.raises(AuditError, match=r"inside the caller's transaction"):
        append_event(subject="acme:*:*", event_type="memory.recall", actor="system", payload={})
    assert nothing_written()


@pytest.mark.django_db(transaction=True)
def test_an_append_whose_transaction_fails_leaves_no_row():
    # Given one committed event
    first = append("acme:alice:proj")

    # When a later transaction appends and then fails
    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        append_event(
            subject="acme:alice:proj", event_type="memory.recall", actor="system", payload={"n": 2}
        )
        append_event(subject="acme:bob:x", event_type="memory.recall", actor="system", payload={})
        raise Boom
    # Then neither event, nor its bookkeeping, survived
    assert list(AuditEvent.objects.values_list("event_id", flat=True)) == [first.event_id]
    assert not AuditSubject.objects.filter(subject_id="acme:bob:x").exists()
    assert AuditSubject.objects.get(subject_id="acme:alice:proj").event_count == 1
    assert AuditDailyCount.objects.get(subject_id="acme:alice:proj").event_count == 1
    # And the next append chains onto the committed head
    assert append("acme:alice:proj").prev_hash == first.event_hash


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"subject": "acme:alice"}, "audit subject refused"),
        ({"subject": "acme:*:secret"}, "audit subject refused"),
        ({"subject": "platform:bob:*"}, "audit subject refused"),
        ({"subject": "acme:al ice:*"}, "audit subject refused"),
        ({"event_type": "Memory.Recall"}, "invalid event type"),
        ({"event_type": "recall"}, "invalid event type"),
        ({"event_type": "agent." + "x" * 95}, "at most 100 characters"),
        ({"actor": ""}, "actor must be"),
        ({"actor": "x" * 151}, "actor must be"),
        ({"payload": ["not", "an", "object"]}, "must be a JSON object"),
        ({"payload": {"n": float("nan")}}, "audit payload refused"),
        ({"payload": {"t": (1, 2)}}, "audit payload refused"),
        ({"payload": {1: "int key"}}, "audit payload refused"),
        ({"payload": {"b": b"bytes"}}, "audit payload refused"),
        ({"session_id": ""}, "session_id must be"),
        ({"record_id": "r" * 201}, "record_id must be"),
    ],
)
def test_append_refusals_write_nothing(fields, message):
    arguments = {
        "subject": "acme:alice:proj",
        "event_type": "memory.recall",
        "actor": "system",
        "payload": {"n": 1},
    } | fields
    with pytest.raises(AuditError, match=message), transaction.atomic():
        append_event(**arguments)
    assert nothing_written()


def test_log_agent_event_appends_only_agent_events():
    event = log_agent_event(
        principal=SYSTEM,
        subject="acme:alice:proj",
        event_type="agent.tool_call",
        payload={"tool_sha256": "a" * 64},
    )
    # Stored under agent.log.*: a caller's event never takes a capture's own type
    assert (event.event_type, event.actor) == ("agent.log.tool_call", "agent")
    for refused in ("memory.forget", "action.committed", "agentx.y", "agent"):
        with pytest.raises(AuditError, match="only agent"):
            log_agent_event(
                principal=SYSTEM, subject="acme:alice:proj", event_type=refused, payload={}
            )
    with pytest.raises(AuditError, match="audit subject refused"):
        log_agent_event(principal=SYSTEM, subject="acme", event_type="agent.x", payload={})
    assert AuditEvent.objects.count() == 1


def test_log_agent_event_needs_write_on_the_scope(operator):
    ScopeGrant.objects.create(
        user=operator,
        scope="acme:alice:*",
        scope_tenant="acme",
        scope_user="alice",
        scope_project="*",
        role=Role.ADMIN,
    )
    principal = access.operator_principal(operator)
    assert log_agent_event(
        subject="acme:alice:p", event_type="agent.x", payload={}, principal=principal
    )
    with pytest.raises(access.AccessDenied):
        log_agent_event(subject="acme:bob:p", event_type="agent.x", payload={}, principal=principal)
    assert AuditEvent.objects.count() == 1


def test_audit_error_lives_in_audit_errors_and_is_catalogued_once():
    # Given the error class, where the app keeps its errors (issue 34 item 7)
    import audit.services
    from aetnaweb.errors import CATALOGUE

    # Then it is defined in audit.errors, the services' name is the same class,
    # and the catalogue holds it under its one code
    assert AuditError.__module__ == "audit.errors"
    assert audit.services.AuditError is AuditError
    assert CATALOGUE["audit_refused"] is AuditError
