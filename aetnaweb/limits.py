"""Input limits every app shares: the one place each bound is written.

App-specific limits live in ``memory/limits.py`` and ``actions/limits.py``;
the ones here are spoken by more than one app (a session or turn ID is the
same 200 characters in memory, actions and the audit chain) or by the HTTP
layer as a whole. Services, forms, API schemas and MCP tools import these
names instead of repeating numbers; tests/test_limits.py checks that every
layer agrees at each limit and one past it.
"""

from __future__ import annotations

MAX_CONTEXT_CHARS = 200  # a session or turn ID
MAX_BODY_BYTES = 64 * 1024  # an HTTP API request body
