"""Raw SQL helpers shared by the apps' hot paths (kernel: imports no app)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Rows per multi-row INSERT: far below both databases' bound on parameters
# (SQLite 32,766; PostgreSQL 65,535) for the few columns written this way.
ROWS_PER_INSERT = 500


def insert_rows(
    cursor: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """INSERT ``rows`` into ``table`` as multi-row INSERTs of at most :data:`ROWS_PER_INSERT` rows.

    One statement instead of ``executemany``, which costs a round trip per
    row on PostgreSQL. ``table`` and ``columns`` are the caller's constants
    (model metadata), never input; the values go as parameters.
    """
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "  # noqa: S608  (caller constants)
    row_marks = "(" + ", ".join(["%s"] * len(columns)) + ")"
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        cursor.execute(
            head + ", ".join([row_marks] * len(chunk)),
            [value for row in chunk for value in row],
        )
