"""The memory engine's Python API: every write, and every read that leaves evidence.

Each verb of docs/spec/memory-engine.md is one keyword-only function in this
package, one module per workflow (the module map is in docs/architecture.md);
this ``__init__`` re-exports them, so callers keep writing
``from memory import services`` and ``services.remember(...)``.
Views, the HTTP API, MCP tools, management commands and tests all call these
same functions. Each one:

- validates the scope (``ScopeError``) and checks the principal with
  :func:`aetnaweb.access.require` (``AccessDenied``) before touching anything;
- runs in one database transaction, so memory rows, the full-text index and
  the audit events describing them commit together or not at all;
- takes the scope's audit-chain lock first, so concurrent writers to one
  scope are serialized (no chain fork, no lost supersession);
- writes digests, IDs and fact slot names to the audit chain, never message
  text, fact values, queries or selectors.

``principal`` is required: commands, scripts and the demo pass the system
principal explicitly (:data:`aetnaweb.access.SYSTEM`). The audit actor comes
from :func:`aetnaweb.access.audit_actor`: a person or a token is recorded as
itself whatever ``actor`` says; only the system principal may name one, and
otherwise gets the verb's default (``user`` for remember and capture,
``agent`` for recall, ``system`` otherwise).

The modules are named for their workflow (``remembering``, not ``remember``)
so that no submodule shares a name with the function it defines: with
``memory/services/remember.py``, ``memory.services.remember`` would be the
function or the module depending on import order.
"""

from __future__ import annotations

from memory.errors import MemoryEngineError
from memory.services._common import _bump as _bump
from memory.services._common import _tally as _tally
from memory.services.conversations import import_conversation
from memory.services.curation import consolidate
from memory.services.derived import (
    PERSONA_MAX_CHARS,
    PERSONA_MAX_LINES,
    SCENE_ITEMS_LIMIT,
    SCENES_LIMIT,
    inspect,
    persona,
    scenes,
)
from memory.services.forgetting import (
    FORGET_BUNDLE_FORMAT,
    MAX_UNCONFIRMED_FORGET,
    MAX_UNPREVIEWED_FORGET,
    forget,
    forget_preview,
)
from memory.services.host_hooks import CAPTURE_EVENT_TYPES, capture, log_action
from memory.services.proposals import propose_facts
from memory.services.recalling import RECALL_BLOCK_MIN_SCORE, recall, recall_block
from memory.services.remembering import _check_text as _check_text
from memory.services.remembering import _store_candidate as _store_candidate
from memory.services.remembering import remember, remember_fact
from memory.services.results import (
    CaptureResult,
    ConsolidateResult,
    ForgetPreview,
    ImportedTurn,
    ImportResult,
    Persona,
    PromoteResult,
    ProposeResult,
    RecallBlock,
    RecallCandidate,
    RecallResult,
    RememberResult,
    ReviewDecisions,
    Scene,
    SourceDecision,
    StoredRecord,
)
from memory.services.results import _AsDict as _AsDict
from memory.services.review import (
    SOURCE_DECISIONS,
    decide_records,
    decide_source,
    promote,
    reject,
)
from memory.services.scoring import (
    CANDIDATE_LIMIT,
    RECENCY_BONUS,
    TRUST_SCORES,
)

# Lower-case names are the verbs (tests/aetnaweb/test_actor_rule.py checks each
# one's principal rule); upper-case names are results, errors and limits.
__all__ = [
    "CANDIDATE_LIMIT",
    "CAPTURE_EVENT_TYPES",
    "FORGET_BUNDLE_FORMAT",
    "MAX_UNCONFIRMED_FORGET",
    "MAX_UNPREVIEWED_FORGET",
    "PERSONA_MAX_CHARS",
    "PERSONA_MAX_LINES",
    "RECALL_BLOCK_MIN_SCORE",
    "RECENCY_BONUS",
    "SCENES_LIMIT",
    "SCENE_ITEMS_LIMIT",
    "SOURCE_DECISIONS",
    "TRUST_SCORES",
    "CaptureResult",
    "ConsolidateResult",
    "ForgetPreview",
    "ImportResult",
    "ImportedTurn",
    "MemoryEngineError",
    "Persona",
    "PromoteResult",
    "ProposeResult",
    "RecallBlock",
    "RecallCandidate",
    "RecallResult",
    "RememberResult",
    "ReviewDecisions",
    "Scene",
    "SourceDecision",
    "StoredRecord",
    "capture",
    "consolidate",
    "decide_records",
    "decide_source",
    "forget",
    "forget_preview",
    "import_conversation",
    "inspect",
    "log_action",
    "persona",
    "promote",
    "propose_facts",
    "recall",
    "recall_block",
    "reject",
    "remember",
    "remember_fact",
    "scenes",
]
