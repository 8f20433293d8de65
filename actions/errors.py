"""Guarded-action errors (guarded-actions-v1 "A19. Error catalogue").

Every error the engine raises on purpose is an :class:`ActionError`, so views,
the API and the management command can turn all of them into a clear message
without catching bugs. Each one also subclasses the built-in type the spec
names (``ValueError``, ``KeyError``, ``RuntimeError``), so code written against
the published catalogue keeps working. Each states the code and HTTP status
the API answers with (:class:`aetnaweb.errors.DomainError`).
"""

from __future__ import annotations

from aetnaweb.errors import DomainError


class ActionError(DomainError):
    """Base class: a refusal with a message a person can act on."""

    code = "action_refused"
    status = 400
    meaning = "another refusal of the guarded-actions engine"


class ActionInputError(ActionError, ValueError):
    """A malformed proposal, evidence reference or argument (EV-*, OP-*, P-1, FS-*)."""

    code = "invalid_operation"
    status = 400
    meaning = "an operation does not prepare (see detail)"


class ActionPolicyViolation(ActionError, ValueError):
    """The guard policy refuses the plan (PO-2, PO-3)."""

    code = "policy_violation"
    status = 400
    meaning = "an operation breaks the guard policy"


class ActionStateError(ActionError):
    """The transaction is not in a state that allows this step."""

    code = "action_state_error"
    status = 409
    meaning = "the transaction is not in a state that allows this step"


class ConcurrentTransitionError(ActionStateError, ValueError):
    """A compare-and-swap lost: another process moved the transaction first."""

    code = "concurrent_transition"
    status = 409
    meaning = "another process moved the transaction first; reload and retry"


class TransactionNotFound(ActionError, KeyError):
    """No transaction with this ID (AP-2; shown as 404 by views and the API)."""

    code = "transaction_not_found"
    status = 404
    meaning = "no such transaction (answered as not_found)"


class AdapterNotRegistered(ActionError, KeyError):
    """No adapter is registered under the plan's adapter name."""

    code = "unknown_adapter"
    status = 400
    meaning = "an operation names an adapter that is not registered"


class AdapterDriftError(ActionError):
    """The adapter's manifest differs from the one recorded at staging (CM-5)."""

    code = "adapter_drift"
    status = 409
    meaning = "the adapter's manifest changed since the plan was staged"


class ApprovalUnavailable(ActionError, RuntimeError):
    """No usable approval key is configured, so approval and commit are disabled (decision 6)."""

    code = "approval_unavailable"
    status = 503
    meaning = "no usable approval key is configured; approval and commit are disabled"


class ApprovalKeyError(ApprovalUnavailable, ValueError):
    """A configured key that cannot be used (shorter than 32 bytes) or a bad TTL (AP-6)."""

    code = "approval_key_invalid"
    status = 503
    meaning = "the configured approval key or TTL cannot be used"


class ApprovalInvalid(ActionError, ValueError):
    """An approval does not verify: signature, scope, plan hash or expiry (AP-4, CM-4)."""

    code = "approval_invalid"
    status = 400
    meaning = "an approval does not verify (signature, scope, plan hash or expiry)"


class SeparationOfDutiesError(ActionError):
    """The proposer (or the proposing agent's owner) may not approve its own plan (decision 5)."""

    code = "separation_of_duties"
    status = 403
    meaning = "the proposer may not approve its own plan"


class PayloadPurged(ActionError, RuntimeError):
    """A prepared payload needed for commit was purged (CM-6)."""

    code = "payload_purged"
    status = 409
    meaning = "a prepared payload needed for commit was purged"


class JournalError(ActionError, ValueError):
    """A file that is not a compatible transaction journal (IJ-2)."""

    code = "invalid_journal"
    status = 400
    meaning = "the file is not a compatible transaction journal"


class JournalNotFound(ActionError, FileNotFoundError):
    """The journal path is not a file (IJ-1)."""

    code = "journal_not_found"
    status = 400
    meaning = "the journal path is not a file"


class NotDispatched(Exception):
    """Raised by an adapter when it knows the effect was never dispatched (decision 2).

    The engine records the operation as ``failed`` (not ``uncertain``) and
    compensates earlier operations; the transaction ends ``compensated`` or
    ``partial``. Raise it only when nothing can have happened.
    """
