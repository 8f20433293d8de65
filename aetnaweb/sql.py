"""Raw SQL helpers shared by the apps' hot paths (kernel: imports no app)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection
from django.db.models import Model

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


def execute_rows(cursor: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """``cursor.executemany(sql, rows)``, as one plain ``execute`` when there is one row.

    A write path usually has one row (one remember, one record): psycopg's
    ``executemany`` runs even that in pipeline mode, about 0.1 ms more of
    round trip and 0.07 ms more of CPU than ``execute`` on this machine.
    """
    if len(rows) == 1:
        cursor.execute(sql, rows[0])
    elif rows:
        cursor.executemany(sql, rows)


@functools.cache
def _insert_returning(model: type[Model], with_pk: bool, vendor: str) -> tuple[list[Any], str]:
    """(the fields written, the INSERT ... RETURNING pk) of ``model``, built once per process."""
    meta = model._meta
    quote = connection.ops.quote_name
    pk_field: Any = meta.pk
    fields: list[Any] = [
        field for field in meta.local_concrete_fields if with_pk or field is not pk_field
    ]
    columns = ", ".join(quote(field.column) for field in fields)
    marks = ", ".join(["%s"] * len(fields))
    return fields, (
        f"INSERT INTO {quote(meta.db_table)} ({columns}) "  # noqa: S608  (model metadata)
        f"VALUES ({marks}) RETURNING {quote(pk_field.column)}"
    )


def create_row[M: Model](cursor: Any, model: type[M], **values: Any) -> M:
    """``model.objects.create(**values)`` without the ORM's query compiler, for the hot paths.

    The instance is built and prepared exactly as the ORM would (field
    defaults, ``pre_save`` such as ``auto_now``, each value converted by its
    own field: JSON encoded, datetimes adapted), then written by one INSERT
    whose ``RETURNING`` gives the new primary key (SQLite 3.35+ and
    PostgreSQL). Only the SQL building is skipped: about half a millisecond of
    Python per row. No ``pre_save``/``post_save`` signals are sent, so use it
    only for models without receivers (the hot paths' models have none).
    """
    instance = model(**values)
    fields, sql = _insert_returning(model, instance.pk is not None, connection.vendor)
    cursor.execute(
        sql,
        [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields],
    )
    instance.pk = cursor.fetchone()[0]
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


@contextmanager
def pipelined() -> Iterator[None]:
    """On PostgreSQL, send the block's statements without waiting for each one's answer.

    In psycopg's pipeline mode a statement whose result nobody reads (an
    INSERT without RETURNING, an UPDATE) is sent at once and the block goes
    on; the client waits only where a result is read (``fetchone``) and at
    the block's end, for every answer still owed. A text remember then waits
    for the server 9 times instead of 13, a recall (its reads included) 17
    times instead of 19; on one machine shared with the app each wait costs a
    wake-up of both sides (at 100k records in one scope, alternating with and
    without it in one process: remember's p50 1.1-2.0 ms lower, recall's
    0.4-1.4 ms).
    The server still runs the statements one after the other, in order, in
    the same transaction. On SQLite (in-process) it does nothing.

    Use it inside ``transaction.atomic()``, around a write path whose code:

    - never reads ``cursor.rowcount`` (psycopg reports -1 until the result
      has been read) and never uses the number an ORM ``update()`` or
      ``delete()`` returns;
    - never catches a database error to carry on: a failed statement's error
      is raised where the next result is read or at the block's end, and the
      statements after it in the pipeline are not run. Either way the error
      ends the transaction, which rolls back as it would have.

    Errors leave the block as Django's database exceptions (``IntegrityError``
    and so on), as they would from a cursor. Nested blocks join the outer one.
    """
    if connection.vendor != "postgresql":
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    if raw.pgconn.pipeline_status:  # already pipelined: the outer block syncs
        yield
        return
    with connection.wrap_database_errors, raw.pipeline():
        yield
