"""PostgreSQL connections: server-side binding, and prepared statements for the hot paths.

Django's default on PostgreSQL binds parameters on the client and never
prepares a statement, so the server parses and plans every statement of
every request again: about 0.85 ms of planning in a text remember's twelve
round trips, on a server that, in the single-machine deployment, shares the
cores with the app. Here (unless ``AETNAWEB_DB_PREPARED_STATEMENTS=0``)
parameters are bound on the server and psycopg prepares a statement once it
has run :data:`PREPARE_AFTER` times on a connection; PostgreSQL then reuses
its plan (a generic one, when it costs no more than the plans made for each
call's values, which PostgreSQL checks over the first five).

A query whose best plan depends on its values, so that a plan made for
one scope could be slow for another (the vector and full-text candidate
searches of recall: an HNSW walk or a scan of the visible scopes' rows,
depending on how many the scopes hold), starts with :data:`CUSTOM_PLAN` and
is never prepared: planned for its own values every time, as before.

Prepared statements live in the server session, so a pooler that hands one
client's statements to another server session (PgBouncer in transaction
mode before 1.21) needs ``AETNAWEB_DB_PREPARED_STATEMENTS=0``; Django's
client-side binding is then used, as before.

A prepared statement keeps the result type it was planned with. When another
session changes the type of a column it reads (a migration run while this
process serves), PostgreSQL refuses it ("cached plan must not change result
type") until it is prepared again. Inside a transaction the refusal fails the
transaction, and its rollback makes psycopg forget every prepared statement,
so the next one is planned afresh; a statement run on its own (autocommit) is
retried once here after ``DEALLOCATE ALL``, which is safe because the refused
statement did nothing.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.base import ServerBindingCursor
from psycopg import errors, pq

# Runs of one statement on a connection before it is prepared (psycopg's default).
PREPARE_AFTER = 5
# Starts a query that must be planned for its own values every time.
CUSTOM_PLAN = "/* custom plan */ "


class PreparingCursor(ServerBindingCursor):  # type: ignore[misc]  # psycopg's cursor generics
    """Django's server-binding cursor, leaving the queries marked :data:`CUSTOM_PLAN` unprepared."""

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Any:
        if prepare is None and isinstance(query, str) and query.startswith(CUSTOM_PLAN):
            prepare = False
        try:
            return super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[misc]  # untyped in django-stubs
        except errors.FeatureNotSupported:
            # A plan made stale by another session's ALTER (checked by SQLSTATE:
            # the message is translated on a server with another language).
            # In a transaction the rollback clears the statements instead.
            status = self.connection.info.transaction_status  # type: ignore[attr-defined]  # psycopg's
            if status != pq.TransactionStatus.IDLE:
                raise
            super().execute("DEALLOCATE ALL")  # type: ignore[misc]  # psycopg sees it and forgets its statements
            return super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[misc]  # untyped in django-stubs


def connection_options() -> dict[str, Any]:
    """The ``OPTIONS`` entries for binding and preparing statements."""
    return {
        "server_side_binding": True,
        "prepare_threshold": PREPARE_AFTER,
        "cursor_factory": PreparingCursor,
    }
