"""Every write of the guarded-actions engine (guarded-actions-v1 A4-A16).

The life of a plan: ``stage`` records an exact, hashed world patch;
``approve`` (a person, signing on the server) or ``deny``/``abort`` decides;
``commit`` rechecks everything, records its intent before each effect, never
retries an ambiguous one, verifies, compensates what it can, and ends with a
receipt bound into the scope's audit chain; ``recover`` fences a run that
died. Audit events are appended in the same database transaction as the state
change they describe, and a terminal state commits together with its receipt
(decision 3).

Permissions (decision 5): ``stage`` needs STAGE; approve, deny, commit, abort,
recover and purge need APPROVE on the plan's scope; ``verify`` needs AUDIT or
APPROVE; ``import_journal`` needs WRITE.

One module per workflow, re-exported here so callers import
``actions.services`` only:

- :mod:`actions.services.staging`: ``stage``
- :mod:`actions.services.decide`: ``approve``, ``deny``, ``abort``
- :mod:`actions.services.committing`: ``commit`` and the per-operation run
- :mod:`actions.services.aftercare`: compensation, ``recover``,
  ``record_resolution``, ``verify``, ``purge_payloads``
- :mod:`actions.services.journal`: ``import_journal``
- :mod:`actions.services.results`: the frozen result types, each with the
  ``as_dict()`` the API, MCP and commands emit
- :mod:`actions.services._ledger`: the shared steps (load, transition, fence,
  audit event, payloads, receipt)
"""

from __future__ import annotations

from actions.limits import MAX_REASON_LENGTH
from actions.models import ActionTransaction
from actions.services._ledger import _issue_receipt, _store_payload, _transition
from actions.services.aftercare import (
    ATTENTION_STATES,
    RESOLUTION_OUTCOMES,
    purge_payloads,
    record_resolution,
    recover,
    verify,
)
from actions.services.committing import commit
from actions.services.decide import abort, approve, deny
from actions.services.journal import (
    JOURNAL_EFFECT_COLUMNS,
    JOURNAL_TRANSACTION_COLUMNS,
    import_journal,
)
from actions.services.results import (
    ImportedTransaction,
    JournalImport,
    Outcome,
    PurgeResult,
    RecoveryOutcome,
    Resolution,
    TransactionState,
    VerificationReport,
    WorldPatch,
)
from actions.services.staging import stage

__all__ = [
    "ATTENTION_STATES",
    "JOURNAL_EFFECT_COLUMNS",
    "JOURNAL_TRANSACTION_COLUMNS",
    "MAX_REASON_LENGTH",
    "RESOLUTION_OUTCOMES",
    "ActionTransaction",
    "ImportedTransaction",
    "JournalImport",
    "Outcome",
    "PurgeResult",
    "RecoveryOutcome",
    "Resolution",
    "TransactionState",
    "VerificationReport",
    "WorldPatch",
    "_issue_receipt",
    "_store_payload",
    "_transition",
    "abort",
    "approve",
    "commit",
    "deny",
    "import_journal",
    "purge_payloads",
    "record_resolution",
    "recover",
    "stage",
    "verify",
]
