"""One line per audit event that a person can read ("rita promoted mem_3f2a… (superseding 1)").

Built from the event's columns and its payload's identifiers and counts only
(payloads hold no content), so a summary never says more than the row does.
A payload is evidence, not trusted input: every field is read defensively and
anything unexpected falls back to the event type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from audit.models import AuditEvent

Payload = dict[str, Any]


def _short(value: Any, length: int = 12) -> str:
    text = str(value) if value is not None else "?"
    return text if len(text) <= length else text[:length] + "…"


def _count(payload: Payload, key: str) -> int:
    value = payload.get(key)
    if isinstance(value, list):
        return len(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


SUMMARIES: dict[str, Callable[[AuditEvent, Payload], str]] = {
    "memory.recall": lambda e, p: (
        f"{e.actor} recalled: {_count(p, 'returned_ids')} of "
        f"{_plural(_count(p, 'candidate_count'), 'candidate')} returned"
    ),
    "memory.context_injected": lambda e, p: f"{e.actor} injected recalled memory into a prompt",
    "memory.record_created": lambda e, p: (
        f"{e.actor} stored {_short(p.get('record_id') or e.record_id, 16)}"
        + (f" ({p['status']})" if isinstance(p.get("status"), str) else "")
    ),
    "memory.record_quarantined": lambda e, p: (
        f"{_short(p.get('record_id') or e.record_id, 16)} was quarantined for review"
        + (f" (from {p['source_type']})" if isinstance(p.get("source_type"), str) else "")
    ),
    "memory.record_promoted": lambda e, p: (
        f"{e.actor} promoted {_short(p.get('record_id') or e.record_id, 16)}"
        + (f", superseding {_count(p, 'superseded_ids')}" if _count(p, "superseded_ids") else "")
    ),
    "memory.record_rejected": lambda e, p: (
        f"{e.actor} rejected {_short(p.get('record_id') or e.record_id, 16)} and purged it"
    ),
    "memory.record_corrected": lambda e, p: (
        f"{e.actor} corrected {_short(p.get('record_id') or e.record_id, 16)}"
        + (
            f" with {_short(p['corrected_by'], 16)}"
            if isinstance(p.get("corrected_by"), str)
            else ""
        )
    ),
    "memory.forget": lambda e, p: (
        f"retention purged {_plural(_count(p, 'count'), 'lapsed record')}"
        if p.get("mode") == "expired"
        else f"{e.actor} forgot {_plural(_count(p, 'count'), 'record')}"
    ),
    "memory.retention_policy_set": lambda e, p: (
        f"{e.actor} set retention: keep {p.get('target')} {p.get('keep_days')} days here and below"
    ),
    "memory.retention_policy_removed": lambda e, p: (
        f"{e.actor} removed the retention policy for {p.get('target')}"
    ),
    "memory.forget_rejected": lambda e, p: f"{e.actor}'s forget was refused (nothing deleted)",
    "memory.forget_bundled": lambda e, p: (
        f"{e.actor} forgot {_plural(_count(p, 'purged_record_count'), 'record')} here and "
        "in the scopes below (receipts bundled)"
    ),
    "memory.subject_exported": lambda e, p: (
        f"{e.actor} exported everything stored under {e.subject_id}"
    ),
    "memory.subject_erased": lambda e, p: (
        f"{e.actor} erased everything stored under {e.subject_id} "
        f"({_plural(_count(p, 'purged_record_count'), 'record')})"
    ),
    "memory.legal_hold_set": lambda e, p: (
        f"{e.actor} set legal hold {_short(p.get('hold_id'), 16)}: nothing here may be purged"
    ),
    "memory.legal_hold_lifted": lambda e, p: (
        f"{e.actor} lifted legal hold {_short(p.get('hold_id'), 16)}"
    ),
    "memory.duplicate_ignored": lambda e, p: (
        f"a duplicate of {_short(p.get('duplicate_of'), 16)} was ignored"
    ),
    "memory.untrusted_source_ignored": lambda e, p: "untrusted content was ignored",
    "memory.consolidated": lambda e, p: f"{e.actor} consolidated memory",
    "memory.aetnamem_imported": lambda e, p: (
        f"{e.actor} imported {_plural(_count(p, 'records'), 'record')} from aetnamem"
        + (" (forced: its chain did not verify)" if p.get("forced") else "")
    ),
    "memory.persona_built": lambda e, p: f"{e.actor} built the persona summary",
    "memory.proposal_rejected": lambda e, p: f"a proposed fact from {e.actor} was refused",
    "episode.ingested": lambda e, p: (
        f"{e.actor} sent a message"
        + (f" ({p['chars']} characters)" if isinstance(p.get("chars"), int) else "")
    ),
    "agent.assistant_message": lambda e, p: f"{e.actor} captured an assistant message",
    "agent.tool_call": lambda e, p: f"{e.actor} captured a tool call",
    "agent.tool_result": lambda e, p: f"{e.actor} captured a tool result",
    "access.login_slowed": lambda e, p: "sign-ins were slowed after repeated failures",
    "access.login_locked": lambda e, p: "sign-ins were locked after repeated failures",
    "access.login_unlocked": lambda e, p: f"{e.actor} lifted a sign-in lock",
    "access.person_invited": lambda e, p: f"{e.actor} invited {p.get('user')} as {p.get('role')}",
    "access.invitation_accepted": lambda e, p: f"{p.get('user')} joined through an invitation",
    "access.invitation_revoked": lambda e, p: (
        f"{e.actor} revoked the invitation of {p.get('user')}"
    ),
    "access.person_deactivated": lambda e, p: f"{e.actor} deactivated {p.get('user')}",
    "access.person_reactivated": lambda e, p: f"{e.actor} reactivated {p.get('user')}",
    "access.grant_added": lambda e, p: f"{e.actor} granted a role",
    "access.grant_revoked": lambda e, p: f"{e.actor} revoked a role",
    "access.token_created": lambda e, p: (
        f"{e.actor} created API token {_short(p.get('token_prefix'), 16)}"
    ),
    "access.token_revoked": lambda e, p: (
        f"{e.actor} revoked API token {_short(p.get('token_prefix'), 16)}"
    ),
    "webhook.endpoint_created": lambda e, p: (
        f"{e.actor} registered webhook {_short(p.get('endpoint_id'), 20)}"
        + (f" to {_short(p['host'], 60)}" if isinstance(p.get("host"), str) else "")
    ),
    "webhook.endpoint_updated": lambda e, p: (
        f"{e.actor} changed webhook {_short(p.get('endpoint_id'), 20)}"
    ),
    "webhook.endpoint_deleted": lambda e, p: (
        f"{e.actor} deleted webhook {_short(p.get('endpoint_id'), 20)}"
    ),
    "webhook.secret_rotated": lambda e, p: (
        f"{e.actor} rotated the secret of webhook {_short(p.get('endpoint_id'), 20)}"
    ),
    "action.proposed": lambda e, p: (
        f"{e.actor} proposed a plan ({_plural(_count(p, 'operations'), 'operation')}, "
        f"{p.get('mode', '?')} mode)"
    ),
    "action.approved": lambda e, p: f"{e.actor} approved the plan",
    "action.committing": lambda e, p: f"{e.actor} started the commit",
    "action.effect_executing": lambda e, p: "an operation started",
    "action.effect_verified": lambda e, p: "an operation ran and was verified",
    "action.effect_failed": lambda e, p: "an operation failed before anything was sent",
    "action.effect_uncertain": lambda e, p: "an operation's outcome is unknown",
    "action.transaction_uncertain": lambda e, p: "the transaction ended uncertain",
    "action.precondition_failed": lambda e, p: "a precondition no longer held",
    "action.compensating": lambda e, p: "undoing what ran",
    "action.compensation_verified": lambda e, p: "an undo was verified",
    "action.compensation_failed": lambda e, p: "an undo failed",
    "action.committed": lambda e, p: "the plan ran and every operation was verified",
    "action.aborted": lambda e, p: (
        f"{p.get('aborted_by') or e.actor} "
        + ("denied" if p.get("reason_category") == "denied" else "aborted")
        + " the plan"
    ),
    "action.recovery_required": lambda e, p: f"{e.actor} fenced an interrupted commit",
    "action.payloads_purged": lambda e, p: f"{e.actor} purged the plan's payloads",
    "action.receipt_issued": lambda e, p: "a receipt was issued",
    "action.source_imported": lambda e, p: f"{e.actor} imported a journal transaction",
    "action.resolution_recorded": lambda e, p: (
        f"{e.actor} recorded a resolution ({str(p.get('outcome', '?')).replace('_', ' ')}, "
        f"owner {_short(p.get('owner'), 40)})"
    ),
}

# Every event type the engine itself writes, each with a summary above.
# tests/audit/test_known_event_types.py scans the code for emitted types and
# fails when one is missing here, so the explorer never shows a bare type name
# for an engine event (agent-logged ``agent.log.*`` types are the caller's).
KNOWN_EVENT_TYPES: frozenset[str] = frozenset(SUMMARIES)


def event_summary(event: AuditEvent) -> str:
    """A one-line human summary of ``event``; its type when the type is unknown."""
    build = SUMMARIES.get(event.event_type)
    if build is None:
        return f"{event.actor}: {event.event_type}"
    try:
        payload = json.loads(event.payload)
    except ValueError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    try:
        return build(event, payload)
    except (TypeError, ValueError, AttributeError, KeyError):
        return f"{event.actor}: {event.event_type}"
