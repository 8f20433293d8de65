"""Moving in from aetnamem 0.2.1: its records, episodes and audit chain (issue 32 item 6).

aetnamem keeps one SQLite file: ``episodes`` (each message), ``records``
(each fact, with ``status`` and ``trust_tier``) and ``audit_log``, one hash
chain per ``subject_id``, each ``event_hash`` the SHA-256 of the canonical
JSON (sorted keys, no spaces, ASCII) of the event's ten preimage fields with
``prev_hash`` the previous event's hash. Nothing here imports aetnamem: the
file is read with the standard library, read-only.

The import is all or nothing. Every source subject must be mapped to one of
our scopes by the operator (a subject the file holds without a mapping, or a
mapping for a subject it does not hold, is refused), each source chain must
verify unless ``force``, and then, in one transaction per call, each mapped
subject's episodes and its active and quarantined records are stored through
the engine's own write path (so our chain binds them like any other), and one
``memory.aetnamem_imported`` event per scope records which source chain head
was imported (its hash, sequence and event count) and what came in: the old
chain can still be verified with aetnamem's own tools against that head.
Superseded and tombstoned source records are not carried over (the first is
history our engine rebuilds from fact keys, the second holds no content).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import WILDCARD, Scope, ScopeError
from audit.services import lock_subject
from memory.errors import AetnamemImportError
from memory.extraction import Candidate, SourceReading
from memory.models import Episode, SourceType, Status
from memory.services._common import _audit, _bump
from memory.services.remembering import _ingest, _store_candidate

SOURCE_FORMAT = "aetnamem-0.2.1"
EVENT_TYPE = "memory.aetnamem_imported"
# The columns this import reads; aetnamem 0.2.1 creates each of them.
REQUIRED_COLUMNS = {
    "episodes": (
        "id",
        "subject_id",
        "session_id",
        "turn_id",
        "message",
        "source_type",
        "created_at",
    ),
    "records": (
        "id",
        "subject_id",
        "content",
        "source_type",
        "trust_tier",
        "source_session_id",
        "source_turn_id",
        "episode_id",
        "created_at",
        "confidence",
        "status",
        "fact_key",
    ),
    "audit_log": (
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
    ),
}
_PREIMAGE = REQUIRED_COLUMNS["audit_log"][1:-1]
_TRUSTED_TIERS = ("trusted_user", "user_confirmed")
_KNOWN_SOURCE_TYPES = frozenset(SourceType.values)


@dataclass
class SourceChain:
    """One aetnamem subject's chain: its head and whether every link recomputes."""

    events: int = 0
    head_sequence: int | None = None
    head_hash: str | None = None
    broken_at: int | None = None  # the first sequence that does not recompute


@dataclass
class SourceSubject:
    episodes: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    chain: SourceChain = field(default_factory=SourceChain)


@dataclass(frozen=True)
class SubjectImported:
    source_subject: str
    scope: str
    source_head_hash: str | None
    source_head_sequence: int | None
    source_events: int
    chain_verified: bool
    episodes: int
    records: int
    duplicates: int
    skipped_records: int
    event_id: str


@dataclass(frozen=True)
class AetnamemImportResult:
    path: str
    forced: bool
    subjects: tuple[SubjectImported, ...]


def _sha256_canonical(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _open(path: str) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise AetnamemImportError(f"{path} is not a file")
    try:
        # as_uri() percent-encodes the path: a '?' or '#' in a file name stays a name.
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise AetnamemImportError(f"{path} is not an SQLite database ({exc})") from exc
    return conn


def _check_schema(conn: sqlite3.Connection, path: str) -> None:
    for table, columns in REQUIRED_COLUMNS.items():
        present = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}
        if not present:
            raise AetnamemImportError(
                f"{path} is not an {SOURCE_FORMAT} database: it has no {table} table"
            )
        missing = [column for column in columns if column not in present]
        if missing:
            raise AetnamemImportError(
                f"{path} is not an {SOURCE_FORMAT} database: {table} lacks "
                f"{', '.join(missing)} (another schema version)"
            )


def _verify_chains(conn: sqlite3.Connection, subjects: dict[str, SourceSubject]) -> None:
    """aetnamem's chain rule, per subject, in sequence order."""
    columns = ", ".join(REQUIRED_COLUMNS["audit_log"])
    for row in conn.execute(f"SELECT {columns} FROM audit_log ORDER BY sequence"):  # noqa: S608
        chain = subjects[str(row["subject_id"])].chain
        chain.events += 1
        if chain.broken_at is None:
            try:
                preimage = {name: row[name] for name in _PREIMAGE}
                preimage["payload"] = json.loads(row["payload"] or "{}")
                preimage["prev_hash"] = chain.head_hash
                recomputed = _sha256_canonical(preimage)
            except (TypeError, ValueError):
                recomputed = None
            if row["prev_hash"] != chain.head_hash or row["event_hash"] != recomputed:
                chain.broken_at = int(row["sequence"])
        chain.head_sequence, chain.head_hash = int(row["sequence"]), str(row["event_hash"])


def read_source(path: str) -> dict[str, SourceSubject]:
    """Every subject of the aetnamem file at ``path``: episodes, records, chain (verified)."""
    conn = _open(path)
    try:
        _check_schema(conn, path)
        subjects: dict[str, SourceSubject] = defaultdict(SourceSubject)
        for row in conn.execute("SELECT * FROM episodes ORDER BY created_at, rowid"):
            subjects[str(row["subject_id"])].episodes.append(dict(row))
        for row in conn.execute("SELECT * FROM records ORDER BY created_at, rowid"):
            subjects[str(row["subject_id"])].records.append(dict(row))
        for (subject_id,) in conn.execute("SELECT DISTINCT subject_id FROM audit_log"):
            subjects.setdefault(str(subject_id), SourceSubject())  # a subject with events only
        _verify_chains(conn, subjects)
    except sqlite3.DatabaseError as exc:
        raise AetnamemImportError(f"{path} cannot be read as {SOURCE_FORMAT}: {exc}") from exc
    finally:
        conn.close()
    return dict(subjects)


def _scopes(mapping: Mapping[str, str], subjects: Mapping[str, SourceSubject]) -> dict[str, Scope]:
    unmapped = sorted(set(subjects) - set(mapping))
    if unmapped:
        raise AetnamemImportError(
            f"no scope given for source subject(s) {', '.join(unmapped)}: add --map SUBJECT=SCOPE "
            "for each"
        )
    unknown = sorted(set(mapping) - set(subjects))
    if unknown:
        raise AetnamemImportError(
            f"the database holds no subject {', '.join(unknown)}: check the --map names"
        )
    scopes: dict[str, Scope] = {}
    for subject, raw in mapping.items():
        try:
            scope = Scope.parse(raw)
        except ScopeError as exc:
            raise AetnamemImportError(f"the scope for subject {subject} is invalid: {exc}") from exc
        if WILDCARD in (scope.user, scope.project):
            raise AetnamemImportError(
                f"the scope for subject {subject} must name one project, not {raw}"
            )
        scopes[subject] = scope
    return scopes


def import_aetnamem(
    *,
    path: str,
    mapping: Mapping[str, str],
    force: bool = False,
    principal: Principal,
    actor: str | None = None,
) -> AetnamemImportResult:
    """Move an aetnamem 0.2.1 file's subjects into the mapped scopes, all or nothing.

    Refuses (writing nothing) a file that is not one, a subject without a scope,
    and a source chain that does not verify unless ``force`` (then recorded).
    """
    subjects = read_source(path)
    if not subjects:
        raise AetnamemImportError(f"{path} holds no subject: nothing to import")
    scopes = _scopes(mapping, subjects)
    for scope in scopes.values():
        access.require(principal, access.WRITE, scope)
    broken = {s: c.chain.broken_at for s, c in subjects.items() if c.chain.broken_at is not None}
    if broken and not force:
        where = ", ".join(f"{s} at sequence {n}" for s, n in sorted(broken.items()))
        raise AetnamemImportError(
            f"the source audit chain does not verify ({where}); nothing was imported. "
            "Import it anyway only with --force (the import then records that it was forced)"
        )
    label = access.audit_actor(principal, actor, default="system")
    with transaction.atomic():
        imported = tuple(
            _import_subject(subject, subjects[subject], scopes[subject], label, force)
            for subject in sorted(subjects)
        )
    return AetnamemImportResult(str(path), force, imported)


def _reading(source_type: Any, trusted: bool) -> SourceReading:
    kind = str(source_type) if source_type in _KNOWN_SOURCE_TYPES else SourceType.TOOL_OUTPUT
    return SourceReading(kind, trusted, ())


def _import_episodes(
    source: SourceSubject, scope: Scope, actor: str, now: datetime
) -> dict[Any, Episode]:
    """Each source message as our episode (its digest chained), by source episode ID."""
    episodes = {}
    for row in source.episodes:
        trusted = row["source_type"] == SourceType.USER_MESSAGE
        episodes[row["id"]] = _ingest(
            scope,
            str(row["message"]),
            _reading(row["source_type"], trusted),
            session=str(row["session_id"] or ""),
            turn=str(row["turn_id"] or ""),
            actor=actor,
            trust_tier="trusted_user" if trusted else "untrusted_content",
            now=now,
        )
    return episodes


def _import_records(
    source: SourceSubject,
    scope: Scope,
    episodes: Mapping[Any, Episode],
    actor: str,
    now: datetime,
) -> tuple[int, int, int]:
    """Active and quarantined source records through the engine's write path.

    Returns (stored, duplicates, skipped): a trusted active record lands
    active, anything else quarantined for review, as the engine would have it.
    """
    tally: dict[str, int] = {}
    stored = duplicates = skipped = 0
    for row in source.records:
        if row["status"] not in (Status.ACTIVE, Status.QUARANTINED) or not row["content"]:
            skipped += 1
            continue
        trusted = row["status"] == Status.ACTIVE and row["trust_tier"] in _TRUSTED_TIERS
        confidence = row["confidence"] if isinstance(row["confidence"], int | float) else 1.0
        record, repeats = _store_candidate(
            scope=scope,
            candidate=Candidate(
                content=str(row["content"]),
                fact_key=str(row["fact_key"] or ""),
                confidence=float(confidence),
                rule="aetnamem_import",
            ),
            trusted=trusted,
            source_type=_reading(row["source_type"], trusted).source_type,
            episode=episodes.get(row["episode_id"]),
            session_id=str(row["source_session_id"] or ""),
            turn_id=str(row["source_turn_id"] or ""),
            actor=actor,
            now=now,
            tally=tally,
            # Provenance: where the record came from, committed in its creation event.
            extra_payload={"imported_from": SOURCE_FORMAT, "source_record_id": str(row["id"])},
            trust_tier=str(row["trust_tier"]) if trusted else "",
        )
        stored += record is not None
        duplicates += bool(repeats)
    _bump(scope, **tally)
    return stored, duplicates, skipped


def _import_subject(
    subject: str, source: SourceSubject, scope: Scope, actor: str, forced: bool
) -> SubjectImported:
    lock_subject(str(scope))
    now = timezone.now()
    episodes = _import_episodes(source, scope, actor, now)
    stored, duplicates, skipped = _import_records(source, scope, episodes, actor, now)
    chain = source.chain
    event = _audit(
        scope=scope,
        event_type=EVENT_TYPE,
        actor=actor,
        payload={
            "source_format": SOURCE_FORMAT,
            # The subject name may be a person's: only its digest enters our chain.
            "source_subject_sha256": hashlib.sha256(subject.encode("utf-8")).hexdigest(),
            "source_head_hash": chain.head_hash,
            "source_head_sequence": chain.head_sequence,
            "source_events": chain.events,
            "source_chain_verified": chain.broken_at is None,
            "forced": forced,
            "episodes": len(episodes),
            "records": stored,
            "duplicates": duplicates,
            "skipped_records": skipped,
        },
    )
    return SubjectImported(
        subject,
        str(scope),
        chain.head_hash,
        chain.head_sequence,
        chain.events,
        chain.broken_at is None,
        len(episodes),
        stored,
        duplicates,
        skipped,
        event.event_id,
    )
