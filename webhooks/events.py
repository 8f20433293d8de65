"""The events an endpoint may subscribe to, named as the engine names them.

Three are audit event types (docs/spec/audit-log-v1.md and the apps'
services); a failed chain verification is a verification run's verdict, not
an audit event, so it has a name of its own in the same dotted form.
"""

from __future__ import annotations

RECORD_QUARANTINED = "memory.record_quarantined"
PLAN_PROPOSED = "action.proposed"  # delivered only when the plan awaits approval
PLAN_UNCERTAIN = "action.transaction_uncertain"
VERIFICATION_FAILED = "audit.verification_failed"
TEST = "webhook.test"

# What an operator picks from, with the sentence the dashboard shows.
SUBSCRIBABLE: dict[str, str] = {
    RECORD_QUARANTINED: "A fact is waiting in quarantine for review",
    PLAN_PROPOSED: "A guarded-action plan is awaiting approval",
    PLAN_UNCERTAIN: "A plan ended uncertain: an effect's outcome is unknown",
    VERIFICATION_FAILED: "A chain verification run failed",
}

# The audit event types the app listens to (audit.subscribers).
FROM_AUDIT = (RECORD_QUARANTINED, PLAN_PROPOSED, PLAN_UNCERTAIN)

# The proposal state that needs a person; staged (preview/observe) plans do not.
AWAITING_APPROVAL = "awaiting_approval"
