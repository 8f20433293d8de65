#!/usr/bin/env python3
"""Independent verifier for aetnaweb evidence (audit-log-v1), standard library only.

Usage::

    python tools/verify_audit.py DB.sqlite3 [--subject S] [--checkpoints FILE [--public-key KEY]]
        [--receipt FILE ...]
    python tools/verify_audit.py --export EXPORT.jsonl [same options]
    python tools/verify_audit.py --offline-receipt RECEIPT.json --public-key KEY
    python tools/verify_audit.py --erasure-certificate CERTIFICATE.json --public-key KEY
    python tools/verify_audit.py --forget-bundle BUNDLE.json --public-key KEY
    python tools/verify_audit.py --subject-export EXPORT.zip --public-key KEY   (or its
        export.json alone)
    python tools/verify_audit.py --consistency BUNDLE.json --public-key KEY   (from the API,
        the checkpoints page or audit prove-consistency --json)

Opens the SQLite database read-only (or loads a ``manage.py audit export``
file, one row per line, into a private in-memory database: the way to check a
PostgreSQL deployment), checks the chain rule for every subject
(or only ``--subject``), the containment rule for every line of each
checkpoint file, and the receipt rule for each deletion receipt. Prints
``OK <subject>`` or ``FAIL <subject>`` followed by indented reasons, then the
same for each checkpoint line and receipt. Exit status: 0 when everything
verified, 1 when anything failed, 2 for a usage error (bad arguments, a file
that cannot be read, a database without ``audit_log``), 3 offline when the
proofs hold but no ``--public-key`` was given, so nothing proves who made the
artefacts (``--no-signature-check`` accepts that and exits 0 instead).

Offline, with ``--public-key``, exit 0 means every checkpoint the artefacts
rely on is present and signed by that key: a receipt whose ``log_proof`` has
no checkpoint, a bundle with an unsigned or mixed head, or a signature that
cannot be checked (no ``cryptography`` package) is a failure. A receipt holds
only when each of its fields agrees with the audit event it names (its
subject, its time, its selector digest and purged IDs, or for an action
receipt its transaction, plan hash, state and operations) and it holds no
other field: editing ``created_at`` or adding a ``note`` and recomputing
``receipt_sha256`` fails.

This file imports nothing from aetnaweb, so an auditor can read all of it and
trust none of the application. Sibling tools may import it
(``import verify_audit``); these functions are its interface:

``canonical_json(value) -> str``
    Keys sorted, separators ``,``/``:``, non-ASCII escaped, NaN refused.
``digest(value) -> str``
    Lowercase hex SHA-256 of ``canonical_json(value)`` as UTF-8.
``open_readonly(path) -> sqlite3.Connection``
    The database opened with ``mode=ro``; raises ``UsageError``.
``load_export(path) -> sqlite3.Connection``
    An in-memory ``audit_log`` filled from an export file; raises ``UsageError``.
``verify_chain(conn, subject) -> list[str]``
    Failure strings for one subject's chain (empty: the chain holds).
    Where the database holds ``memory_record``, each record and episode of
    the subject must also agree with what its chain bound and its chain's
    events leave it (``content_failures``): content, metadata, fact key and
    message digests (salted with the row's ``digest_salt`` since
    ``salted-v1``), status and trust tier, supersession links, ``created_at``
    and ``evidence`` (where the creation event commits them), and a purge
    kept purged.
``verify_all_chains(conn) -> list[ChainResult]``
    Every chain in one pass over ``audit_log``, subjects in first-seen order.
``verify_checkpoint(conn, document, key=None) -> list[str]``
    Digest, then containment, for one parsed checkpoint document; with a
    key (``parse_verifier_key``), also its log head's signature by that key.
``parse_checkpoint_line(line) -> dict``
    One JSON Lines entry as a v1 document; raises ``ValueError`` with a reason.
``verify_receipt(conn, receipt) -> list[str]``
    The receipt rule for one parsed deletion receipt; where the database
    holds the memory tables (``memory_record``, ``memory_episode``), also
    that each named record is tombstoned and each episode purged.
``verify_event_hash(row) -> str``
    Recompute one row's hash (``row`` in ``EVENT_COLUMNS`` order, without
    ``sequence``); raises ``ValueError`` with the reason when impossible.

The Merkle log (docs/auditors.md): a checkpoint line with a ``log`` head is
also checked by recomputing the RFC 6962 root of the first ``tree_size``
events (sequence order) from ``audit_log``; a receipt's ``log_proof`` is
checked by its inclusion proof. ``--offline-receipt`` and ``--consistency``
need no database. Ed25519 signatures on checkpoint notes are checked with the
``cryptography`` package when ``--public-key`` is given; without the package
that is a failure (the signature cannot be checked), never a pass.

Failure strings are worded exactly as the application's own verifier words
them, so the two can be compared line by line.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import json.encoder
import os
import re
import sqlite3
import sys
import urllib.parse
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

CHECKPOINT_FORMAT = "aetnamem-checkpoint-v1"
DELETION_RECEIPT_FORMAT = "aetnamem-deletion-receipt-v1"
MAX_REASONS = 20

EVENT_COLUMNS = (
    "sequence",
    "event_id",
    "subject_id",
    "event_type",
    "created_at",
    "actor",
    "session_id",
    "turn_id",
    "record_id",
    "payload",
    "prev_hash",
    "event_hash",
)
_SELECT = "SELECT " + ", ".join(EVENT_COLUMNS) + " FROM audit_log"

BAD_SUBJECT = "subject is not a canonical scope string"
BAD_HASH = "event_hash does not recompute from the event's preimage"
BROKEN_LINK = "prev_hash does not match the previous event's event_hash"
FIRST_HAS_PREV = "first event of the chain has a non-null prev_hash"
PAYLOAD_NOT_JSON = "payload is not JSON"
PAYLOAD_NOT_OBJECT = "payload is not a JSON object"
PAYLOAD_NOT_FINITE = "payload holds a number that is not finite"
NOT_TEXT = "a hashed column holds a value that is not text"


class UsageError(Exception):
    """Bad arguments or unreadable input: exit status 2."""


# -- canonical JSON ------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def canonical_json(value: Any) -> str:
    """The evidence format's canonical JSON (raises ``ValueError`` for NaN/Infinity)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


_quote = json.encoder.encode_basestring_ascii
# scan_once is set on each decoder at run time (typeshed does not declare it).
_decoder: Any = json.JSONDecoder(parse_constant=_reject_constant)
_scan_once = _decoder.scan_once


def _no_default(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _payload_encoder() -> Callable[[Any, int], tuple[str, ...]]:
    """Canonical JSON of a parsed payload as a 1-tuple, the encoder built once.

    json.dumps builds an encoder per call; building the C encoder once is
    what makes hundreds of thousands of events a second possible. It is used
    only if it answers this probe exactly as json.dumps would.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            c_encode = make(None, _no_default, _quote, None, ":", ",", True, False, False)
            probe = c_encode({"b": [1, {"d": None, "c": "\u00e9"}], "a": 1.5}, 0)
        except TypeError:
            c_encode, probe = None, None
        if isinstance(probe, tuple) and probe == ('{"a":1.5,"b":[1,{"c":"\\u00e9","d":null}]}',):
            return c_encode
    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
    return lambda value, _level: (encoder.encode(value),)


_encode_payload = _payload_encoder()


# A payload text that is already canonical JSON, recognized without parsing it:
# a flat object of at most 16 keys in strictly ascending order, whose strings
# (keys and values) hold only printable ASCII other than '"' and '\' (which
# ensure_ascii writes as they are), and whose other values are true, false,
# null or an integer of at most 16 digits in canonical form (no "-0", no
# leading zero). For such a text the canonical JSON of its parse is the text
# itself, so parsing and re-encoding it (most of the cost of a row) can be
# skipped. Anything else, including every malformed payload, takes the
# parse-and-encode path, which alone decides failures.
try:  # possessive quantifiers (Python 3.11+) only make the match faster
    _ONCE = "+" if re.compile("a*+") else ""
except re.error:
    _ONCE = ""
_PLAIN = rf"[ !#-\[\]-~]*{_ONCE}"
_SCALAR = rf'(?:"{_PLAIN}"|0|-?[1-9][0-9]{{0,15}}{_ONCE}|true|false|null)'
_FLAT_MAX_KEYS = 16
_ORDERED_KEY_SETS = 4096  # distinct ascending key sets remembered per walk


def _flat_object_pattern(max_keys: int) -> re.Pattern[str]:
    # Nested optional groups, so that the keys present are always a prefix of
    # the capture groups and a comma always separates two pairs.
    pairs = ""
    for position in range(max_keys, 0, -1):
        comma = "," if position > 1 else ""
        rest = f"(?:{pairs})?" if pairs else ""
        pairs = f'{comma}"({_PLAIN})":{_SCALAR}{rest}'
    return re.compile(rf"\{{(?:{pairs})?\}}")


_flat_canonical = _flat_object_pattern(_FLAT_MAX_KEYS).fullmatch


def _is_flat_canonical(text: str) -> bool:
    """True only when ``text`` is a flat payload already in canonical form (see above).

    The chain walk inlines this same test (a call per row is measurable).
    """
    match = _flat_canonical(text)
    if match is None:
        return False
    groups = match.groups()
    keys = groups[: len(groups) - groups.count(None)]
    return keys == tuple(sorted(set(keys)))


def _canonical_payload(text: Any) -> str:
    if not isinstance(text, str):
        raise ValueError(PAYLOAD_NOT_JSON)
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise ValueError(PAYLOAD_NOT_JSON) from exc
    if type(value) is not dict:
        raise ValueError(PAYLOAD_NOT_OBJECT)
    try:
        return _encode_payload(value, 0)[0]
    except ValueError as exc:
        raise ValueError(PAYLOAD_NOT_FINITE) from exc


PREIMAGE_KEYS = EVENT_COLUMNS[1:-1]  # event_id ... prev_hash: everything but sequence and the hash


def verify_event_hash(row: Sequence[Any]) -> str:
    """The recomputed ``event_hash`` of a row given in ``EVENT_COLUMNS[1:]`` order.

    The plain reading of audit-log-v1, for single events (receipts); the chain
    walk below computes the same bytes faster. Raises ``ValueError`` with the
    reason when the row cannot be hashed.
    """
    preimage = dict(zip(PREIMAGE_KEYS, row, strict=False))
    preimage["payload"] = json.loads(_canonical_payload(preimage["payload"]))
    try:
        return digest(preimage)
    except TypeError as exc:
        raise ValueError(NOT_TEXT) from exc


# -- scopes ---------------------------------------------------------------------------

_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,64}", re.ASCII)


def is_canonical_subject(subject: Any) -> bool:
    """``tenant:user:project`` exactly as docs/spec/scopes.md allows it."""
    if not isinstance(subject, str):
        return False
    parts = subject.split(":")
    if len(parts) != 3:
        return False
    if not all(part == "*" or _SEGMENT.fullmatch(part) for part in parts):
        return False
    tenant, user, project = parts
    if tenant == "*" or (user == "*" and project != "*"):
        return False
    return not (tenant == "platform" and (user, project) != ("*", "*"))


# -- chains ---------------------------------------------------------------------------


@dataclass
class ChainResult:
    subject_id: str
    events_checked: int = 0
    first_bad_sequence: int | None = None
    reasons: list[str] = field(default_factory=list)
    problem_count: int = 0

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def fail(self, sequence: int | None, reason: str) -> None:
        self.problem_count += 1
        if sequence is not None and (
            self.first_bad_sequence is None or sequence < self.first_bad_sequence
        ):
            self.first_bad_sequence = sequence
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append(reason if sequence is None else f"sequence {sequence}: {reason}")

    def failure_lines(self) -> list[str]:
        lines = list(self.reasons)
        if self.problem_count > len(self.reasons):
            lines.append(f"... and {self.problem_count - len(self.reasons)} more problems")
        return lines


def _payload_reader() -> Callable[[Any], str]:
    """A function: a stored payload's canonical text, or ``ValueError`` naming the problem.

    Most payloads are stored flat and canonical: recognized
    (``_is_flat_canonical``), not parsed, and hashed as stored. Payloads
    repeat few key sets: one already seen in ascending order is a set lookup,
    not a sort (the set is capped: constant memory, one per walk). Any other
    payload is scanned and re-encoded; what that path cannot take goes to
    ``_canonical_payload``, which names the problem.
    """
    ordered: set[tuple[str | None, ...]] = set()
    flat, scan, encode = _flat_canonical, _scan_once, _encode_payload

    def canonical(payload_text: Any) -> str:
        if type(payload_text) is str:
            match = flat(payload_text)
            if match is not None:
                groups = match.groups()
                if groups in ordered:
                    return payload_text
                keys = groups[: len(groups) - groups.count(None)]
                if keys == tuple(sorted(set(keys))):
                    if len(ordered) < _ORDERED_KEY_SETS:
                        ordered.add(groups)
                    return payload_text
        try:
            value, end = scan(payload_text, 0)
            if end != len(payload_text) or type(value) is not dict:
                raise ValueError
            return str(encode(value, 0)[0])
        except (StopIteration, ValueError, TypeError):
            return _canonical_payload(payload_text)

    return canonical


def _open_chain(subject_id: Any, sequence: Any) -> list[Any]:
    """A new chain's state: [last event_hash, events seen, result]."""
    name = subject_id if isinstance(subject_id, str) else repr(subject_id)
    state: list[Any] = [None, 0, ChainResult(subject_id=name)]
    if not is_canonical_subject(subject_id):
        state[2].fail(sequence, BAD_SUBJECT)
    return state


def _walk(rows: Iterable[Sequence[Any]]) -> list[ChainResult]:
    """The chain rule over rows in ascending sequence, any number of subjects.

    Written flat because it is the whole cost: local names, one f-string per
    preimage (byte for byte ``canonical_json`` of the preimage dict, as
    ``verify_event_hash`` computes it), one Python call per row (the
    payload's canonical text, ``_payload_reader``), C calls otherwise.
    """
    q = _quote
    sha256 = hashlib.sha256
    canonical = _payload_reader()
    states: dict[Any, list[Any]] = {}
    for row in rows:
        (
            sequence,
            event_id,
            subject_id,
            event_type,
            created_at,
            actor,
            session_id,
            turn_id,
            record_id,
            payload_text,
            prev_hash,
            event_hash,
        ) = row
        state = states.get(subject_id)
        if state is None:
            state = states[subject_id] = _open_chain(subject_id, sequence)
        try:
            payload = canonical(payload_text)
            preimage = (
                f'{{"actor":{q(actor)},"created_at":{q(created_at)},'
                f'"event_id":{q(event_id)},"event_type":{q(event_type)},'
                f'"payload":{payload},'
                f'"prev_hash":{"null" if prev_hash is None else q(prev_hash)},'
                f'"record_id":{"null" if record_id is None else q(record_id)},'
                f'"session_id":{"null" if session_id is None else q(session_id)},'
                f'"subject_id":{q(subject_id)},'
                f'"turn_id":{"null" if turn_id is None else q(turn_id)}}}'
            )
        except TypeError:  # a column holding a number or bytes instead of text
            state[2].fail(sequence, NOT_TEXT)
        except ValueError as exc:  # the payload, worded by _canonical_payload
            state[2].fail(sequence, str(exc))
        else:
            if sha256(preimage.encode()).hexdigest() != event_hash:
                state[2].fail(sequence, BAD_HASH)
        # The first event must have a null prev_hash, the state's starting value.
        if prev_hash != state[0]:
            state[2].fail(sequence, FIRST_HAS_PREV if state[1] == 0 else BROKEN_LINK)
        state[0] = event_hash
        state[1] += 1
    results = []
    for _, seen, result in states.values():
        result.events_checked = seen
        results.append(result)
    return results


def _rows(cursor: sqlite3.Cursor, batch: int = 10_000) -> Iterable[Sequence[Any]]:
    while True:
        chunk = cursor.fetchmany(batch)
        if not chunk:
            return
        yield from chunk


# -- record content ---------------------------------------------------------------------

# What the chain binds about each record and episode (docs/auditors.md,
# "Salted digests"), checked independently of the application's own copy
# (memory/binding.py) and worded the same. A creation event commits the
# record's content, fact key and metadata digests; payloads marked
# ``"digests": "salted-v1"`` hold HMAC-SHA256 digests keyed by the row's
# ``digest_salt`` (cleared by the purge, after which nothing can reproduce
# them), older ones plain SHA-256 and a plain ``fact_key``. Status and trust
# tier follow from the scope's later events (promotions, supersessions,
# consolidations, purges); a record the chain purged must stay purged. Its
# supersession links follow from the same events (a newer record points at
# the last one it superseded, each superseded one at its successor); a
# creation event with ``record_created_at`` also commits the row's
# ``created_at`` and its ``evidence`` (absent: an empty list).
SALTED = "salted-v1"
CREATION_EVENTS = ("memory.record_created", "memory.record_quarantined")
PURGE_EVENTS = ("memory.forget", "memory.record_rejected")
INGEST_EVENT = "episode.ingested"
STATE_EVENTS = (
    *CREATION_EVENTS,
    "memory.record_promoted",
    "memory.record_corrected",
    "memory.consolidated",
    *PURGE_EVENTS,
    INGEST_EVENT,
)
_CHUNK = 5000


# The payload fields a judgement reads; the rest is dropped while replaying.
_BOUND_FIELDS = frozenset(
    {
        "digests",
        "content_sha256",
        "metadata_sha256",
        "message_sha256",
        "fact_key_sha256",
        "fact_key",
        "source_type",
        "episode_id",
        "kind",
        "confidence",
        "record_created_at",
        "evidence",
        # the creation event's own session_id and turn_id columns, added when read back
        "@session_id",
        "@turn_id",
    }
)


@dataclass(slots=True)
class _RecordView:
    subject_id: str
    sequence: int
    event_type: str
    status: str
    trust_tier: str
    purged_by: tuple[str, int] | None = None
    # The creation event's bound fields, read back by sequence just before judging:
    # the replay keeps one small view per record, never its payload.
    payload: dict[str, Any] | None = None
    supersedes: str | None = None
    superseded_by: str | None = None


@dataclass(slots=True)
class _EpisodeView:
    subject_id: str
    sequence: int
    purged_by: tuple[str, int] | None = None
    payload: dict[str, Any] | None = None


def _interned(value: Any) -> Any:
    """One shared copy of a string repeated across views (scopes, statuses); else as is."""
    return sys.intern(value) if type(value) is str else value


def _object(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _replay(
    conn: sqlite3.Connection, subject: str | None
) -> tuple[dict[str, _RecordView], dict[str, _EpisodeView]]:
    """Each record's and episode's state as the chain's events leave it."""
    records: dict[str, _RecordView] = {}
    episodes: dict[str, _EpisodeView] = {}
    marks = ", ".join("?" * len(STATE_EVENTS))
    sql = (
        "SELECT sequence, subject_id, event_type, record_id, payload FROM audit_log "
        f"WHERE event_type IN ({marks})"
        + ("" if subject is None else " AND subject_id = ?")
        + " ORDER BY sequence"
    )
    params = (*STATE_EVENTS, *(() if subject is None else (subject,)))

    def supersede(subject_id: str, payload: dict[str, Any], by: Any) -> list[str]:
        superseded = _strings(payload.get("superseded_ids"))
        for record_id in superseded:
            view = records.get(record_id)
            if view is None or view.subject_id != subject_id:
                continue
            if isinstance(by, str):
                view.superseded_by = by
            if view.purged_by is None:
                view.status = "superseded"
        return superseded

    def link(subject_id: str, newer: Any, superseded: list[str]) -> None:
        view = records.get(newer) if isinstance(newer, str) else None
        if view is not None and view.subject_id == subject_id and superseded:
            view.supersedes = superseded[-1]

    for sequence, subject_id, event_type, record_id, text in _rows(conn.execute(sql, params)):
        payload = _object(text)
        view = records.get(record_id) if isinstance(record_id, str) else None
        if event_type in CREATION_EVENTS and isinstance(record_id, str):
            if view is None:
                records[record_id] = _RecordView(
                    _interned(subject_id),
                    sequence,
                    event_type,
                    _interned(str(payload.get("status", ""))),
                    _interned(str(payload.get("trust_tier", ""))),
                )
                link(subject_id, record_id, supersede(subject_id, payload, record_id))
            else:
                supersede(subject_id, payload, record_id)
        elif event_type == "memory.record_promoted":
            if view is not None and view.subject_id == subject_id and view.purged_by is None:
                view.status, view.trust_tier = "active", "user_confirmed"
            link(subject_id, record_id, supersede(subject_id, payload, record_id))
        elif event_type == "memory.record_corrected":
            newer = payload.get("corrected_by")
            supersede(subject_id, payload, newer)
            if isinstance(record_id, str):
                link(subject_id, newer, [record_id])
        elif event_type == "memory.consolidated":
            groups = payload.get("duplicates", []), payload.get("fact_keys", [])
            for group in [g for listed in groups if isinstance(listed, list) for g in listed]:
                if isinstance(group, dict):
                    kept = group.get("kept")
                    superseded = supersede(subject_id, group, kept)
                    keeper = records.get(kept) if isinstance(kept, str) else None
                    if keeper is not None and keeper.supersedes is None:
                        link(subject_id, kept, superseded)
        elif event_type in PURGE_EVENTS:
            for purged in _strings(payload.get("purged_record_ids")):
                target = records.get(purged)
                if target is not None and target.subject_id == subject_id and not target.purged_by:
                    target.status, target.purged_by = "tombstoned", (event_type, sequence)
            for purged in _strings(payload.get("purged_episode_ids")):
                episode = episodes.get(purged)
                if episode is not None and episode.subject_id == subject_id:
                    episode.purged_by = episode.purged_by or (event_type, sequence)
        elif event_type == INGEST_EVENT:
            ingested = payload.get("episode_id")
            if isinstance(ingested, str) and ingested not in episodes:
                episodes[ingested] = _EpisodeView(_interned(subject_id), sequence)
    return records, episodes


def _bound_digest(payload: dict[str, Any], salt: Any, text: Any) -> str | None:
    """The digest of ``text`` as this payload committed it; None when it cannot be made."""
    try:
        data = str(text).encode("utf-8")
        if payload.get("digests") == SALTED:
            if not salt:
                return None
            return hmac.new(bytes.fromhex(str(salt)), data, hashlib.sha256).hexdigest()
        return hashlib.sha256(data).hexdigest()
    except (UnicodeEncodeError, ValueError):
        return None


def _metadata(value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {"": value}
    return parsed if isinstance(parsed, dict) else {"": parsed}


def _purged_record_reasons(
    row: dict[str, Any], view: _RecordView, marker: bool | None
) -> list[str]:
    assert view.purged_by is not None
    event_type, sequence = view.purged_by
    rid = row["record_id"]
    if row["status"] != "tombstoned":
        return [
            f"record {rid} is {row['status']}, but its chain purged it ({event_type} at "
            f"sequence {sequence}): it was revived outside aetnaweb"
        ]
    reasons = []
    if row["content"]:
        reasons.append(f"record {rid} is tombstoned but still holds content")
    if row["fact_key"] or _metadata(row["metadata"]) or row["digest_salt"]:
        reasons.append(
            f"record {rid} is tombstoned but still holds its fact key, metadata or digest salt"
        )
    if marker is False:
        reasons.append(
            f"record {rid} has lost the purge marker of its {event_type} event "
            f"(sequence {sequence})"
        )
    return reasons + _lineage_reasons(row, view)


def _instant(value: Any) -> str | None:
    """A stored time in the chain's spelling (UTC, microseconds, ``Z``); None if unreadable."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:  # Django keeps UTC without an offset in SQLite
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _evidence(value: Any) -> Any:
    if value is None or value == "":
        return []
    try:
        return json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return value


def _lineage_reasons(row: dict[str, Any], view: _RecordView) -> list[str]:
    payload, rid, event = view.payload or {}, row["record_id"], view.event_type
    reasons = []
    committed_at = payload.get("record_created_at")
    if committed_at is not None and _instant(row["created_at"]) != committed_at:
        reasons.append(f"record {rid} created_at differs from the one its {event} event names")
    bound_evidence = committed_at is not None or "evidence" in payload
    if bound_evidence and _evidence(row["evidence"]) != payload.get("evidence", []):
        reasons.append(f"record {rid} evidence differs from the one its {event} event names")
    if "content_sha256" in payload:
        older, newer = row["supersedes_record_id"] or None, row["superseded_by_record_id"] or None
        if older != view.supersedes:
            reasons.append(
                f"record {rid} supersedes {older or 'nothing'}, but its chain's "
                f"events say it supersedes {view.supersedes or 'nothing'}"
            )
        if newer != view.superseded_by:
            reasons.append(
                f"record {rid} is superseded by {newer or 'nothing'}, but its "
                f"chain's events say {view.superseded_by or 'nothing'}"
            )
    return reasons


def _bound_field_reasons(row: dict[str, Any], view: _RecordView) -> list[str]:
    payload, rid, event = view.payload or {}, row["record_id"], view.event_type
    salt = row["digest_salt"]
    reasons = []
    bound = payload.get("content_sha256")
    if isinstance(bound, str) and _bound_digest(payload, salt, row["content"]) != bound:
        reasons.append(
            f"record {rid} content does not match the content_sha256 its {event} event binds"
        )
    if "content_sha256" in payload:
        metadata = _metadata(row["metadata"])
        bound_meta = payload.get("metadata_sha256")
        if isinstance(bound_meta, str):
            if _bound_digest(payload, salt, canonical_json(metadata)) != bound_meta:
                reasons.append(
                    f"record {rid} metadata does not match the metadata_sha256 its {event} "
                    "event binds"
                )
        elif metadata:
            reasons.append(f"record {rid} holds metadata its {event} event never bound")
    if payload.get("digests") == SALTED:
        if _bound_digest(payload, salt, row["fact_key"]) != payload.get("fact_key_sha256"):
            reasons.append(
                f"record {rid} fact_key does not match the fact_key_sha256 its {event} event binds"
            )
    elif isinstance(payload.get("fact_key"), str) and payload["fact_key"] != row["fact_key"]:
        reasons.append(f"record {rid} fact_key differs from the one its {event} event names")
    for column in ("source_type", "episode_id", "kind", "@session_id", "@turn_id"):
        value = row[column.lstrip("@")]
        if column in payload and payload[column] != value and (payload[column] or value):
            name = column.lstrip("@")
            reasons.append(f"record {rid} {name} differs from the one its {event} event names")
    if "confidence" in payload and payload["confidence"] != row["confidence"]:
        reasons.append(f"record {rid} confidence differs from the one its {event} event names")
    return reasons


def _record_reason_list(
    row: dict[str, Any], view: _RecordView | None, marker: bool | None
) -> list[str]:
    rid, status = row["record_id"], row["status"]
    if view is None or view.subject_id != row["scope"]:
        if status == "tombstoned":
            return [f"record {rid} is tombstoned but still holds content"] if row["content"] else []
        return [f"record {rid} has no {' or '.join(CREATION_EVENTS)} event in its scope's chain"]
    if view.purged_by is not None:
        return _purged_record_reasons(row, view, marker)
    if status == "tombstoned":
        return [f"record {rid} is tombstoned but still holds content"] if row["content"] else []
    reasons = []
    if "content_sha256" in (view.payload or {}):
        if view.status and status != view.status:
            reasons.append(
                f"record {rid} is {status}, but its chain's events leave it {view.status}"
            )
        if view.trust_tier and row["trust_tier"] != view.trust_tier:
            reasons.append(
                f"record {rid} has trust tier {row['trust_tier']}, but its chain's events give it "
                f"{view.trust_tier}"
            )
    return reasons + _bound_field_reasons(row, view) + _lineage_reasons(row, view)


def _episode_reason_list(row: dict[str, Any], view: _EpisodeView | None) -> list[str]:
    episode_id, text, salt = row["episode_id"], row["text"], row["digest_salt"]
    purged = row["purged_at"] is not None
    if view is None or view.subject_id != row["scope"]:
        return []
    if view.purged_by is not None and (text or not purged or salt):
        event_type, sequence = view.purged_by
        return [
            f"episode {episode_id} still holds its text or digest salt, but its chain purged it "
            f"({event_type} at sequence {sequence})"
        ]
    if purged:
        return (
            [f"episode {episode_id} is purged but still holds its text or digest salt"]
            if text or salt
            else []
        )
    payload = view.payload or {}
    bound = payload.get("message_sha256")
    if isinstance(bound, str) and _bound_digest(payload, salt, text) != bound:
        return [
            f"episode {episode_id} text does not match the message_sha256 its "
            f"{INGEST_EVENT} event binds"
        ]
    return []


def _columns(conn: sqlite3.Connection, table: str, wanted: Sequence[str]) -> str:
    """``wanted`` as a select list; a column this database predates reads as ''."""
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    return ", ".join(name if name in present else f"'' AS {name}" for name in wanted)


_RECORD_COLUMNS = (
    "record_id",
    "scope",
    "status",
    "trust_tier",
    "fact_key",
    "content",
    "metadata",
    "source_type",
    "episode_id",
    "kind",
    "digest_salt",
    "session_id",
    "turn_id",
    "confidence",
    "created_at",
    "supersedes_record_id",
    "superseded_by_record_id",
    "evidence",
)
_EPISODE_COLUMNS = ("episode_id", "scope", "text", "purged_at", "digest_salt")


def _fill_payloads(conn: sqlite3.Connection, views: Sequence[Any]) -> None:
    """Set each view's bound payload fields from its event, read by sequence."""
    wanted = {view.sequence: view for view in views if view.payload is None}
    sequences = list(wanted)
    for start in range(0, len(sequences), 500):
        part = sequences[start : start + 500]
        for sequence, text, session_id, turn_id in conn.execute(
            "SELECT sequence, payload, session_id, turn_id FROM audit_log "
            f"WHERE sequence IN ({', '.join('?' * len(part))})",
            part,
        ):
            fields = {k: v for k, v in _object(text).items() if k in _BOUND_FIELDS}
            fields["@session_id"], fields["@turn_id"] = session_id or "", turn_id or ""
            wanted[sequence].payload = fields


def _markers(conn: sqlite3.Connection, record_ids: list[str]) -> set[tuple[str, int]] | None:
    if not _has_table(conn, "memory_recordauditlink"):
        return None
    found: set[tuple[str, int]] = set()
    for start in range(0, len(record_ids), 500):
        part = record_ids[start : start + 500]
        found.update(
            conn.execute(
                "SELECT record_id, event_sequence FROM memory_recordauditlink "
                f"WHERE record_id IN ({', '.join('?' * len(part))}) AND event_type IN (?, ?)",
                (*part, *PURGE_EVENTS),
            ).fetchall()
        )
    return found


def _keyset(
    conn: sqlite3.Connection, table: str, columns: Sequence[str], subject: str | None
) -> Iterable[dict[str, Any]]:
    """The table's rows (of ``subject`` only, if given) in key order, a chunk at a time."""
    sql = (
        f"SELECT id, {_columns(conn, table, columns)} FROM {table} WHERE id > ?"
        + ("" if subject is None else " AND scope = ?")
        + " ORDER BY id LIMIT ?"
    )
    last = 0
    while True:
        rows = conn.execute(
            sql, (last, *(() if subject is None else (subject,)), _CHUNK)
        ).fetchall()
        yield from (dict(zip(columns, row[1:], strict=True)) for row in rows)
        if len(rows) < _CHUNK:
            return
        last = rows[-1][0]


def content_failures(
    conn: sqlite3.Connection, subjects: list[str] | None
) -> Iterable[tuple[str, int | None, str]]:
    """(subject, sequence or None, reason) for each record or episode that disagrees with its chain.

    Nothing when the database has no ``memory_record`` table (an export, a copy of
    ``audit_log`` alone): the records are not at hand.
    """
    if not _has_table(conn, "memory_record"):
        return
    for subject in [None] if subjects is None else subjects:
        records, episodes = _replay(conn, subject)
        chunk: list[dict[str, Any]] = []
        for row in _keyset(conn, "memory_record", _RECORD_COLUMNS, subject):
            chunk.append(row)
            if len(chunk) == _CHUNK:
                yield from _judge_records(conn, chunk, records)
                chunk = []
        yield from _judge_records(conn, chunk, records)
        if _has_table(conn, "memory_episode"):
            batch: list[dict[str, Any]] = []
            for row in _keyset(conn, "memory_episode", _EPISODE_COLUMNS, subject):
                batch.append(row)
                if len(batch) == _CHUNK:
                    yield from _judge_episodes(conn, batch, episodes)
                    batch = []
            yield from _judge_episodes(conn, batch, episodes)


def _judge_episodes(
    conn: sqlite3.Connection, rows: list[dict[str, Any]], episodes: dict[str, _EpisodeView]
) -> Iterable[tuple[str, int | None, str]]:
    _fill_payloads(conn, [v for row in rows if (v := episodes.get(row["episode_id"]))])
    for row in rows:
        view = episodes.get(row["episode_id"])
        for reason in _episode_reason_list(row, view):
            yield row["scope"], view.sequence if view else None, reason
        if view is not None:
            view.payload = None


def _judge_records(
    conn: sqlite3.Connection, rows: list[dict[str, Any]], records: dict[str, _RecordView]
) -> Iterable[tuple[str, int | None, str]]:
    purged = [
        row["record_id"]
        for row in rows
        if (view := records.get(row["record_id"])) is not None and view.purged_by
    ]
    markers = _markers(conn, purged) if purged else set()
    _fill_payloads(conn, [v for row in rows if (v := records.get(row["record_id"]))])
    for row in rows:
        view = records.get(row["record_id"])
        marker = None
        if view is not None and view.purged_by is not None and markers is not None:
            marker = (row["record_id"], view.purged_by[1]) in markers
        for reason in _record_reason_list(row, view, marker):
            yield row["scope"], view.sequence if view else None, reason
        if view is not None:
            view.payload = None


def _add_content_failures(
    conn: sqlite3.Connection, results: list[ChainResult], subjects: list[str] | None
) -> list[ChainResult]:
    by_subject = {result.subject_id: result for result in results}
    for subject, sequence, reason in content_failures(conn, subjects):
        result = by_subject.get(subject)
        if result is None:
            result = by_subject[subject] = ChainResult(subject_id=subject)
            results.append(result)
        result.fail(sequence, reason)
    return results


def verify_chain_result(conn: sqlite3.Connection, subject: str) -> ChainResult:
    cursor = conn.execute(f"{_SELECT} WHERE subject_id = ? ORDER BY sequence", (subject,))
    results = _walk(_rows(cursor)) or [ChainResult(subject_id=subject)]
    return _add_content_failures(conn, results, [subject])[0]


def verify_chain(conn: sqlite3.Connection, subject: str) -> list[str]:
    """Failure strings for ``subject``'s chain; an empty list means it holds."""
    return verify_chain_result(conn, subject).failure_lines()


def verify_all_chains(conn: sqlite3.Connection) -> list[ChainResult]:
    """Every chain, in one read of ``audit_log`` by ascending sequence (then record content)."""
    results = _walk(_rows(conn.execute(f"{_SELECT} ORDER BY sequence")))
    return _add_content_failures(conn, results, None)


# -- checkpoints ---------------------------------------------------------------------


def parse_checkpoint_line(line: str) -> dict[str, Any]:
    """One checkpoint line as a document; ``ValueError`` says what is malformed."""
    try:
        document = json.loads(line, parse_constant=_reject_constant)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if document.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"format is not {CHECKPOINT_FORMAT}")
    if not isinstance(document.get("created_at"), str):
        raise ValueError("created_at is missing or not a string")
    if not isinstance(document.get("checkpoint_sha256"), str):
        raise ValueError("checkpoint_sha256 is missing or not a string")
    subjects = document.get("subjects")
    if not isinstance(subjects, dict):
        raise ValueError("subjects is missing or not an object")
    for subject_id, entry in subjects.items():
        if (
            not isinstance(entry, dict)
            or type(entry.get("sequence")) is not int
            or not isinstance(entry.get("event_hash"), str)
        ):
            raise ValueError(
                f"subject {subject_id} needs an integer sequence and a string event_hash"
            )
    log = document.get("log")
    if log is not None and (
        not isinstance(log, dict)
        or type(log.get("tree_size")) is not int
        or log["tree_size"] < 0
        or not isinstance(log.get("root_hash"), str)
        or not isinstance(log.get("note", ""), str)
    ):
        raise ValueError("log needs a non-negative integer tree_size and a base64 root_hash")
    return document


def verify_checkpoint(
    conn: sqlite3.Connection, document: dict[str, Any], key: tuple[str, bytes] | None = None
) -> list[str]:
    """The digest, then the containment rule for every pinned subject.

    With ``key`` the line must also carry a log head whose note that key
    signed, by the offline rules (:func:`key_failures`): a line with no log
    head, an unsigned note or a signature that cannot be checked fails.
    Without it a checkpoint is compared with the database only.
    """
    claimed = {key: value for key, value in document.items() if key != "checkpoint_sha256"}
    try:
        recomputed = digest(claimed)
    except (TypeError, ValueError):
        recomputed = None
    if recomputed != document.get("checkpoint_sha256"):
        return ["checkpoint_sha256 does not match the checkpoint's content"]
    failures = []
    for subject_id, entry in sorted(document["subjects"].items()):
        sequence = entry["sequence"]
        row = conn.execute(
            "SELECT subject_id, event_hash FROM audit_log WHERE sequence = ?", (sequence,)
        ).fetchone()
        if row is None:
            failures.append(f"subject {subject_id}: pinned event at sequence {sequence} is missing")
        elif row[0] != subject_id:
            failures.append(
                f"subject {subject_id}: pinned event at sequence {sequence} belongs to "
                "another subject"
            )
        elif row[1] != entry["event_hash"]:
            failures.append(
                f"subject {subject_id}: pinned event at sequence {sequence} has a different "
                "event_hash"
            )
    verdict = NO_CHECKPOINT
    if "log" in document:
        verdict, found = log_head_failures(conn, document["log"], key)
        failures.extend(found)
    # "invalid" is already named by log_head_failures.
    if key is not None and verdict != "invalid":
        failures.extend(key_failures(verdict, "checkpoint's signed log head"))
    return failures


def log_head_failures(
    conn: sqlite3.Connection, log: dict[str, Any], key: tuple[str, bytes] | None
) -> tuple[str, list[str]]:
    """(signature verdict, failures) for a checkpoint's log head, recomputed from audit_log."""
    failures: list[str] = []
    size = log["tree_size"]
    try:
        root = base64.b64decode(log["root_hash"], validate=True)
    except (binascii.Error, ValueError):
        return "not signed", ["log root_hash is not base64"]
    verdict = "not signed"
    if log.get("note"):
        try:
            _, note_size, note_root, _, _ = parse_note(log["note"])
        except ValueError as exc:
            return "not signed", [f"log note is malformed: {exc}"]
        if note_size != size or note_root != root:
            failures.append("log note names a different tree size or root than the checkpoint")
        verdict = note_signature_verdict(log["note"], key)
        if verdict == "invalid":
            failures.append("log note is not signed by the given key")
    recomputed = events_root(conn, size)
    if recomputed is None:
        failures.append(
            f"audit_log holds fewer than the {size} events this checkpoint's log signed: "
            "the log was truncated"
        )
    elif recomputed != root:
        failures.append(
            f"the log root at tree size {size}, recomputed from audit_log, differs from the "
            "checkpoint's: the log was rewritten (a fork)"
        )
    return verdict, failures


# -- the Merkle log (RFC 6962 / RFC 9162) -------------------------------------------------

LOG_PROOF_FORMAT = "aetnaweb-log-proof-v1"
LEAF_DATA_PREFIX = b"aetnaweb-audit-leaf-v1:"
EMPTY_ROOT = hashlib.sha256(b"").digest()
PREIMAGE_KEYS = EVENT_COLUMNS[1:11]


class ProofError(ValueError):
    """A Merkle proof that does not verify."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def event_leaf_hash(event_hash: str) -> bytes:
    """The leaf of the event whose ``event_hash`` this is (docs/auditors.md)."""
    return leaf_hash(LEAF_DATA_PREFIX + event_hash.encode("ascii"))


def _inclusion_root(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    fn, sn, result = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            raise ProofError("inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is shorter than the tree is deep")
    return result


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """RFC 9162 2.1.3.2; raises ``ProofError`` unless ``leaf`` is at ``index`` under ``root``."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is outside a tree of {size} leaves")
    if len(leaf) != 32 or len(root) != 32:
        raise ProofError("a leaf hash and a root hash are 32 bytes each")
    if _inclusion_root(index, size, leaf, proof) != root:
        raise ProofError("inclusion proof does not lead to the root hash")


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 2.1.4.2; raises ``ProofError`` unless the newer tree extends the older."""
    if old_size < 0 or new_size < 0:
        raise ProofError("tree sizes cannot be negative")
    if old_size > new_size:
        raise ProofError(f"the older tree ({old_size}) is larger than the newer ({new_size})")
    if old_size == 0:
        raise ProofError("a consistency proof needs an older tree of at least one leaf")
    if old_size == new_size:
        if proof:
            raise ProofError("equal tree sizes need an empty consistency proof")
        if old_root != new_root:
            raise ProofError("equal tree sizes but different root hashes: the log forked")
        return
    if not proof:
        raise ProofError("consistency proof is empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for sibling in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof is longer than the trees need")
        if fn & 1 or fn == sn:
            fr = node_hash(sibling, fr)
            sr = node_hash(sibling, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is shorter than the trees need")
    if fr != old_root:
        raise ProofError("consistency proof does not lead to the older root hash")
    if sr != new_root:
        raise ProofError("consistency proof does not lead to the newer root hash")


def events_root(conn: sqlite3.Connection, size: int) -> bytes | None:
    """The root over the first ``size`` events in sequence order (leaf order); None if fewer."""
    frontier: list[bytes] = []
    count = 0
    cursor = conn.execute("SELECT event_hash FROM audit_log ORDER BY sequence LIMIT ?", (size,))
    for (event_hash,) in cursor:
        current = event_leaf_hash(str(event_hash))
        index = count
        while index & 1:
            current = node_hash(frontier.pop(), current)
            index >>= 1
        frontier.append(current)
        count += 1
    if count < size:
        return None
    if not frontier:
        return EMPTY_ROOT
    result = frontier[-1]
    for left in reversed(frontier[:-1]):
        result = node_hash(left, result)
    return result


# -- signed notes (C2SP signed-note / tlog-checkpoint) -------------------------------------


def parse_note(text: Any) -> tuple[str, int, bytes, str, list[tuple[str, bytes, bytes]]]:
    """(origin, size, root, signed text, [(name, key id, signature)]); ``ValueError`` if malformed."""
    if not isinstance(text, str) or "\x00" in text or "\r" in text or len(text) > 16384:
        raise ValueError("a checkpoint note is text without NUL or CR, at most 16 KiB")
    body, separator, signature_text = text.partition("\n\n")
    if not separator or not signature_text.endswith("\n"):
        raise ValueError("a checkpoint note needs a blank line then signature lines")
    lines = body.split("\n")
    if len(lines) < 3 or not lines[0] or not lines[1].isascii() or not lines[1].isdigit():
        raise ValueError("a checkpoint note starts with origin, tree size and root hash lines")
    if lines[1] != str(int(lines[1])):
        raise ValueError("a checkpoint's tree size has leading zeros")
    try:
        root = base64.b64decode(lines[2], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("a checkpoint's root hash is not base64") from exc
    if len(root) != 32:
        raise ValueError("a checkpoint's root hash is not 32 bytes")
    signatures = []
    for line in signature_text[:-1].split("\n"):
        if not line.startswith("\u2014 "):
            raise ValueError("a checkpoint's signature line does not start with an em dash")
        name, _, blob_text = line[2:].partition(" ")
        try:
            blob = base64.b64decode(blob_text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("a checkpoint's signature is not base64") from exc
        if len(blob) < 5:
            raise ValueError("a checkpoint's signature is too short")
        signatures.append((name, blob[:4], blob[4:]))
    return lines[0], int(lines[1]), root, body + "\n", signatures


def parse_verifier_key(text: str) -> tuple[str, bytes]:
    """(name, 32-byte Ed25519 public key) from NAME+KEYID+BASE64; raises ``UsageError``."""
    parts = text.strip().split("+", 2)  # base64 may hold '+'
    try:
        blob = base64.b64decode(parts[2], validate=True) if len(parts) == 3 else b""
    except (binascii.Error, ValueError):
        blob = b""
    if len(blob) != 33 or blob[:1] != b"\x01":
        raise UsageError("a verifier key reads NAME+KEYID+BASE64 (as 'audit public-key' prints)")
    name, public = parts[0], blob[1:]
    expected = hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
    if expected.hex() != parts[1].lower():
        raise UsageError("the verifier key's key ID does not match its name and key")
    return name, public


def note_signature_verdict(text: str, key: tuple[str, bytes] | None) -> str:
    """ "verified", "invalid", "not checked: ..." for a note's signature by ``key``."""
    if key is None:
        return "not checked: no --public-key given"
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        return "not checked: the 'cryptography' package is not installed"
    _, _, _, signed, signatures = parse_note(text)
    name, public = key
    kid = hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
    verifier = Ed25519PublicKey.from_public_bytes(public)
    for sig_name, sig_kid, signature in signatures:
        if sig_name == name and sig_kid == kid:
            try:
                verifier.verify(signature, signed.encode("utf-8"))
            except InvalidSignature:
                continue
            return "verified"
    return "invalid"


NO_CHECKPOINT = "absent"
# The verdict of a receipt refused before its log proof was looked at.
NOT_REACHED = "not checked: the receipt failed before its proof"


def key_failures(verdict: str, what: str) -> list[str]:
    """Why ``what`` fails when a key was given and its verdict is not "verified".

    With ``--public-key`` the only pass is a signature by that key: a missing
    checkpoint, an unsigned head, or a signature this Python cannot check
    proves nothing about who made the artefact.
    """
    if verdict == "verified":
        return []
    if verdict == "invalid":
        return [f"{what} is not signed by the given key"]
    if verdict == NO_CHECKPOINT:
        return [f"{what} is missing: nothing signed by the given key vouches for this root"]
    if verdict == "not signed":
        return [f"{what} is not signed: with --public-key it must be signed by that key"]
    reason = verdict.removeprefix("not checked: ")
    return [f"{what} signature cannot be checked ({reason}): nothing proves the key signed it"]


def log_proof_failures(
    proof: Any, event_hash: str, key: tuple[str, bytes] | None
) -> tuple[list[str], str]:
    """(failures, signature verdict) for a receipt's ``log_proof``, from the receipt alone."""
    if not isinstance(proof, dict) or proof.get("format") != LOG_PROOF_FORMAT:
        return [f"log_proof is not an {LOG_PROOF_FORMAT} object"], "not signed"
    event = proof.get("event")
    index, size = proof.get("leaf_index"), proof.get("tree_size")
    nodes = proof.get("inclusion_proof")
    if (
        not isinstance(event, dict)
        or set(event) != set(PREIMAGE_KEYS)
        or type(index) is not int
        or type(size) is not int
        or not isinstance(nodes, list)
        or not all(isinstance(node, str) for node in nodes)
        or not isinstance(proof.get("root_hash"), str)
    ):
        return ["log_proof is missing a field or has one of the wrong type"], "not signed"
    failures: list[str] = []
    try:
        recomputed = hashlib.sha256(canonical_json(event).encode("utf-8")).hexdigest()
    except (TypeError, ValueError):
        recomputed = None
    if recomputed != event_hash:
        failures.append("log_proof event does not recompute to the receipt's audit_event_hash")
    try:
        root = base64.b64decode(proof["root_hash"], validate=True)
        path = [base64.b64decode(node, validate=True) for node in nodes]
    except (binascii.Error, ValueError):
        return [*failures, "log_proof holds a hash that is not base64"], "not signed"
    verdict = "not signed" if key is None or "checkpoint" in proof else NO_CHECKPOINT
    if "checkpoint" in proof:
        try:
            _, note_size, note_root, _, _ = parse_note(proof["checkpoint"])
        except ValueError as exc:
            return [*failures, f"log_proof checkpoint is malformed: {exc}"], "not signed"
        if note_size != size or note_root != root:
            failures.append("log_proof checkpoint names a different tree size or root")
        verdict = note_signature_verdict(proof["checkpoint"], key)
    if key is not None:
        # Given a key, a root the key did not sign is a failure, never a pass:
        # anyone can build a one-leaf tree around an event they made up.
        failures.extend(key_failures(verdict, "log_proof checkpoint"))
    try:
        verify_inclusion(index, size, event_leaf_hash(event_hash), path, root)
    except (ProofError, UnicodeEncodeError) as exc:
        failures.append(f"log_proof inclusion proof does not verify: {exc}")
    return failures, verdict


# -- receipts -------------------------------------------------------------------------

# The only events that purge (audit-log-v1 "Receipt rule"): an agent.* event
# never backs a receipt, whatever its payload says.
PURGE_EVENT_TYPES = ("memory.forget", "memory.record_rejected")

_RECEIPT_FIELDS: dict[str, type] = {
    "subject_id": str,
    "created_at": str,
    "selector_sha256": str,
    "purged_record_ids": list,
    "purged_episode_ids": list,
    "audit_event_id": str,
    "audit_event_hash": str,
    "receipt_sha256": str,
}


def _id_list(value: Any) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return sorted(value)


def verify_receipt(conn: sqlite3.Connection, receipt: Any) -> list[str]:
    """The receipt rule; an altered receipt digest skips the remaining checks."""
    if not isinstance(receipt, dict):
        return ["receipt is not a JSON object"]
    failures = []
    if receipt.get("format") != DELETION_RECEIPT_FORMAT:
        failures.append(f"receipt format is not {DELETION_RECEIPT_FORMAT}")
    for name, kind in _RECEIPT_FIELDS.items():
        value = receipt.get(name)
        well_typed = _id_list(value) is not None if kind is list else isinstance(value, kind)
        if not well_typed:
            failures.append(f"receipt field {name} is missing or has the wrong type")
    if not failures:
        failures = unknown_field_failures(receipt)
    if failures:
        return failures
    claimed = {key: value for key, value in receipt.items() if key != "receipt_sha256"}
    try:
        recomputed = digest(claimed)
    except (TypeError, ValueError):
        recomputed = None
    if recomputed != receipt["receipt_sha256"]:
        return ["receipt_sha256 does not match the receipt's content"]
    subject_id = receipt["subject_id"]
    event_id = receipt["audit_event_id"]
    if not is_canonical_subject(subject_id):
        return ["receipt subject_id is not a canonical scope string"]
    row = conn.execute(
        f"{_SELECT} WHERE event_id = ? AND subject_id = ?", (event_id, subject_id)
    ).fetchone()
    if row is None:
        return [f"audit event {event_id} is not in subject {subject_id}'s chain"]
    stored_hash = row[11]
    if row[3] not in PURGE_EVENT_TYPES:
        failures.append(
            f"audit event {event_id} is a {row[3]} event, not a purge "
            f"({' or '.join(PURGE_EVENT_TYPES)})"
        )
    if stored_hash != receipt["audit_event_hash"]:
        failures.append(f"audit event {event_id} has a different event_hash than the receipt names")
    try:
        recomputes = verify_event_hash(row[1:]) == stored_hash
    except ValueError:
        recomputes = False
    if not recomputes:
        failures.append(f"audit event {event_id} does not recompute to its event_hash")
    try:
        payload = json.loads(row[9], parse_constant=_reject_constant)
    except (TypeError, ValueError):
        payload = None
    if not isinstance(payload, dict):
        payload = {}
    for name, noun in (("purged_record_ids", "record"), ("purged_episode_ids", "episode")):
        if _id_list(payload.get(name)) != _id_list(receipt[name]):
            failures.append(f"audit event {event_id} payload lists different purged {noun} IDs")
    if payload.get("selector_sha256") != receipt["selector_sha256"]:
        failures.append(f"audit event {event_id} payload names a different selector_sha256")
    failures.extend(created_at_failure(receipt["created_at"], event_id, row[4]))
    failures.extend(
        purge_failures(
            conn, subject_id, sorted(receipt["purged_record_ids"]), receipt["purged_episode_ids"]
        )
    )
    if "log_proof" in receipt:
        failures.extend(
            log_proof_failures(receipt["log_proof"], receipt["audit_event_hash"], None)[0]
        )
    return failures


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def purge_failures(
    conn: sqlite3.Connection, subject_id: str, record_ids: list[str], episode_ids: list[str]
) -> list[str]:
    """Named records not tombstoned and episodes not purged, where the rows are at hand.

    An export or a copy of audit_log alone has no memory tables: then nothing
    here is judged. A row that does not exist is not at hand either.
    """
    failures = []
    if _has_table(conn, "memory_record"):
        for record_id in record_ids:
            row = conn.execute(
                "SELECT scope, status, content FROM memory_record WHERE record_id = ?",
                (record_id,),
            ).fetchone()
            if row is None:
                continue
            scope, status, content = row
            if scope != subject_id:
                failures.append(f"record {record_id} belongs to scope {scope}, not {subject_id}")
            elif status != "tombstoned":
                failures.append(
                    f"record {record_id} is {status}, not tombstoned: it was not purged"
                )
            elif content:
                failures.append(f"record {record_id} is tombstoned but still holds content")
    if _has_table(conn, "memory_episode"):
        for episode_id in sorted(episode_ids):
            row = conn.execute(
                "SELECT text, purged_at FROM memory_episode WHERE episode_id = ?", (episode_id,)
            ).fetchone()
            if row is not None and (row[0] or row[1] is None):
                failures.append(f"episode {episode_id} still holds its text: it was not purged")
    return failures


ACTION_RECEIPT_FORMAT = "aetna-action-receipt-v1"

# Every field each receipt format may hold. Each one is either a field of the
# bound audit event (or its payload) or recomputed from it, so a holder can
# change none of them without the event, whose hash is a leaf under a signed
# root; a field outside this list is a claim nothing binds, and is refused.
RECEIPT_FIELD_SETS: dict[str, frozenset[str]] = {
    DELETION_RECEIPT_FORMAT: frozenset(
        {
            "format",
            "subject_id",
            "created_at",
            "selector_sha256",
            "purged_record_ids",
            "purged_episode_ids",
            "audit_event_id",
            "audit_event_hash",
            "log_proof",
            "receipt_sha256",
        }
    ),
    ACTION_RECEIPT_FORMAT: frozenset(
        {
            "format",
            "transaction_id",
            "subject_id",
            "plan_hash",
            "terminal_state",
            "operation_receipts",
            "audit_event_id",
            "audit_event_hash",
            "created_at",
            "log_proof",
            "receipt_sha256",
        }
    ),
}


def unknown_field_failures(receipt: dict[str, Any]) -> list[str]:
    """A receipt field its format does not define: a claim no event binds."""
    allowed = RECEIPT_FIELD_SETS.get(receipt.get("format"))  # type: ignore[arg-type]
    if allowed is None:
        return []
    extra = sorted(str(name) for name in receipt if name not in allowed)
    if not extra:
        return []
    return [f"receipt holds fields its format does not define: {', '.join(extra)}"]


def created_at_failure(receipt_time: Any, event_id: Any, event_time: Any) -> list[str]:
    """``created_at`` is the bound event's time, exactly: a receipt cannot be backdated."""
    if receipt_time == event_time:
        return []
    return [
        f"receipt created_at {receipt_time} is not the time of audit event {event_id} "
        f"({event_time}): the receipt was changed after it was issued"
    ]


def verify_receipt_offline(receipt: Any, key: tuple[str, bytes] | None) -> tuple[list[str], str]:
    """A deletion or action receipt from the receipt alone: digest, bound event, log proof.

    Every field must agree with the event inside ``log_proof`` (the subject,
    the time, the selector digest and purged IDs; the transaction, plan hash,
    terminal state and operations digest), no other field is allowed, the
    event must recompute to ``audit_event_hash``, and its leaf must be
    included under the proof's root. With ``key``, that root must be named by
    a checkpoint signed by ``key``; without one, nothing proves who made the
    tree, and the verdict says so.
    """
    if not isinstance(receipt, dict):
        return ["receipt is not a JSON object"], NOT_REACHED
    if receipt.get("format") not in RECEIPT_FIELD_SETS:
        return ["receipt format is neither a deletion nor an action receipt"], NOT_REACHED
    unknown = unknown_field_failures(receipt)
    if unknown:
        return unknown, NOT_REACHED
    claimed = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
    try:
        recomputed = digest(claimed)
    except (TypeError, ValueError):
        recomputed = None
    if recomputed != receipt.get("receipt_sha256"):
        return ["receipt_sha256 does not match the receipt's content"], NOT_REACHED
    proof = receipt.get("log_proof")
    if proof is None:
        return ["receipt has no log_proof: it can only be verified against the database"], (
            NOT_REACHED
        )
    event_hash = receipt.get("audit_event_hash")
    if not isinstance(event_hash, str):
        return ["receipt field audit_event_hash is missing or has the wrong type"], NOT_REACHED
    failures, verdict = log_proof_failures(proof, event_hash, key)
    event = proof.get("event") if isinstance(proof, dict) else None
    payload = event.get("payload") if isinstance(event, dict) else None
    if not isinstance(event, dict) or not isinstance(payload, dict):
        return [*failures, "log_proof event payload is not a JSON object"], verdict
    if event.get("event_id") != receipt.get("audit_event_id") or event.get(
        "subject_id"
    ) != receipt.get("subject_id"):
        failures.append("log_proof event is not the event the receipt names")
    failures.extend(
        created_at_failure(
            receipt.get("created_at"), event.get("event_id"), event.get("created_at")
        )
    )
    if receipt["format"] == DELETION_RECEIPT_FORMAT:
        if event.get("event_type") not in PURGE_EVENT_TYPES:
            failures.append(
                f"log_proof event is a {event.get('event_type')} event, not a purge "
                f"({' or '.join(PURGE_EVENT_TYPES)})"
            )
        for name, noun in (("purged_record_ids", "record"), ("purged_episode_ids", "episode")):
            if _id_list(payload.get(name)) != _id_list(receipt.get(name)):
                failures.append(f"log_proof event payload lists different purged {noun} IDs")
        if payload.get("selector_sha256") != receipt.get("selector_sha256"):
            failures.append("log_proof event payload names a different selector_sha256")
    else:
        expected = {
            "transaction_id": receipt.get("transaction_id"),
            "plan_hash": receipt.get("plan_hash"),
            "terminal_state": receipt.get("terminal_state"),
            "operations_digest": digest(receipt.get("operation_receipts")),
        }
        if event.get("event_type") != "action.receipt_issued" or any(
            payload.get(k) != v for k, v in expected.items()
        ):
            failures.append("log_proof event does not record this action receipt")
    return failures, verdict


def _bundle_side(bundle: dict[str, Any], side: str) -> tuple[int, bytes, str | None]:
    """(tree size, root, note) of one side of a bundle; ``ValueError`` when malformed.

    A signed side is its note; a ``<side>_head`` beside it must name the same
    size and root. An unsigned side (note null) is its head alone.
    """
    note, head = bundle.get(side), bundle.get(f"{side}_head")
    head_size = head_root = None
    if head is not None:
        if not isinstance(head, dict) or type(head.get("tree_size")) is not int:
            raise ValueError(f"{side}_head needs an integer tree_size and a base64 root_hash")
        head_size = head["tree_size"]
        head_root = base64.b64decode(head.get("root_hash", ""), validate=True)
    if note is None:
        if head_size is None or head_root is None or len(head_root) != 32:
            raise ValueError(f"the {side} checkpoint has neither a note nor a head")
        return head_size, head_root, None
    _, size, root, _, _ = parse_note(note)
    if head_size is not None and (head_size, head_root) != (size, root):
        raise ValueError(f"{side}_head names a different tree size or root than its note")
    return size, root, note


def verify_consistency_bundle(bundle: Any, key: tuple[str, bytes] | None) -> tuple[list[str], str]:
    """A consistency bundle (``audit prove-consistency --json``, the API, the checkpoints page).

    Both checkpoints (signed notes, or unsigned heads), then the RFC 9162
    proof that the newer tree extends the older one. The bundle's own
    ``consistent``/``failures`` are the server's say-so and are ignored.
    """
    if not isinstance(bundle, dict) or not isinstance(bundle.get("proof"), list):
        return ["consistency bundle needs old, new and proof"], "not signed"
    try:
        old_size, old_root, old_note = _bundle_side(bundle, "old")
        new_size, new_root, new_note = _bundle_side(bundle, "new")
        proof = [base64.b64decode(item, validate=True) for item in bundle["proof"]]
    except (ValueError, TypeError, binascii.Error) as exc:
        return [f"consistency bundle is malformed: {exc}"], "not signed"
    side_verdicts = [
        (side, "not signed" if note is None else note_signature_verdict(note, key))
        for side, note in (("old", old_note), ("new", new_note))
    ]
    verdicts = {verdict for _, verdict in side_verdicts}
    verdict = verdicts.pop() if len(verdicts) == 1 else "mixed: " + ", ".join(sorted(verdicts))
    failures = []
    if key is not None:
        # Given a key, both heads must be signed by it: a real old note beside
        # an invented unsigned "new" head proves nothing about the new one.
        for side, side_verdict in side_verdicts:
            failures.extend(key_failures(side_verdict, f"the {side} checkpoint"))
    try:
        verify_consistency(old_size, new_size, old_root, new_root, proof)
    except ProofError as exc:
        failures.append(f"the newer checkpoint does not extend the older: {exc}")
    return failures, verdict


# -- command line ------------------------------------------------------------------------


def open_readonly(path: str) -> sqlite3.Connection:
    """Open ``path`` read-only; the verifier never writes to the database it checks."""
    if not os.path.isfile(path):
        raise UsageError(f"database not found: {path}")
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("SELECT 1 FROM audit_log LIMIT 1").fetchall()
        # Reading pages through a memory map instead of read() calls is a
        # measurable share of a full pass; it changes nothing on disk.
        conn.execute("PRAGMA mmap_size = 1073741824")
    except sqlite3.Error as exc:
        raise UsageError(f"cannot read audit_log from {path}: {exc}") from exc
    return conn


def _load_row(conn: sqlite3.Connection, insert: str, line: str, where: str) -> None:
    try:
        row = json.loads(line)
        if not isinstance(row, dict) or type(row.get("sequence")) is not int:
            raise ValueError("not an audit_log row with an integer sequence")
        conn.execute(insert, [row.get(column) for column in EVENT_COLUMNS])
    except (ValueError, sqlite3.Error) as exc:
        raise UsageError(f"{where}: {exc}") from exc


def load_export(path: str) -> sqlite3.Connection:
    """An in-memory ``audit_log`` holding the rows of a JSON Lines export, as exported."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE audit_log ({', '.join(EVENT_COLUMNS)}, PRIMARY KEY (sequence))")
    insert = f"INSERT INTO audit_log VALUES ({', '.join('?' * len(EVENT_COLUMNS))})"
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115  (closed by the with below)
    except OSError as exc:
        raise UsageError(f"cannot read export {path}: {exc}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, start=1):  # streamed, not read whole
                if line.strip():
                    _load_row(conn, insert, line, f"export {path} line {number}")
        except UnicodeDecodeError as exc:
            raise UsageError(f"cannot read export {path}: {exc}") from exc
    return conn


# -- erasure certificates (issue 32) --------------------------------------------------

ERASURE_CERTIFICATE_FORMAT = "aetnaweb-erasure-certificate-v1"
CERTIFICATE_FIELDS = frozenset(
    {
        "format",
        "subtree",
        "reference",
        "erasure_job",
        "requested_at",
        "created_at",
        "receipts",
        "closing_proof",
        "certificate_sha256",
    }
)


def subtree_covers(root: str, subject: str) -> bool:
    """Is ``subject`` the scope ``root`` or below it? Segment by segment, never a prefix."""
    for mine, theirs in zip(root.split(":"), subject.split(":"), strict=True):
        if mine != "*" and mine != theirs:
            return False
    return True


def _envelope_failures(
    document: Any, *, noun: str, fmt: str, fields: frozenset[str], digest_field: str
) -> list[str]:
    """A bundle of receipts (an erasure certificate, a forget bundle) as a file: a JSON object
    of its format, no field the format does not define, its own digest recomputing."""
    if not isinstance(document, dict):
        return [f"{noun} is not a JSON object"]
    if document.get("format") != fmt:
        return [f"{noun} format is not {fmt}"]
    extra = sorted(str(name) for name in document if name not in fields)
    if extra:
        return [f"{noun} holds fields its format does not define: {', '.join(extra)}"]
    claimed = {k: v for k, v in document.items() if k != digest_field}
    try:
        recomputed = digest(claimed)
    except (TypeError, ValueError):
        recomputed = None
    if recomputed != document.get(digest_field):
        return [f"{digest_field} does not match the {noun}'s content"]
    return []


def _closing_failures(
    document: dict[str, Any],
    key: tuple[str, bytes] | None,
    noun: str,
    of_this: Callable[[dict[str, Any]], list[str]],
) -> list[str]:
    """The event closing a bundle of receipts: in the log under a checkpoint signed by
    ``key``, the document's own (``of_this`` says what that means for its kind), naming
    its reference and committing exactly its receipts' digests."""
    proof = document.get("closing_proof")
    event = proof.get("event") if isinstance(proof, dict) else None
    if not isinstance(event, dict) or not isinstance(event.get("payload"), dict):
        return [f"{noun} has no closing_proof event: its receipts are bound to nothing"]
    try:
        event_hash = digest(event)
    except (TypeError, ValueError):
        return ["closing_proof event is not canonical JSON"]
    found, _ = log_proof_failures(proof, event_hash, key)
    failures = [f"closing_proof: {reason}" for reason in found]
    failures += of_this(event)
    payload = event["payload"]
    receipts = document.get("receipts")
    listed = (
        # str(): a receipt without a digest (None) still sorts, and never matches one
        sorted(str(r.get("receipt_sha256")) for r in receipts if isinstance(r, dict))
        if isinstance(receipts, list)
        else None
    )
    reference = document.get("reference")
    if (
        not isinstance(reference, str)
        or payload.get("reference_sha256") != hashlib.sha256(reference.encode()).hexdigest()
    ):
        failures.append("closing_proof event names a different reference")
    if payload.get("receipt_sha256s") != listed:
        failures.append(
            f"the {noun}'s receipts are not the set its closing event commits "
            "(a receipt was dropped, added or changed)"
        )
    return failures


def _bundled_receipt_results(
    receipts: list[Any],
    key: tuple[str, bytes] | None,
    *,
    noun: str,
    covers: Callable[[str], bool],
    outside: str,
    selector: Any,
    whose: str,
) -> list[tuple[str, list[str], str]]:
    """One (label, failures, verdict) per bundled receipt: it holds offline exactly as
    ``--offline-receipt`` checks it, is of a scope ``covers`` accepts, names ``selector``
    and appears once. ``outside`` and ``whose`` finish the refusals' sentences."""
    results: list[tuple[str, list[str], str]] = []
    seen: set[Any] = set()
    for number, receipt in enumerate(receipts, start=1):
        found, verdict = verify_receipt_offline(receipt, key)
        if isinstance(receipt, dict):
            subject = receipt.get("subject_id")
            if not isinstance(subject, str) or not is_canonical_subject(subject):
                found.append("receipt subject_id is not a canonical scope string")
            elif not covers(subject):
                found.append(f"receipt is for {subject}, outside {outside}")
            if receipt.get("selector_sha256") != selector:
                found.append(f"receipt is not one of this {whose} (another selector)")
            if receipt.get("audit_event_id") in seen:
                found.append(f"receipt appears twice in the {noun}")
            seen.add(receipt.get("audit_event_id"))
            label = f"{subject} {receipt.get('audit_event_id')}"
        else:
            label = f"#{number}"
        results.append((label, found, verdict))
    return results


def verify_erasure_certificate(
    certificate: Any, key: tuple[str, bytes] | None
) -> tuple[list[str], list[tuple[str, list[str], str]]]:
    """(certificate failures, one (label, failures, verdict) per receipt) from the file alone.

    The certificate's digest recomputes and it holds no field its format does
    not define; it bundles at least one receipt, no receipt twice, each of a
    scope inside its subtree and naming the erasure's selector; and every
    receipt holds offline exactly as ``--offline-receipt`` checks it (with
    ``key``, under a checkpoint signed by that key). Its closing
    ``memory.subject_erased`` event is of this subtree and job.
    """
    envelope = _envelope_failures(
        certificate,
        noun="certificate",
        fmt=ERASURE_CERTIFICATE_FORMAT,
        fields=CERTIFICATE_FIELDS,
        digest_field="certificate_sha256",
    )
    if envelope:
        return envelope, []
    subtree, receipts = certificate.get("subtree"), certificate.get("receipts")
    if not is_canonical_subject(subtree) or str(subtree).split(":")[1] == "*":
        return ["certificate subtree is not one person's scope (tenant:user:...)"], []
    if not isinstance(receipts, list) or not receipts:
        return ["certificate bundles no receipt"], []

    def of_this_erasure(event: dict[str, Any]) -> list[str]:
        if (
            event.get("event_type") != "memory.subject_erased"
            or event.get("subject_id") != subtree
            or event["payload"].get("erasure_job") != certificate.get("erasure_job")
        ):
            return ["closing_proof event is not this subtree's erasure event"]
        return []

    failures = _closing_failures(certificate, key, "certificate", of_this_erasure)
    return failures, _bundled_receipt_results(
        receipts,
        key,
        noun="certificate",
        covers=lambda subject: subtree_covers(str(subtree), subject),
        outside=f"the erased subtree {subtree}",
        selector=hashlib.sha256(f"erase-subject {subtree}".encode()).hexdigest(),
        whose="subject erasure's",
    )


# -- forget bundles (issue 32 item 5) -------------------------------------------------

FORGET_BUNDLE_FORMAT = "aetnaweb-forget-bundle-v1"
FORGET_BUNDLE_FIELDS = frozenset(
    {
        "format",
        "scope",
        "selector_sha256",
        "reference",
        "created_at",
        "receipts",
        "closing_proof",
        "bundle_sha256",
    }
)


def verify_forget_bundle(
    bundle: Any, key: tuple[str, bytes] | None
) -> tuple[list[str], list[tuple[str, list[str], str]]]:
    """(bundle failures, one (label, failures, verdict) per receipt) from the file alone.

    As an erasure certificate: the bundle's digest recomputes and it holds no
    field its format does not define; its closing ``memory.forget_bundled``
    event, of the bundle's scope and time, commits exactly its receipts'
    digests, its reference and selector; each receipt is of the bundle's scope
    or one below it, names the bundle's selector, appears once, and holds
    offline exactly as ``--offline-receipt`` checks it.
    """
    envelope = _envelope_failures(
        bundle,
        noun="bundle",
        fmt=FORGET_BUNDLE_FORMAT,
        fields=FORGET_BUNDLE_FIELDS,
        digest_field="bundle_sha256",
    )
    if envelope:
        return envelope, []
    scope, receipts = bundle.get("scope"), bundle.get("receipts")
    if not is_canonical_subject(scope):
        return ["bundle scope is not a canonical scope string"], []
    if not isinstance(receipts, list) or not receipts:
        return ["bundle holds no receipt"], []

    def of_this_forget(event: dict[str, Any]) -> list[str]:
        found = []
        if (
            event.get("event_type") != "memory.forget_bundled"
            or event.get("subject_id") != scope
            or event["payload"].get("selector_sha256") != bundle.get("selector_sha256")
        ):
            found.append("closing_proof event is not this forget's bundling event")
        if event.get("created_at") != bundle.get("created_at"):
            found.append("bundle created_at is not the time of its closing event")
        return found

    failures = _closing_failures(bundle, key, "bundle", of_this_forget)
    return failures, _bundled_receipt_results(
        receipts,
        key,
        noun="bundle",
        covers=lambda subject: scope == "platform:*:*" or subtree_covers(str(scope), subject),
        outside=f"{scope} and the scopes below it",
        selector=bundle.get("selector_sha256"),
        whose="forget's",
    )


SUBJECT_EXPORT_FORMAT = "aetnaweb-subject-export-v1"


def verify_subject_export(document: Any, key: tuple[str, bytes] | None) -> tuple[list[str], str]:
    """(failures, signature verdict) for a subject export, from the file alone.

    Each section's count and digest are the manifest's; the manifest's digest
    is the one the ``memory.subject_exported`` event commits; that event is of
    the export's subtree and sits in the log under the proof's root (with
    ``key``, a checkpoint signed by it).
    """
    if not isinstance(document, dict) or document.get("format") != SUBJECT_EXPORT_FORMAT:
        return [f"export format is not {SUBJECT_EXPORT_FORMAT}"], NOT_REACHED
    manifest, proof = document.get("manifest"), document.get("manifest_proof")
    event = proof.get("event") if isinstance(proof, dict) else None
    if not isinstance(manifest, dict) or not isinstance(event, dict):
        return ["export has no manifest or no manifest_proof event"], NOT_REACHED
    try:
        event_hash = digest(event)
        manifest_sha256 = digest(manifest)
    except (TypeError, ValueError):
        return ["export manifest or event is not canonical JSON"], NOT_REACHED
    failures, verdict = log_proof_failures(proof, event_hash, key)
    failures = [f"manifest_proof: {reason}" for reason in failures]
    for section in ("records", "episodes", "audit_events"):
        rows, claimed = document.get(section), manifest.get(section)
        if not isinstance(rows, list) or not isinstance(claimed, dict):
            failures.append(f"export section {section} is missing")
            continue
        if claimed.get("count") != len(rows) or claimed.get("sha256") != digest(rows):
            failures.append(f"export section {section} differs from the manifest")
    committed = event.get("payload")
    payload = committed if isinstance(committed, dict) else {}
    if (
        event.get("event_type") != "memory.subject_exported"
        or event.get("subject_id") != manifest.get("subtree")
        or payload.get("manifest_sha256") != manifest_sha256
    ):
        failures.append("manifest_proof event does not commit this manifest")
    reference = document.get("reference")
    if (
        not isinstance(reference, str)
        or manifest.get("reference_sha256") != hashlib.sha256(reference.encode()).hexdigest()
    ):
        failures.append("export reference is not the manifest's")
    return failures, verdict


SUBJECT_EXPORT_MEMBER = "export.json"


def verify_subject_export_archive(
    members: dict[str, bytes], key: tuple[str, bytes] | None
) -> tuple[list[str], str]:
    """(failures, signature verdict) for a subject export ZIP's members (name -> bytes).

    ``export.json`` is checked as :func:`verify_subject_export` does; each CSV
    file the manifest's ``csv`` lists must be in the archive with that SHA-256,
    and the archive holds no other file.
    """
    if SUBJECT_EXPORT_MEMBER not in members:
        return [f"archive has no {SUBJECT_EXPORT_MEMBER}"], NOT_REACHED
    try:
        document = json.loads(members[SUBJECT_EXPORT_MEMBER], parse_constant=_reject_constant)
    except ValueError:
        return [f"archive's {SUBJECT_EXPORT_MEMBER} is not JSON"], NOT_REACHED
    failures, verdict = verify_subject_export(document, key)
    manifest = document.get("manifest") if isinstance(document, dict) else None
    listed = manifest.get("csv") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict):
        return [*failures, "export manifest lists no CSV files"], verdict
    for name, claimed in sorted(listed.items()):
        body = members.get(name)
        if body is None:
            failures.append(f"archive has no {name}")
        elif hashlib.sha256(body).hexdigest() != claimed:
            failures.append(f"archive's {name} differs from the manifest")
    for name in sorted(set(members) - set(listed) - {SUBJECT_EXPORT_MEMBER}):
        failures.append(f"archive holds {name}, which the manifest does not list")
    return failures, verdict


def _read_archive(path: str) -> dict[str, bytes] | None:
    """The members of a ZIP file, or ``None`` when ``path`` is not one."""
    try:
        if not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as archive:
            return {info.filename: archive.read(info) for info in archive.infolist()}
    except (OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read export {path}: {exc}") from exc


def _read_text(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from exc


def _report(out: list[str], ok: bool, label: str, reasons: Iterable[str]) -> bool:
    out.append(f"{'OK' if ok else 'FAIL'} {label}")
    out.extend(f"  {reason}" for reason in reasons)
    return ok


def _load_key(value: str | None) -> tuple[str, bytes] | None:
    if value is None:
        return None
    text = _read_text(value, "public key") if os.path.isfile(value) else value
    return parse_verifier_key(text)


# Exit statuses: everything verified; something failed; a usage error; the
# proofs hold but no signature was checked (no --public-key), so nothing says
# who made the artefacts.
EXIT_VERIFIED, EXIT_FAILED, EXIT_USAGE, EXIT_UNSIGNED = 0, 1, 2, 3

UNSIGNED_NOTICE = (
    "no --public-key was given, so no signature was checked and nothing proves who made "
    "these artefacts (anyone can build a tree around an event they made up)"
)


def run_offline(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Receipts and consistency bundles checked with no database at all; (exit status, lines)."""
    if args.public_key is not None and args.no_signature_check:
        raise UsageError("--public-key and --no-signature-check contradict each other")
    key = _load_key(args.public_key)
    out: list[str] = []
    ok = True
    for path in args.offline_receipt:
        try:
            receipt = json.loads(_read_text(path, "receipt"), parse_constant=_reject_constant)
        except ValueError:
            ok &= _report(out, False, f"receipt {path}", ["receipt file is not JSON"])
            continue
        failures, verdict = verify_receipt_offline(receipt, key)
        ok &= _report(out, not failures, f"receipt {path} (signature {verdict})", failures)
    for path in args.erasure_certificate:
        try:
            certificate = json.loads(
                _read_text(path, "certificate"), parse_constant=_reject_constant
            )
        except ValueError:
            ok &= _report(out, False, f"certificate {path}", ["certificate file is not JSON"])
            continue
        failures, receipt_results = verify_erasure_certificate(certificate, key)
        whole = not failures and all(not found for _, found, _ in receipt_results)
        ok &= _report(out, whole, f"erasure certificate {path}", failures)
        for label, found, verdict in receipt_results:
            _report(out, not found, f"  receipt {label} (signature {verdict})", found)
    for path in args.forget_bundle:
        try:
            bundle = json.loads(_read_text(path, "bundle"), parse_constant=_reject_constant)
        except ValueError:
            ok &= _report(out, False, f"forget bundle {path}", ["bundle file is not JSON"])
            continue
        failures, receipt_results = verify_forget_bundle(bundle, key)
        whole = not failures and all(not found for _, found, _ in receipt_results)
        ok &= _report(out, whole, f"forget bundle {path}", failures)
        for label, found, verdict in receipt_results:
            _report(out, not found, f"  receipt {label} (signature {verdict})", found)
    for path in args.subject_export:
        members = _read_archive(path)
        if members is not None:
            failures, verdict = verify_subject_export_archive(members, key)
            label = f"subject export {path} (signature {verdict})"
            ok &= _report(out, not failures, label, failures)
            continue
        try:
            document = json.loads(_read_text(path, "export"), parse_constant=_reject_constant)
        except ValueError:
            ok &= _report(out, False, f"subject export {path}", ["export file is not JSON"])
            continue
        failures, verdict = verify_subject_export(document, key)
        ok &= _report(out, not failures, f"subject export {path} (signature {verdict})", failures)
    for path in args.consistency:
        try:
            bundle = json.loads(_read_text(path, "bundle"), parse_constant=_reject_constant)
        except ValueError:
            ok &= _report(out, False, f"consistency {path}", ["bundle file is not JSON"])
            continue
        failures, verdict = verify_consistency_bundle(bundle, key)
        ok &= _report(out, not failures, f"consistency {path} (signatures {verdict})", failures)
    if not ok:
        out.append("FAILED offline")
        return EXIT_FAILED, out
    if key is not None:
        # key_failures made every unsigned or uncheckable checkpoint a failure,
        # so reaching here means each one is signed by the given key.
        out.append("verified offline: every checkpoint is signed by the given key")
        return EXIT_VERIFIED, out
    if args.no_signature_check:
        out.append(f"proofs hold offline (--no-signature-check): {UNSIGNED_NOTICE}")
        return EXIT_VERIFIED, out
    out.append(f"NOT VERIFIED offline: the proofs hold, but {UNSIGNED_NOTICE}")
    return EXIT_UNSIGNED, out


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Everything the command line asked for; returns (exit status, output lines)."""
    if (
        args.offline_receipt
        or args.consistency
        or args.erasure_certificate
        or args.forget_bundle
        or args.subject_export
    ):
        if args.database is not None or args.export is not None or args.checkpoints:
            raise UsageError(
                "--offline-receipt, --erasure-certificate, --forget-bundle and --consistency "
                "take no database"
            )
        return run_offline(args)
    if args.no_signature_check:
        raise UsageError(
            "--no-signature-check applies to --offline-receipt, --erasure-certificate, "
            "--forget-bundle and "
            "--consistency"
        )
    if args.public_key is not None and not args.checkpoints:
        raise UsageError(
            "with a database, --public-key checks the signatures of --checkpoints lines: "
            "give --checkpoints FILE"
        )
    key = _load_key(args.public_key)
    checkpoint_texts = [(path, _read_text(path, "checkpoint file")) for path in args.checkpoints]
    receipt_texts = [(path, _read_text(path, "receipt")) for path in args.receipt]
    if (args.database is None) == (args.export is None):
        raise UsageError("give either a database file or --export FILE")
    conn = open_readonly(args.database) if args.export is None else load_export(args.export)
    out: list[str] = []
    ok = True
    try:
        if args.subject is not None:
            chains = [verify_chain_result(conn, args.subject)]
        else:
            chains = verify_all_chains(conn)
        for chain in chains:
            ok &= _report(out, chain.ok, chain.subject_id, chain.failure_lines())
        for path, text in checkpoint_texts:
            for number, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                label = f"checkpoint {path} line {number}"
                try:
                    document = parse_checkpoint_line(line)
                except ValueError as exc:
                    ok &= _report(out, False, label, [str(exc)])
                    continue
                failures = verify_checkpoint(conn, document, key)
                ok &= _report(out, not failures, label, failures)
        for path, text in receipt_texts:
            try:
                receipt = json.loads(text, parse_constant=_reject_constant)
            except ValueError:
                ok &= _report(out, False, f"receipt {path}", ["receipt file is not JSON"])
                continue
            failures = verify_receipt(conn, receipt)
            ok &= _report(out, not failures, f"receipt {path}", failures)
    finally:
        conn.close()
    events = sum(chain.events_checked for chain in chains)
    out.append(f"{'verified' if ok else 'FAILED'}: {events} events in {len(chains)} chains")
    return (EXIT_VERIFIED if ok else EXIT_FAILED), out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(message)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(
        prog="verify_audit.py",
        description="Verify aetnaweb audit chains, checkpoints and deletion receipts.",
    )
    parser.add_argument("database", nargs="?", help="path to the SQLite database")
    parser.add_argument("--export", metavar="FILE", help="a 'manage.py audit export' file instead")
    parser.add_argument("--subject", help="verify only this subject's chain")
    parser.add_argument(
        "--checkpoints", action="append", default=[], metavar="FILE", help="checkpoint JSONL file"
    )
    parser.add_argument(
        "--receipt", action="append", default=[], nargs="+", metavar="FILE", help="receipt JSON"
    )
    parser.add_argument(
        "--offline-receipt",
        action="append",
        default=[],
        nargs="+",
        metavar="FILE",
        help="a receipt with a log_proof, checked without any database",
    )
    parser.add_argument(
        "--erasure-certificate",
        action="append",
        default=[],
        metavar="FILE",
        help="a subject erasure's certificate (its bundled receipts), checked without any database",
    )
    parser.add_argument(
        "--forget-bundle",
        action="append",
        default=[],
        metavar="FILE",
        help="a forget's bundle (its per-scope receipts), checked without any database",
    )
    parser.add_argument(
        "--subject-export",
        action="append",
        default=[],
        metavar="FILE",
        help="a subject export, the ZIP file or its export.json (its manifest bound to the "
        "log), checked without any database",
    )
    parser.add_argument(
        "--consistency",
        action="append",
        default=[],
        metavar="FILE",
        help="an 'audit prove-consistency --json' bundle, checked without any database",
    )
    parser.add_argument(
        "--public-key",
        metavar="KEY",
        help="the log's verifier key (NAME+KEYID+BASE64, or a file holding it); offline, "
        "every checkpoint must then be signed by it; with a database, every --checkpoints "
        "line's log head must be",
    )
    parser.add_argument(
        "--no-signature-check",
        action="store_true",
        help="offline without a key: exit 0 when the proofs hold, accepting that nothing "
        "proves who made the artefacts (otherwise that case exits 3)",
    )
    try:
        args = parser.parse_args(argv)
        args.receipt = [path for group in args.receipt for path in group]
        args.offline_receipt = [path for group in args.offline_receipt for path in group]
        status, lines = run(args)
    except UsageError as exc:
        print(f"verify_audit.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    sys.exit(main())
