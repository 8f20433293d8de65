"""Canonical JSON and digests (audit-log-v1 "Canonical JSON and digests", C-1).

Keys sorted, separators ``,`` and ``:``, non-ASCII escaped (``ensure_ascii``),
UTF-8 encoded; a digest is the lowercase hex SHA-256 of those bytes. Every
hashed structure in aetnaweb goes through these two functions.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NoReturn

from aetnaweb.errors import DomainError


class CanonicalJSONError(DomainError, ValueError):
    """A value that cannot be hashed reproducibly (NaN, a non-JSON type, a lossy float)."""

    code = "invalid_canonical_json"
    status = 400
    meaning = "a value has no canonical JSON form (e.g. a float or a non-string key)"


def canonical_json(value: Any) -> str:
    """Serialize ``value`` exactly as the evidence format requires."""
    try:
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise CanonicalJSONError(f"value is not canonical-JSON serializable: {exc}") from exc
    return text


def reject_json_constant(name: str) -> NoReturn:
    """``parse_constant`` for ``json.loads``: NaN and Infinity have no canonical form."""
    raise ValueError(f"{name} is not JSON")


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` refusing NaN, Infinity and -Infinity (a ``ValueError``, like any bad JSON)."""
    return json.loads(text, parse_constant=reject_json_constant)


def canonical_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8")


def digest(value: Any) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def sha256_text(text: str) -> str:
    """Lowercase hex SHA-256 of a UTF-8 string (for ``message_sha256`` and friends)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_round_trip(value: Any) -> str:
    """The canonical JSON of ``value``, refused if it would not parse back to an equal value.

    Floats must survive a JSON round trip unchanged (audit-log-v1); this also
    catches tuples, non-string keys and other things json silently converts.
    """
    text = canonical_json(value)
    if json.loads(text) != value:
        raise CanonicalJSONError("value does not survive a JSON round trip unchanged")
    return text
