"""The events an endpoint may subscribe to, named as the engine names them.

Two kinds. Events that need a person: three are audit event types
(docs/spec/audit-log-v1.md and the apps' services); a failed chain
verification is a verification run's verdict, not an audit event, so it has a
name of its own in the same dotted form. Memory changes (issue 35 item 6):
four names for what happened to records, each drawn from the audit events
that record it (:data:`MEMORY_CHANGE_SOURCES`). An endpoint hears only what
it chose: nothing is subscribed by default.
"""

from __future__ import annotations

RECORD_QUARANTINED = "memory.record_quarantined"
PLAN_PROPOSED = "action.proposed"  # delivered only when the plan awaits approval
PLAN_UNCERTAIN = "action.transaction_uncertain"
VERIFICATION_FAILED = "audit.verification_failed"
TEST = "webhook.test"

# Memory changes: the webhook event names (not audit event types of their own).
RECORD_CREATED = "memory.record_created"
RECORD_SUPERSEDED = "memory.record_superseded"
RECORD_FORGOTTEN = "memory.record_forgotten"
RECORD_EXPIRED = "memory.record_expired"

# Events that need a person, with the sentence the dashboard shows.
NEEDS_A_PERSON: dict[str, str] = {
    RECORD_QUARANTINED: "A fact is waiting in quarantine for review",
    PLAN_PROPOSED: "A guarded-action plan is awaiting approval",
    PLAN_UNCERTAIN: "A plan ended uncertain: an effect's outcome is unknown",
    VERIFICATION_FAILED: "A chain verification run failed",
}

# Memory changes, for systems that mirror or index what the memory holds.
MEMORY_CHANGES: dict[str, str] = {
    RECORD_CREATED: "A record was stored (active)",
    RECORD_SUPERSEDED: "Records were replaced by a newer value, a correction or a consolidation",
    RECORD_FORGOTTEN: "Records and stored messages were forgotten (a forget or an erasure)",
    RECORD_EXPIRED: "Records or stored messages expired and were purged (retention)",
}

# What an operator picks from.
SUBSCRIBABLE: dict[str, str] = {**NEEDS_A_PERSON, **MEMORY_CHANGES}

# The audit event types each memory change is drawn from.
MEMORY_CHANGE_SOURCES: dict[str, tuple[str, ...]] = {
    "memory.record_created": (RECORD_CREATED, RECORD_SUPERSEDED),  # a new value replaces older
    "memory.record_corrected": (RECORD_SUPERSEDED,),
    "memory.record_promoted": (RECORD_SUPERSEDED,),  # a promoted fact replaces its slot
    "memory.consolidated": (RECORD_SUPERSEDED,),
    # A forget, or a retention purge: a memory.forget whose mode is EXPIRED_MODE.
    "memory.forget": (RECORD_FORGOTTEN, RECORD_EXPIRED),
}

# The memory.forget mode of a retention or expiry purge (memory.services.retention
# writes it; webhooks does not import memory, tests/webhooks pins that they agree).
EXPIRED_MODE = "expired"

# The audit event types the app listens to (audit.subscribers).
FROM_AUDIT = (RECORD_QUARANTINED, PLAN_PROPOSED, PLAN_UNCERTAIN, *MEMORY_CHANGE_SOURCES)

# The proposal state that needs a person; staged (preview/observe) plans do not.
AWAITING_APPROVAL = "awaiting_approval"
