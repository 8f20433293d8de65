"""Issue 11 item 3: one permission and actor rule for every service.

``principal`` is a required keyword on every service (leaving it out must not
silently act as the trusted caller), and the audit actor comes from the
principal through :func:`aetnaweb.access.audit_actor`: a person or a token is
recorded as itself whatever ``actor`` a caller passes; only the system
principal may name an actor (commands' ``--actor``, imports, the demo).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from access import grants, tokens
from actions import services as action_services
from aetnaweb import access
from aetnaweb.access import SYSTEM, Principal
from aetnaweb.scopes import Scope
from audit import checkpoints, receipts, verification
from audit import services as audit_services
from audit.models import AuditEvent
from memory import batch, corrections
from memory import services as memory_services
from memory.mcp_server import build_server
from tests.actions.conftest import write_op
from tests.api.conftest import ApiClient, issue_token

SCOPE = "acme:alice:proj"

TOKEN = Principal(
    label="agent:notes-bot",
    kind="token",
    bindings=((Scope.parse("acme:alice:*"), frozenset(access.TOKEN_CAPABILITIES)),),
)


def operator_like(label: str = "ada") -> Principal:
    return Principal(
        label=label,
        kind="operator",
        bindings=((Scope.parse("acme:*:*"), access.ALL_CAPABILITIES),),
        user_id=1,
    )


SERVICES: list[Callable[..., Any]] = [
    *(getattr(memory_services, name) for name in memory_services.__all__ if name.islower()),
    corrections.correct_record,
    batch.remember_batch,
    action_services.stage,
    action_services.approve,
    action_services.deny,
    action_services.abort,
    action_services.commit,
    action_services.recover,
    action_services.verify,
    action_services.purge_payloads,
    action_services.import_journal,
    action_services.record_resolution,
    audit_services.log_agent_event,
    audit_services.create_checkpoint,
    audit_services.start_verification_run,
    verification.verify_subject,
    verification.verify_subjects,
    verification.verify_all,
    receipts.verify_deletion_receipt,
    checkpoints.verify_checkpoints,
    grants.grant_role,
    grants.revoke_role,
    grants.delete_user,
    tokens.create_token,
    tokens.revoke_token,
]


@pytest.mark.parametrize("service", SERVICES, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_every_service_requires_principal_as_a_keyword(service):
    # Given a service function (through its decorators)
    parameter = inspect.signature(inspect.unwrap(service)).parameters.get("principal")
    # Then principal is keyword-only with no default: leaving it out is a TypeError,
    # never a silent act as the trusted caller
    assert parameter is not None
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is inspect.Parameter.empty


@pytest.mark.django_db
def test_a_call_without_principal_is_refused_and_writes_nothing():
    before = AuditEvent.objects.count()
    with pytest.raises(TypeError, match="principal"):
        memory_services.remember(scope=SCOPE, text="My car is red.")  # type: ignore[call-arg]
    assert AuditEvent.objects.count() == before


# -- the rule itself ---------------------------------------------------------------


@pytest.mark.parametrize("principal", [TOKEN, operator_like()], ids=["token", "operator"])
def test_a_person_or_token_is_always_recorded_as_itself(principal):
    assert access.audit_actor(principal, "system", default="user") == principal.label
    assert access.audit_actor(principal, None, default="user") == principal.label


def test_only_the_system_principal_names_an_actor():
    assert access.audit_actor(SYSTEM, "importer", default="user") == "importer"
    assert access.audit_actor(SYSTEM, None, default="user") == "user"
    assert access.audit_actor(SYSTEM) == "system"


# -- through the services ------------------------------------------------------------


def last_actor(event_type: str) -> str:
    event = AuditEvent.objects.filter(event_type=event_type).order_by("-sequence").first()
    assert event is not None, event_type
    return event.actor


@pytest.mark.django_db
@pytest.mark.parametrize("principal", [TOKEN, operator_like()], ids=["token", "operator"])
def test_memory_services_record_the_principal_not_a_claimed_actor(principal):
    # When a person or token claims to be someone else
    memory_services.remember(scope=SCOPE, text="My car is red.", principal=principal, actor="user")
    memory_services.recall(scope=SCOPE, query="car", principal=principal, actor="system")
    # Then the chain names who acted
    assert last_actor("memory.record_created") == principal.label
    assert last_actor("memory.recall") == principal.label


@pytest.mark.django_db
def test_the_system_principal_keeps_its_named_actor_and_verb_default():
    memory_services.remember(scope=SCOPE, text="My car is red.", principal=SYSTEM, actor="cli")
    assert last_actor("memory.record_created") == "cli"
    memory_services.recall(scope=SCOPE, query="car", principal=SYSTEM)
    assert last_actor("memory.recall") == "agent"


@pytest.mark.django_db
def test_audit_log_agent_event_records_the_token_not_a_claimed_actor():
    audit_services.log_agent_event(
        subject=SCOPE,
        event_type="agent.log.tool_call",
        payload={"tool": "search"},
        principal=TOKEN,
        actor="admin",
    )
    assert last_actor("agent.log.tool_call") == TOKEN.label


@pytest.mark.django_db
def test_actions_stage_and_abort_record_the_principal_not_a_claimed_actor(
    tmp_path, settings, authorizing_messages
):
    settings.AETNAWEB_ACTIONS_ROOT = str(tmp_path)
    operator = operator_like()
    staged = action_services.stage(
        scope=SCOPE,
        operations=[write_op("a.txt", "x")],
        principal=TOKEN,
        actor="admin",
    )
    assert last_actor("action.proposed") == TOKEN.label
    action_services.abort(
        transaction_id=staged.transaction_id, principal=operator, actor="user", reason="no"
    )
    assert last_actor("action.aborted") == operator.label


# -- through the API and MCP -----------------------------------------------------------


@pytest.mark.django_db
def test_the_api_records_the_token_whatever_the_body_claims(client):
    # Given a token named notes-bot
    api = ApiClient(client, issue_token("acme:alice:*", name="notes-bot"))
    # When its request body claims another actor
    response = api.post(
        "/memory/remember", {"scope": SCOPE, "text": "My car is red.", "actor": "user"}
    )
    # Then the claim is refused, naming the field, and nothing is written
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "unknown_field"
    assert "actor" in response.json()["detail"]
    assert not AuditEvent.objects.filter(event_type="memory.record_created").exists()
    # And without the claim the chain names the token
    response = api.post("/memory/remember", {"scope": SCOPE, "text": "My car is red."})
    assert response.status_code in (200, 201), response.content
    assert last_actor("memory.record_created") == "agent:notes-bot"


@pytest.mark.django_db(transaction=True)
def test_mcp_records_its_bound_principal():
    server = build_server(SCOPE, capabilities=["read", "write"], name="desk")

    async def call() -> Any:
        return await server.call_tool("remember", {"text": "My car is red."})

    anyio.run(call)
    assert last_actor("memory.record_created") == "agent:desk"
