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
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection

from aetnaweb.text import unstorable_text_in
from audit.canonical import canonical_json, digest, loads_strict
from memory.errors import ExtractionError, InvalidInput
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
QUERY_FAMILIES = ("metadata.", "metadata[", "created_at.", "created_at[")
"""The query parameters a filter is spelled with (:func:`filter_from_query`)."""

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


# Filter operators. A key's filter is a JSON scalar (equality, as it always was)
# or an object of operators, ANDed; a metadata value is never an object, so
# the two cannot be confused.
EQUALITY_OPERATORS = ("$eq", "$ne", "$in")
RANGE_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
OPERATORS = (*EQUALITY_OPERATORS, *RANGE_OPERATORS)
MAX_IN_VALUES = 100
CREATED_AT = "$created_at"
"""The checked filter's key for the ``created_at`` range: ``$`` never starts a metadata key."""

Filter = dict[str, Any]
"""A checked filter: metadata key -> a scalar (equality) or {operator: operand}; and
optionally :data:`CREATED_AT` -> {range operator: ISO 8601 UTC timestamp}."""


def _operator_list() -> str:
    return ", ".join(OPERATORS[:-1]) + f" or {OPERATORS[-1]}"


def _range_operand(field: str, operand: Any) -> str | int | float:
    """A number, or an ISO 8601 date or timestamp (compared as text, so store one form)."""
    if isinstance(operand, (int, float)) and not isinstance(operand, bool):
        if isinstance(operand, float) and not math.isfinite(operand):
            raise MetadataError(f"{field}: NaN and Infinity are not JSON numbers", field=field)
        if isinstance(operand, int) and abs(operand) > MAX_SAFE_INTEGER:
            raise MetadataError(
                f"{field}: integers must lie within ±{MAX_SAFE_INTEGER} (2^53 - 1)", field=field
            )
        return operand
    if isinstance(operand, str) and _iso_moment(operand) is not None:
        return operand
    raise MetadataError(
        f"{field}: a range bound must be a number (42, 1.5) or an ISO 8601 date or "
        'timestamp as a string ("2026-01-31", "2026-01-31T09:00:00Z")',
        field=field,
    )


def _iso_moment(text: str) -> datetime | date | None:
    if len(text) > 40:
        return None
    try:
        return date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
    except ValueError:
        return None


def _check_operators(key: str, wanted: Mapping[Any, Any], what: str) -> dict[str, Any]:
    base = f"{what}.{key}"
    if not wanted:
        raise MetadataError(
            f"{base}: an operator object names at least one of {_operator_list()}", field=base
        )
    checked: dict[str, Any] = {}
    for operator, operand in wanted.items():
        field = f"{base}.{operator}" if isinstance(operator, str) else base
        if operator not in OPERATORS:
            shown = operator if isinstance(operator, str) else "?"
            if unstorable_text_in(shown) is not None:
                shown = "?"
            raise MetadataError(
                f"{base}: unknown filter operator {shown[:40]!r}; use {_operator_list()}",
                field=field,
            )
        if operator == "$in":
            if not isinstance(operand, list) or not 1 <= len(operand) <= MAX_IN_VALUES:
                raise MetadataError(
                    f"{field}: $in takes a list of 1 to {MAX_IN_VALUES} values", field=field
                )
            checked[operator] = [_check_value(key, item, f"{what}") for item in operand]
        elif operator in RANGE_OPERATORS:
            checked[operator] = _range_operand(field, operand)
        else:
            checked[operator] = _check_value(key, operand, what)
    kinds = {isinstance(operand, str) for op, operand in checked.items() if op in RANGE_OPERATORS}
    if len(kinds) > 1:
        raise MetadataError(
            f"{base}: the bounds of one range are all numbers or all dates", field=base
        )
    return dict(sorted(checked.items()))


def check_filter(value: Any, *, created_at: Any = None, what: str = "filters.metadata") -> Filter:
    """A record filter: each key holding exactly a typed value or meeting its operators
    (ANDed), and optionally a ``created_at`` range. :class:`MetadataError` names the
    place at fault (``filters.metadata.score.$gte``); a bad ``created_at`` bound is an
    :class:`~aetnaweb.errors.InvalidInput` naming ``filters.created_at.$gte``."""
    checked: Filter = {}
    if value is not None:
        if not isinstance(value, Mapping):
            raise MetadataError(
                'a metadata filter must be a JSON object, e.g. {"customer_id": 42}', field=what
            )
        if len([key for key in value if key != CREATED_AT]) > MAX_METADATA_FILTER_KEYS:
            raise MetadataError(
                f"a metadata filter may name at most {MAX_METADATA_FILTER_KEYS} keys", field=what
            )
        for key, item in value.items():
            if key == CREATED_AT:  # a filter checked before (checking is idempotent)
                created_at = item if created_at is None else created_at
                continue
            _check_key(key, what)
            if isinstance(item, Mapping):
                checked[key] = _check_operators(key, item, what)
            else:
                checked[key] = _check_value(key, item, what)
    if created_at is not None:
        checked[CREATED_AT] = check_created_at(created_at, what.rsplit(".", 1)[0] + ".created_at")
    return checked


def check_created_at(value: Any, field: str = "filters.created_at") -> dict[str, str]:
    """A ``created_at`` range: {"$gte": "2026-01-01T00:00:00Z", "$lt": ...} (a date alone
    means its midnight UTC); bounds become UTC ISO 8601 timestamps."""
    if not isinstance(value, Mapping) or not value:
        raise InvalidInput(
            f'{field} is an object of range bounds, e.g. {{"$gte": "2026-01-01T00:00:00Z"}}',
            field=field,
        )
    bounds: dict[str, str] = {}
    for operator, operand in value.items():
        at = f"{field}.{operator}" if isinstance(operator, str) else field
        if operator not in RANGE_OPERATORS:
            shown = (
                operator if isinstance(operator, str) and not unstorable_text_in(operator) else "?"
            )
            raise InvalidInput(
                f"{field}: unknown range operator {shown[:40]!r}; use $gt, $gte, $lt or $lte",
                field=at,
            )
        moment = _iso_moment(operand) if isinstance(operand, str) else None
        if isinstance(moment, datetime) and moment.tzinfo is None:
            moment = None
        if moment is None:
            raise InvalidInput(
                f"{at}: give an ISO 8601 timestamp with a time zone "
                '("2026-01-31T09:00:00Z") or a date ("2026-01-31")',
                field=at,
            )
        if not isinstance(moment, datetime):
            moment = datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
        bounds[operator] = moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return dict(sorted(bounds.items()))


_BRACKETED = re.compile(r"\[([^\[\]]*)\](?:\[([^\[\]]*)\])?")


def _query_name(name: str) -> tuple[str, str, str | None] | None:
    """``metadata.k``, ``metadata.k.$gte``, ``metadata[k]``, ``metadata[k][$gte]``,
    ``created_at.$gte``, ``created_at[$gte]`` -> (what, key, operator); else None."""
    for what in ("metadata", "created_at"):
        if name.startswith(f"{what}."):
            rest = name[len(what) + 1 :]
            if what == "created_at":
                return what, "", rest
            key, dollar, operator = rest.partition(".$")
            return what, key, f"${operator}" if dollar else None
        if name.startswith(f"{what}["):
            match = _BRACKETED.fullmatch(name[len(what) :])
            if match is None:
                return what, name[len(what) :], None  # refused below, named
            if what == "created_at":
                return what, "", match.group(1)
            return what, match.group(1), match.group(2)
    return None


def _query_value(field: str, raw: str, operator: str | None) -> Any:
    if operator == "$in" and raw.lstrip(" \t\r\n")[:1] == "[":
        try:
            return loads_strict(raw)
        except (ValueError, RecursionError):
            raise MetadataError(
                f'{field}: $in takes a JSON array of values, e.g. ["gold", "silver"]',
                field=field,
            ) from None
    if raw.lstrip(" \t\r\n")[:1] in ("[", "{"):
        # Refused unparsed: an array nested thousands deep would exhaust the
        # parser's recursion before any check could say "flat".
        raise MetadataError(
            f"{field}: metadata is flat: a filter value must be a string, a number, "
            "true, false or null, not an array or object",
            field=field,
        )
    try:
        return loads_strict(raw)
    except (ValueError, RecursionError):
        raise MetadataError(
            f"{field}: the value must be JSON: a number (42), true, false, null or a "
            'quoted string ("42")',
            field=field,
        ) from None


def filter_from_query(params: Iterable[tuple[str, str]]) -> Filter:
    """The record filter spelled in a query string (docs/agents.md, "Filters").

    ``metadata.<key>=<JSON scalar>`` asks for equality: ``metadata.customer_id=42``
    the number, ``metadata.customer_id="42"`` the string; a bare word is refused
    rather than guessed at. ``metadata.<key>.$<op>=<JSON>`` applies an operator
    ($ne, $in with a JSON array, $gt, $gte, $lt, $lte); ``created_at.$gte=<ISO
    8601>`` bounds the storage time. ``metadata[<key>]`` and ``metadata[<key>][$op]``
    (OpenAPI's deepObject spelling, what generated clients send) mean the same.
    The same key and operator given twice is refused.
    """
    wanted: dict[str, Any] = {}
    created_at: dict[str, Any] = {}
    for name, raw in params:
        parsed = _query_name(name)
        if parsed is None:
            continue
        what, key, operator = parsed
        if what == "created_at":
            field = f"created_at.{operator}" if unstorable_text_in(operator) is None else what
            if operator in created_at:
                raise InvalidInput(f"{field} is given twice; one value per bound", field=field)
            value = raw
            if raw.startswith('"'):
                try:
                    value = loads_strict(raw)
                except ValueError:
                    value = raw
            created_at[str(operator)] = value
            continue
        shown = key if unstorable_text_in(key) is None else ""
        field = f"metadata.{shown}" if shown else "metadata"
        if operator is not None:
            field = f"{field}.{operator}" if unstorable_text_in(operator) is None else field
        slot = wanted.get(key)
        if operator is None:
            if key in wanted:
                raise MetadataError(f"{field} is given twice; one value per key", field=field)
            wanted[key] = _query_value(field, raw, None)
            continue
        if slot is not None and not isinstance(slot, dict):
            raise MetadataError(
                f"{field}: metadata.{shown} is given as a value and with operators; use $eq "
                "beside the others",
                field=field,
            )
        slot = wanted.setdefault(key, {})
        if operator in slot:
            raise MetadataError(f"{field} is given twice; one value per operator", field=field)
        slot[operator] = _query_value(field, raw, operator)
    return check_filter(wanted, created_at=created_at or None, what="metadata")


def filter_from_json(raw: str, field: str = "filters") -> Filter:
    """``filters`` as one JSON text, the object recall takes in its body:
    ``{"metadata": {...}, "created_at": {...}}`` (for clients that cannot spell
    ``metadata.<key>`` parameters)."""
    try:
        value = loads_strict(raw)
    except (ValueError, RecursionError):
        raise InvalidInput(
            f'{field} must be a JSON object, e.g. {{"metadata": {{"customer_id": 42}}}}',
            field=field,
        ) from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    for name in value:
        if name not in ("metadata", "created_at"):
            shown = name if unstorable_text_in(name) is None else "?"
            raise InvalidInput(
                f"{field}: unknown field {shown[:80]!r}; use metadata and created_at",
                field=f"{field}.{shown[:80]}",
            )
    return check_filter(
        value.get("metadata"), created_at=value.get("created_at"), what=f"{field}.metadata"
    )


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

    ``wanted`` is a checked filter (:func:`check_filter`). ``record`` is an alias
    written by the caller (``r``), never user input. Empty ``wanted``: an
    always-true fragment, so callers need no branch. Every operator requires
    the key to be present; a numeric range matches number values only, a date
    range string values only (compared as text, byte by byte).
    """
    if not wanted:
        return "1 = 1", []
    parts: list[str] = []
    params: list[Any] = []
    for key, condition in wanted.items():
        if key == CREATED_AT:
            for operator, bound in condition.items():
                parts.append(f"{record}.created_at {RANGE_OPERATORS[operator]} %s")
                params.append(
                    connection.ops.adapt_datetimefield_value(datetime.fromisoformat(bound))
                )
            continue
        operators = condition if isinstance(condition, dict) else {"$eq": condition}
        if connection.vendor == "sqlite":
            part, part_params = _sqlite_key_condition(record, key, operators)
        else:
            part, part_params = _postgresql_key_condition(record, key, operators)
        parts.append(part)
        params.extend(part_params)
    return "(" + " AND ".join(parts) + ")", params


def _sqlite_key_condition(
    record: str, key: str, operators: Mapping[str, Any]
) -> tuple[str, list[Any]]:
    # One indexed lookup per key (the side table's (key, value_json) index);
    # the ANDed IN lists intersect.
    tests: list[str] = []
    params: list[Any] = [key]
    for operator, operand in operators.items():
        if operator == "$eq":
            tests.append("value_json = %s")
            params.append(value_json(operand))
        elif operator == "$ne":
            tests.append("value_json <> %s")
            params.append(value_json(operand))
        elif operator == "$in":
            tests.append(f"value_json IN ({', '.join(['%s'] * len(operand))})")
            params.extend(value_json(item) for item in operand)
        else:
            kind = "= 'text'" if isinstance(operand, str) else "IN ('integer', 'real')"
            tests.append(
                f"json_type(value_json) {kind} AND "
                f"json_extract(value_json, '$') {RANGE_OPERATORS[operator]} %s"
            )
            params.append(operand)
    sql = (
        f"({record}.id, {record}.record_id) IN (SELECT record_pk, record_id "  # noqa: S608  (alias and table are constants)
        f"FROM {SIDE_TABLE} WHERE key = %s AND {' AND '.join(tests)})"
    )
    return sql, params


def _postgresql_key_condition(
    record: str, key: str, operators: Mapping[str, Any]
) -> tuple[str, list[Any]]:
    # Equality and $in are containment on the jsonb column (its GIN
    # jsonb_path_ops index answers them; typed: 42 and "42" differ). A range
    # reads the value through CASE, so a value of the other type is never cast.
    tests: list[str] = []
    params: list[Any] = []
    for operator, operand in operators.items():
        if operator == "$eq":
            tests.append(f"{record}.metadata @> %s::jsonb")
            params.append(canonical_json({key: operand}))
        elif operator == "$ne":
            tests.append(
                f"jsonb_exists({record}.metadata, %s) AND NOT {record}.metadata @> %s::jsonb"
            )
            params.extend([key, canonical_json({key: operand})])
        elif operator == "$in":
            tests.append(
                "(" + " OR ".join([f"{record}.metadata @> %s::jsonb"] * len(operand)) + ")"
            )
            params.extend(canonical_json({key: item}) for item in operand)
        elif isinstance(operand, str):
            tests.append(
                f"(CASE WHEN jsonb_typeof({record}.metadata -> %s) = 'string' "
                f'THEN {record}.metadata ->> %s END) COLLATE "C" '
                f"{RANGE_OPERATORS[operator]} %s"
            )
            params.extend([key, key, operand])
        else:
            tests.append(
                f"(CASE WHEN jsonb_typeof({record}.metadata -> %s) = 'number' "
                f"THEN ({record}.metadata ->> %s)::numeric END) "
                f"{RANGE_OPERATORS[operator]} %s::numeric"
            )
            params.extend([key, key, str(operand)])
    return "(" + " AND ".join(tests) + ")", params
