"""Database faults the operator must fix, told apart from bugs.

A full disk, a read-only database file or a PostgreSQL server out of
connection slots is not a bug in the request: it is answered 503 with a
sentence saying what is wrong (JSON under ``/api/v1/``, a page in the
dashboard), and logged. Every other exception stays a 500.
"""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

RETRY_AFTER_SECONDS = 30

_FAULTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("database or disk is full", "no space left on device", "could not extend file"),
        "the database's disk is full: changes are refused until an operator frees space",
    ),
    (
        ("readonly database", "read-only", "read only"),
        "the database is read-only: changes are refused until an operator makes it writable;"
        " reading still works",
    ),
    (
        (
            "too many clients",
            "remaining connection slots",
            "too many connections",
            "couldn't get a connection",  # psycopg_pool: every pooled connection busy
        ),
        "the database has no free connections right now: retry in a moment",
    ),
    (
        ("database is locked", "database table is locked"),
        "the database is busy: retry in a moment",
    ),
)

UNAVAILABLE = "the database is unavailable right now: retry in a moment"


def database_fault(exc: BaseException | None) -> str | None:
    """A sentence for an operator if ``exc`` is a database fault (not a bug), else ``None``."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return None
    text = str(exc).lower()
    for needles, sentence in _FAULTS:
        if any(needle in text for needle in needles):
            return sentence
    return UNAVAILABLE
