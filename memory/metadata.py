"""Record metadata: caller-supplied flat JSON key/values, checked, stored, indexed, filtered.

A record's ``metadata`` is a flat JSON object (``{"customer_id": 42,
"channel": "email"}``): keys are short lower-case names, values are JSON
scalars (string, number, true/false, null). Flat on purpose: a filter is
equality on one key's typed value, and both databases index exactly that.

Where it is indexed:

- PostgreSQL: the ``jsonb`` column itself, with a GIN ``jsonb_path_ops``
  index; a filter is ``metadata @> '{"customer_id": 42}'``, which that index
  answers and which compares typed JSON (42 and "42" differ).
- SQLite: JSON1 has no containment index, and an expression index on
  ``json_extract`` serves one fixed key only, so every key/value pair is
  also a row of the side table ``memory_record_meta(record_pk, record_id,
  key, value_json)`` with an index on ``(key, value_json, record_pk, record_id)``. The
  services write those rows in the same transaction as the record
  (:func:`index_record`) and delete them when the record is forgotten
  (:func:`purge`). ``value_json`` is the value's JSON text, so a string
  ``"42"`` (stored as ``"42"`` with quotes) never equals the number ``42``.

Filters run inside the candidate queries (:func:`sql_condition`), never on
their output, so a filter cannot starve recall's top-k.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection

from aetnaweb.text import unstorable_text_in
from audit.canonical import canonical_json, digest, loads_strict
from memory.errors import ExtractionError
from memory.limits import (
    MAX_METADATA_BYTES,
    MAX_METADATA_FILTER_KEYS,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
)

SIDE_TABLE = "memory_record_meta"
KEY_PATTERN = re.compile(rf"[a-z0-9_][a-z0-9_.-]{{0,{MAX_METADATA_KEY_CHARS - 1}}}")
# Integers beyond this lose precision in JavaScript and in float-backed JSON
# parsers: a value one client stores must read back the same in every other.
MAX_SAFE_INTEGER = 2**53 - 1
QUERY_PREFIX = "metadata."

Metadata = dict[str, str | int | float | bool | None]


class MetadataError(ExtractionError):
    """Metadata (or a metadata filter) that is not a bounded flat JSON object.

    ``field`` names the offending place (``metadata.customer_id``), so an API
    answer can point at it.
    """

    code = "metadata_error"
    status = 400
    meaning = "metadata or a metadata filter is refused (field names the key)"

    def __init__(self, message: str, field: str = "metadata") -> None:
        super().__init__(message, field=field)


def _check_key(key: Any, what: str) -> str:
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        shown = key if isinstance(key, str) and unstorable_text_in(key) is None else "?"
        raise MetadataError(
            f"{what} key {shown[:80]!r} is not a metadata key: use 1 to "
            f"{MAX_METADATA_KEY_CHARS} characters of a-z, 0-9, '_', '.' or '-', "
            "starting with a letter, digit or '_'",
            field=what,
        )
    return key


def _check_value(key: str, value: Any, what: str) -> str | int | float | bool | None:
    field = f"{what}.{key}"
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise MetadataError(
                f"{field}: integers must lie within ±{MAX_SAFE_INTEGER} (2^53 - 1); "
                "send a larger one as a string",
                field=field,
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MetadataError(f"{field}: NaN and Infinity are not JSON numbers", field=field)
        return value
    if isinstance(value, str):
        bad = unstorable_text_in(value)
        if bad is not None:
            raise MetadataError(f"{field}: {bad[1]}", field=field)
        return value
    raise MetadataError(
        f"{field}: metadata is flat: a value must be a string, a number, true, false or "
        f"null, not {type(value).__name__}",
        field=field,
    )


def check_metadata(value: Any) -> Metadata:
    """A copy of ``value`` if it is valid record metadata, else :class:`MetadataError`.

    ``None`` means no metadata (``{}``). Limits: memory/limits.py.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MetadataError("metadata must be a JSON object of key/value pairs")
    if len(value) > MAX_METADATA_KEYS:
        raise MetadataError(f"metadata may hold at most {MAX_METADATA_KEYS} keys")
    checked: Metadata = {}
    for key, item in value.items():
        checked[_check_key(key, "metadata")] = _check_value(key, item, "metadata")
    size = len(canonical_json(checked).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise MetadataError(
            f"metadata is {size} bytes as canonical JSON; at most {MAX_METADATA_BYTES} are kept"
        )
    return checked


def metadata_digest(metadata: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON: what the audit chain keeps (never the values)."""
    return digest(dict(metadata))


def check_filter(value: Any) -> Metadata:
    """A metadata filter: keys that must all hold exactly these typed values (ANDed)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MetadataError(
            'a metadata filter must be a JSON object, e.g. {"customer_id": 42}',
            field="filters.metadata",
        )
    if len(value) > MAX_METADATA_FILTER_KEYS:
        raise MetadataError(
            f"a metadata filter may name at most {MAX_METADATA_FILTER_KEYS} keys",
            field="filters.metadata",
        )
    return {
        _check_key(key, "filters.metadata"): _check_value(key, item, "filters.metadata")
        for key, item in value.items()
    }


def filter_from_query(params: Iterable[tuple[str, str]]) -> Metadata:
    """The metadata filter spelled in a query string: ``metadata.<key>=<JSON scalar>``.

    The value is JSON, so ``metadata.customer_id=42`` asks for the number and
    ``metadata.customer_id="42"`` for the string. A bare word is refused
    rather than guessed at. A key given twice is refused (equality on one
    value per key).
    """
    wanted: dict[str, Any] = {}
    for name, raw in params:
        if not name.startswith(QUERY_PREFIX):
            continue
        key = name[len(QUERY_PREFIX) :]
        field = f"metadata.{key}" if unstorable_text_in(key) is None else "metadata"
        if key in wanted:
            raise MetadataError(f"{field} is given twice; one value per key", field=field)
        if raw.lstrip(" \t\r\n")[:1] in ("[", "{"):
            # Refused unparsed: an array nested thousands deep would exhaust the
            # parser's recursion before any check could say "flat".
            raise MetadataError(
                f"{field}: metadata is flat: a filter value must be a string, a number, "
                "true, false or null, not an array or object",
                field=f"filters.{field}",
            )
        try:
            wanted[key] = loads_strict(raw)
        except (ValueError, RecursionError):
            raise MetadataError(
                f"{field}: the value must be JSON: a number (42), true, false, null or a "
                'quoted string ("42")',
                field=field,
            ) from None
    return check_filter(wanted)


def value_json(value: Any) -> str:
    """The side table's form of one value: its JSON text, with integral floats as integers.

    PostgreSQL's jsonb compares numbers by value (42 = 42.0); writing 42.0 as
    ``42`` makes SQLite agree.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        value = int(value)
    return canonical_json(value)


# -- the SQLite side table, kept in step by the services -------------------------


def index_record(pk: int, record_id: str, metadata: Mapping[str, Any]) -> None:
    """Write a new record's key/value rows (SQLite; PostgreSQL indexes the column itself)."""
    if connection.vendor != "sqlite" or not metadata:
        return
    with connection.cursor() as cursor:
        # REPLACE: a row left under the same primary key (a test database
        # flushed around this unmanaged table) is overwritten, never kept; a
        # stale row under another key names another record_id, and filters
        # match on (record_pk, record_id), so it can never lend metadata.
        cursor.executemany(
            f"INSERT OR REPLACE INTO {SIDE_TABLE} (record_pk, record_id, key, value_json) "  # noqa: S608  (constant table)
            "VALUES (%s, %s, %s, %s)",
            [(pk, record_id, key, value_json(value)) for key, value in metadata.items()],
        )


def purge(pks: Sequence[int]) -> None:
    """Drop the side table rows of forgotten records (their column is emptied by the caller)."""
    if connection.vendor != "sqlite" or not pks:
        return
    marks = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {SIDE_TABLE} WHERE record_pk IN ({marks})",  # noqa: S608  (placeholders only)
            list(pks),
        )


def sql_condition(record: str, wanted: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """A WHERE fragment keeping rows of the record table aliased ``record`` that match ``wanted``.

    ``record`` is an alias written by the caller (``r``), never user input.
    Empty ``wanted``: an always-true fragment, so callers need no branch.
    """
    if not wanted:
        return "1 = 1", []
    if connection.vendor == "sqlite":
        # One indexed lookup per key; the ANDed IN lists intersect.
        parts = [
            f"({record}.id, {record}.record_id) IN (SELECT record_pk, record_id "  # noqa: S608  (alias and table are constants)
            f"FROM {SIDE_TABLE} WHERE key = %s AND value_json = %s)"
            for _ in wanted
        ]
        params: list[Any] = []
        for key, value in wanted.items():
            params.extend([key, value_json(value)])
        return "(" + " AND ".join(parts) + ")", params
    # PostgreSQL: containment on the jsonb column (GIN jsonb_path_ops); typed.
    return f"{record}.metadata @> %s::jsonb", [canonical_json(dict(wanted))]
