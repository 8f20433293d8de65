"""Issue 10 item 1: a deletion receipt binds only to a real purge (audit-log-v1 "Receipt rule").

A ``write`` token could log ``agent.memory_forget`` with a forget-shaped
payload and build a receipt bound to that event; every verifier said it held
while the record stayed active and recalled. These tests walk that attack end
to end through the API and all four verification surfaces: the standalone
tool, ``manage.py audit verify``, the memory receipt page and the checkpoint
upload page.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.urls import reverse

from aetnaweb.access import SYSTEM
from audit.canonical import digest, sha256_text
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from audit.services import append_event
from memory import services
from memory.models import Record
from tests.factories import login_as, make_operator
from tests.tools.test_verify_audit import database_file, parse_report, run_tool

SCOPE = "acme:alice:proj"
User = get_user_model()

# The tool reads the SQLite test database file, so there the data must be committed.
committed = pytest.mark.django_db(transaction=django_settings.DATABASE_VENDOR == "sqlite")


def remember_fact() -> str:
    stored = services.remember(
        principal=SYSTEM, scope=SCOPE, text="My backup email is bob@example.org."
    )
    return stored.records[0].record_id


def forged_receipt(event_id: str, event_hash: str, created_at: str, record_id: str) -> dict:
    receipt = {
        "format": "aetnamem-deletion-receipt-v1",
        "subject_id": SCOPE,
        "created_at": created_at,
        "selector_sha256": sha256_text("backup email"),
        "purged_record_ids": [record_id],
        "purged_episode_ids": [],
        "audit_event_id": event_id,
        "audit_event_hash": event_hash,
    }
    receipt["receipt_sha256"] = digest(receipt)
    return receipt


def plant_agent_purge(record_id: str) -> AuditEvent:
    """An ``agent.*`` event shaped like a forget, as log-action stored it before the fix."""
    with transaction.atomic():
        return append_event(
            subject=SCOPE,
            event_type="agent.memory_forget",
            actor="agent:test-agent",
            payload={
                "selector_sha256": sha256_text("backup email"),
                "purged_record_ids": [record_id],
                "purged_episode_ids": [],
            },
        )


def audit_command(*argv: str) -> tuple[int, str]:
    """``manage.py audit ...`` in-process (call_command keeps the test's connection open)."""
    out = io.StringIO()
    try:
        call_command("audit", *argv, stdout=out, stderr=out)
    except CommandError as exc:
        return 1, out.getvalue() + str(exc)
    return 0, out.getvalue()


def four_verdicts(client, receipt: dict, tmp_path: Path) -> dict[str, list[str]]:
    """Each surface's failures for ``receipt`` (an empty list: that surface says it holds)."""
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    verdicts: dict[str, list[str]] = {}
    # The standalone tool, on the database file.
    result = run_tool(str(database_file(tmp_path)), "--subject", SCOPE, "--receipt", str(path))
    verdicts["tool"] = parse_report(result.stdout)[f"receipt {path}"] or []
    # manage.py audit verify --receipt
    code, output = audit_command("verify", "--subject", SCOPE, "--receipt", str(path))
    verdicts["command"] = [] if code == 0 else [output]
    # /memory/receipts/verify/ and the checkpoint upload, as an admin of the tenant.
    if not User.objects.filter(username="ada").exists():
        make_operator("ada", [("acme:*:*", "admin")])
    login_as(client, User.objects.get(username="ada"))
    page = client.post(reverse("memory:receipt_verify"), {"receipt_text": json.dumps(receipt)})
    verdicts["receipt page"] = list(page.context["failures"])
    upload = SimpleUploadedFile("receipt.json", json.dumps(receipt).encode())
    checked = client.post(reverse("audit:evidence_verify"), {"evidence": upload})
    verdicts["upload page"] = list(checked.context["results"]["failures"])
    return verdicts


@pytest.mark.django_db
def test_log_action_refuses_a_receipt_shaped_payload(alice_api):
    # Given an active record and a write token on its scope
    record_id = remember_fact()
    before = AuditEvent.objects.count()
    # When the token logs an agent event whose payload mimics a forget
    response = alice_api.post(
        "/memory/log-action",
        {
            "scope": SCOPE,
            "event_type": "agent.memory_forget",
            "payload": {
                "selector_sha256": sha256_text("backup email"),
                "purged_record_ids": [record_id],
                "purged_episode_ids": [],
            },
        },
    )
    # Then it is refused naming the payload, and nothing is written
    assert response.status_code == 400, response.content
    assert response.data["field"] == "payload"
    assert "belongs to deletion receipts" in response.data["detail"]
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    "payload",
    [
        {"purged_episode_ids": []},
        {"note": {"selector_sha256": "0" * 64}},
        {"items": [{"receipt_sha256": "0" * 64}]},
        {"audit_event_hash": "0" * 64},
        {"format": "aetnamem-deletion-receipt-v1"},
    ],
)
def test_log_action_refuses_receipt_keys_at_any_depth(alice_api, payload):
    before = AuditEvent.objects.count()
    response = alice_api.post(
        "/memory/log-action", {"scope": SCOPE, "event_type": "agent.note", "payload": payload}
    )
    assert response.status_code == 400, response.content
    assert response.data["field"] == "payload"
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_agent_logged_events_are_namespaced(alice_api):
    # When a token logs agent events, even one named like a capture event
    logged = alice_api.post(
        "/memory/log-action",
        {"scope": SCOPE, "event_type": "agent.tool_call", "payload": {"bytes": 3}},
    )
    again = alice_api.post(
        "/memory/log-action",
        {"scope": SCOPE, "event_type": "agent.log.deploy_started", "payload": {}},
    )
    # Then each lands under agent.log.*, a namespace the engine never writes itself
    assert logged.status_code == 201 and again.status_code == 201
    assert logged.data["event_type"] == "agent.log.tool_call"
    assert again.data["event_type"] == "agent.log.deploy_started"
    types = set(AuditEvent.objects.filter(subject_id=SCOPE).values_list("event_type", flat=True))
    assert types == {"agent.log.tool_call", "agent.log.deploy_started"}


@committed
def test_a_receipt_bound_to_an_agent_event_fails_on_every_surface(client, tmp_path):
    # Given an active record and a forget-shaped agent event naming it, as an
    # agent could log one before this fix (or as any non-purge event could look)
    record_id = remember_fact()
    event = plant_agent_purge(record_id)
    receipt = forged_receipt(event.event_id, event.event_hash, event.created_at, record_id)
    # When the forged receipt is verified on every surface
    verdicts = four_verdicts(client, receipt, tmp_path)
    # Then every surface refuses it: the event is not a purge, and the record is active
    not_a_purge = (
        f"audit event {event.event_id} is a agent.memory_forget event, not a purge "
        "(memory.forget or memory.record_rejected)"
    )
    still_active = f"record {record_id} is active, not tombstoned: it was not purged"
    for surface in ("tool", "receipt page", "upload page"):
        assert not_a_purge in verdicts[surface], (surface, verdicts[surface])
    for surface in ("receipt page", "upload page"):
        assert still_active in verdicts[surface], (surface, verdicts[surface])
    if connection.vendor == "sqlite":  # the tool has the records only in a SQLite file
        assert still_active in verdicts["tool"]
    assert not_a_purge in verdicts["command"][0] and still_active in verdicts["command"][0]
    # And the record is still recalled (nothing was purged)
    assert Record.objects.get(record_id=record_id).status == "active"


@committed
def test_a_genuine_receipt_holds_until_its_record_is_revived(client, alice_api, tmp_path):
    # Given a real forget through the API and its receipt
    record_id = remember_fact()
    response = alice_api.post("/memory/forget", {"scope": SCOPE, "record_ids": [record_id]})
    assert response.status_code == 200, response.content
    receipt = response.data
    # Then every surface says it holds
    assert four_verdicts(client, receipt, tmp_path) == {
        "tool": [],
        "command": [],
        "receipt page": [],
        "upload page": [],
    }
    # When someone with database access brings the purged record back
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_record SET status = 'active', content = 'back' WHERE record_id = %s",
            [record_id],
        )
    # Then the surfaces that have the records at hand refuse the receipt
    verdicts = four_verdicts(client, receipt, tmp_path)
    still_active = f"record {record_id} is active, not tombstoned: it was not purged"
    assert still_active in verdicts["receipt page"]
    assert still_active in verdicts["upload page"]
    assert still_active in verdicts["command"][0]
    if connection.vendor == "sqlite":
        assert still_active in verdicts["tool"]
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == [still_active]
