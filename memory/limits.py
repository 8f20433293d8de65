"""Input limits of the memory engine: the one place each bound is written.

Services enforce them, and the dashboard forms, the HTTP API schemas and the
MCP tool signatures declare the same numbers by importing them from here, so
a form can never accept what the service refuses (or the reverse).
tests/test_limits.py drives every layer at each limit and one past it.
"""

from __future__ import annotations

from aetnaweb.limits import MAX_CONTEXT_CHARS

__all__ = ["MAX_CONTEXT_CHARS"]  # re-exported: memory speaks it too

# Messages and explicit facts (memory-engine.md "Remember").
MAX_TEXT_CHARS = 100_000  # a remembered or captured message
MAX_KEY_CHARS = 200  # an explicit fact's key (slot name)
MAX_VALUE_CHARS = 10_000  # an explicit fact's value
MAX_KIND_CHARS = 64  # an explicit fact's optional kind label

# Conversation import (import_conversation).
MAX_IMPORT_TURNS = 1000  # turns per call; longer conversations come in several calls
MAX_SPEAKER_CHARS = 100  # a turn's speaker name

# Recall and the rendered context block.
MAX_QUERY_CHARS = 10_000
MAX_RECALL_LIMIT = 50  # results (recall) or items (recall_block) per call
MAX_BLOCK_CHARS = 100_000  # recall_block and persona max_chars

# Forget and review.
MAX_FORGET_RECORDS = 1000  # record IDs named by, or matched by, one forget
MAX_SELECTOR_CHARS = 10_000  # a forget selector or utterance
MAX_REASON_CHARS = 2000  # a promote or reject reason (only its digest is audited)

# Proposals (propose_facts).
MAX_PROPOSED_FACTS = 500  # facts per proposal
MAX_FACT_CONTENT_CHARS = 10_000  # one proposed fact's content
MAX_FACT_EVIDENCE = 100  # episode or record IDs one proposed fact cites

# Lists.
MAX_PAGE = 200  # rows per page of records, scenes and the API's lists

# Record metadata (memory/metadata.py): a flat JSON object of scalar values.
MAX_METADATA_KEYS = 32  # keys on one record
MAX_METADATA_KEY_CHARS = 64  # one key: [a-z0-9_][a-z0-9_.-]*
MAX_METADATA_BYTES = 4096  # the whole object as canonical JSON (UTF-8)
MAX_METADATA_FILTER_KEYS = 8  # keys one metadata filter may AND together
