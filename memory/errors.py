"""Domain errors of the memory engine, each with a message a person can act on.

All derive from :class:`MemoryEngineError` (a ``ValueError``), so views and
commands can turn any of them into a form error, a 4xx answer or one line on
stderr. Invalid scopes raise :class:`aetnaweb.scopes.ScopeError` instead.
"""

from __future__ import annotations


class MemoryEngineError(ValueError):
    """Base class: a request the memory engine refuses."""


class RecordNotFound(MemoryEngineError):
    """No record with that ID at the scope named (it may exist elsewhere: we do not say)."""


class RecordStateError(MemoryEngineError):
    """The record exists at that scope but its status does not allow the operation."""


class SelectorError(MemoryEngineError):
    """A forget request that names nothing (empty selector, no IDs, no needle), or too much.

    ``reason`` is a short code recorded in the ``memory.forget_rejected`` event.
    """

    def __init__(self, message: str, *, reason: str = "empty_selector") -> None:
        super().__init__(message)
        self.reason = reason


class ForgetPreviewStale(MemoryEngineError):
    """The records a forget would purge are no longer the ones previewed."""


class ExtractionError(MemoryEngineError):
    """Input that cannot be stored as asked (empty text, bad key/value, unknown source type)."""


class CaptureError(MemoryEngineError):
    """A capture call with an unknown role."""


class ProposalError(MemoryEngineError):
    """A batch of proposed facts that is not a list of objects."""


class ActionLogError(MemoryEngineError):
    """An ``agent.*`` event the caller may not log (bad type or payload); ``field`` says which."""

    def __init__(self, message: str, *, field: str = "payload") -> None:
        super().__init__(message)
        self.field = field


class QueryError(MemoryEngineError):
    """A listing filter or cursor that is not valid (unknown status, bad cursor, bad limit)."""
