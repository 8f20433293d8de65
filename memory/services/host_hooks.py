"""A host agent's hooks: capture each turn (user turns remembered, agent turns digested), log actions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.services import AuditError, lock_subject, log_agent_event
from memory import metadata as record_metadata
from memory.errors import ActionLogError, CaptureError
from memory.inputs import parse_time
from memory.services._common import _audit, _context
from memory.services.remembering import remember
from memory.services.results import CaptureResult

CAPTURE_EVENT_TYPES = {
    "assistant": "agent.assistant_message",
    "tool_call": "agent.tool_call",
    "tool_result": "agent.tool_result",
}


@storable_text_arguments
@transaction.atomic
def capture(
    *,
    scope: Scope | str,
    role: str,
    content: str,
    session_id: str | None = None,
    turn_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    occurred_at: datetime | str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> CaptureResult:
    """A host's turn hook: a ``user`` turn is remembered; agent turns leave digests only.

    ``assistant``, ``tool_call`` and ``tool_result`` append ``agent.*`` events
    with a digest and size, never content, so an agent cannot poison its own
    memory. Any other role is refused. ``metadata`` goes with the records a
    user turn stores; it is checked for every role (an agent turn stores none).
    ``occurred_at`` is when a user turn was said (as for remember).
    """
    checked_metadata = record_metadata.check_metadata(metadata)
    said_at = parse_time(occurred_at, "occurred_at")
    if role == "user":
        result = remember(
            scope=scope,
            text=content,
            session_id=session_id,
            turn_id=turn_id,
            metadata=checked_metadata,
            occurred_at=said_at,
            principal=principal,
            actor=actor,
        )
        return CaptureResult(role, None, result)
    if role not in CAPTURE_EVENT_TYPES:
        raise CaptureError(f"unknown role {role!r}: use user, assistant, tool_call or tool_result")
    parsed = access.require(principal, access.WRITE, scope)
    if not isinstance(content, str):
        raise CaptureError("captured content must be text")
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    lock_subject(str(parsed))
    event = _audit(
        scope=parsed,
        event_type=CAPTURE_EVENT_TYPES[role],
        actor=access.audit_actor(principal, actor, default="agent"),
        payload={"role": role, "content_sha256": sha256_text(content), "chars": len(content)},
        session_id=session,
        turn_id=turn,
    )
    return CaptureResult(role, event.event_id, None)


@storable_text_arguments
@transaction.atomic
def log_action(
    *,
    scope: Scope | str,
    event_type: str,
    payload: dict[str, Any],
    session_id: str | None = None,
    turn_id: str | None = None,
    principal: Principal,
    actor: str | None = None,
) -> dict[str, Any]:
    """Append the caller's ``agent.*`` event to the scope's chain, as ``agent.log.*``.

    The payload is the caller's: it must hold digests, IDs and counts, not
    content, and never the keys of deletion evidence (see
    :func:`audit.services.log_agent_event`).
    """
    # The scope is checked here so a bad one surfaces as ScopeError (the API's
    # "scope" field) and an out-of-reach one as AccessDenied, like every verb.
    parsed = access.require(principal, access.WRITE, scope)
    session = _context("session_id", session_id)
    turn = _context("turn_id", turn_id)
    try:
        event = log_agent_event(
            subject=parsed,
            event_type=event_type,
            payload=payload,
            actor=access.audit_actor(principal, actor, default="agent"),
            session_id=session or None,
            turn_id=turn or None,
            principal=principal,
        )
    except AuditError as exc:
        raise ActionLogError(str(exc), field=exc.field or "payload") from exc
    return {
        "audit_event_id": event.event_id,
        "sequence": event.sequence,
        "event_hash": event.event_hash,
        "subject_id": event.subject_id,
        "event_type": event.event_type,
    }
