"""Input limits of guarded actions: the one place each bound is written.

The services enforce them; the dashboard forms and the HTTP API schemas
import the same names, so every layer agrees (tests/test_limits.py drives
each layer at the limit and one past it).
"""

from __future__ import annotations

from aetnaweb.limits import MAX_CONTEXT_CHARS

MAX_REASON_LENGTH = 2000  # a deny or abort reason (stored on the transaction, digest audited)
MAX_OWNER_LENGTH = 150  # who owns closing a transaction that needs attention
MAX_CONTEXT_LENGTH = MAX_CONTEXT_CHARS  # a session or turn ID, as in memory
MAX_PAGE = 200  # transactions per page of the history and the API list
