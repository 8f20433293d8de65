"""Domain errors of the evidence layer, each with a message a person can act on.

Errors that belong to one format stay beside it (``CanonicalJSONError`` in
:mod:`audit.canonical`, ``CheckpointError`` in :mod:`audit.checkpoints`, ...);
this module holds the refusals of the audit services themselves.
"""

from __future__ import annotations

from aetnaweb.errors import DomainError


class AuditError(DomainError, ValueError):
    """An append that the evidence layer refuses (bad subject, payload or call site).

    ``field`` names the argument at fault when there is one (``event_type``,
    ``payload``), so a caller can point at it.
    """

    code = "audit_refused"
    status = 400
    meaning = "the evidence layer refuses the append (bad subject, payload or call site)"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
