"""Guarded-action errors (guarded-actions-v1 "A19. Error catalogue").

Every error the engine raises on purpose is an :class:`ActionError`, so views,
the API and the management command can turn all of them into a clear message
without catching bugs. Each one also subclasses the built-in type the spec
names (``ValueError``, ``KeyError``, ``RuntimeError``), so code written against
the published catalogue keeps working.
"""

from __future__ import annotations


class ActionError(Exception):
    """Base class: a refusal with a message a person can act on."""

    def __str__(self) -> str:
        # KeyError's default str() is the repr of its argument; keep messages plain.
        return str(self.args[0]) if self.args else self.__class__.__name__


class ActionInputError(ActionError, ValueError):
    """A malformed proposal, evidence reference or argument (EV-*, OP-*, P-1, FS-*)."""


class ActionPolicyViolation(ActionError, ValueError):
    """The guard policy refuses the plan (PO-2, PO-3)."""


class ActionStateError(ActionError):
    """The transaction is not in a state that allows this step."""


class ConcurrentTransitionError(ActionStateError, ValueError):
    """A compare-and-swap lost: another process moved the transaction first."""


class TransactionNotFound(ActionError, KeyError):
    """No transaction with this ID (AP-2; shown as 404 by views and the API)."""


class AdapterNotRegistered(ActionError, KeyError):
    """No adapter is registered under the plan's adapter name."""


class AdapterDriftError(ActionError):
    """The adapter's manifest differs from the one recorded at staging (CM-5)."""


class ApprovalUnavailable(ActionError, RuntimeError):
    """No usable approval key is configured, so approval and commit are disabled (decision 6)."""


class ApprovalKeyError(ApprovalUnavailable, ValueError):
    """A configured key that cannot be used (shorter than 32 bytes) or a bad TTL (AP-6)."""


class ApprovalInvalid(ActionError, ValueError):
    """An approval does not verify: signature, scope, plan hash or expiry (AP-4, CM-4)."""


class SeparationOfDutiesError(ActionError):
    """The proposer (or the proposing agent's owner) may not approve its own plan (decision 5)."""


class PayloadPurged(ActionError, RuntimeError):
    """A prepared payload needed for commit was purged (CM-6)."""


class JournalError(ActionError, ValueError):
    """A file that is not a compatible transaction journal (IJ-2)."""


class JournalNotFound(ActionError, FileNotFoundError):
    """The journal path is not a file (IJ-1)."""


class NotDispatched(Exception):
    """Raised by an adapter when it knows the effect was never dispatched (decision 2).

    The engine records the operation as ``failed`` (not ``uncertain``) and
    compensates earlier operations; the transaction ends ``compensated`` or
    ``partial``. Raise it only when nothing can have happened.
    """
