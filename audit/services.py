"""Every write of the evidence layer: events, checkpoints, verification runs.

:func:`append_event` is the only way a row enters ``audit_log``. It must run
inside the caller's transaction, so a memory change and the event that
describes it commit together or not at all, and it serializes appends per
subject so that no two writers chain onto the same head:

- SQLite: the project opens every transaction with ``BEGIN IMMEDIATE``
  (settings), so the connection already holds the database write lock when it
  reads the head.
- PostgreSQL: a transaction-scoped advisory lock keyed on the subject is taken
  before the head is read and released at commit or rollback.

Every event is also the next leaf of the global Merkle log (:mod:`audit.tree`):
its row fixes the leaf, and the leaf and tree nodes are written in batches
(every ``tree.INTEGRATE_EVERY`` events, and before a checkpoint or a receipt's
proof). Leaf order is sequence order only because every append takes the
tree lock before its row gets a sequence. The tree is one for all subjects, so on PostgreSQL
the tree lock is taken first, before the subject lock: a transaction that
appends to several subjects then never holds a subject lock while waiting
for the tree (no lock-order deadlock).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import SYSTEM, Principal
from aetnaweb.limits import MAX_CONTEXT_CHARS
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import storable_text_arguments
from audit.canonical import CanonicalJSONError, canonical_json, check_round_trip
from audit.chain import EVENT_TYPE_RE, compute_event_hash, new_event_id, utc_now_iso
from audit.checkpoints import CheckpointError, build_checkpoint_document

# Re-exported: memory.services.host_hooks imports it from here (moves with the next session).
from audit.errors import AuditError as AuditError
from audit.models import AuditEvent, AuditSubject, Checkpoint, VerificationRun
from audit.subscribers import announce, announce_failed_run
from audit.tree import TREE_LOCK_KEY, after_append, lock_tree
from audit.verification import VerificationReport, verify_all, verify_subjects

logger = logging.getLogger(__name__)


MAX_CONTEXT_LENGTH = MAX_CONTEXT_CHARS  # one bound for session/turn IDs in every app
MAX_ACTOR_LENGTH = 150
MAX_EVENT_TYPE_LENGTH = 100

# The chain head and the Merkle log's newest leaf in one round trip (index
# seeks only): the append decides from the latter whether a batch is due.
# While the tree is empty, events count from the oldest one, so the decision
# is the same on a fresh database and on one whose sequences start high.
_HEAD_SQL = (
    "SELECT (SELECT event_hash FROM audit_log WHERE subject_id = %s"
    " ORDER BY sequence DESC LIMIT 1),"
    " COALESCE((SELECT MAX(sequence) FROM audit_tree_leaf),"
    " (SELECT MIN(sequence) - 1 FROM audit_log))"
)
_PREIMAGE_COLUMNS = (
    "event_id",
    "subject_id",
    "event_type",
    "created_at",
    "actor",
    "session_id",
    "turn_id",
    "record_id",
    "prev_hash",
)
_INSERT_COLUMNS = (*_PREIMAGE_COLUMNS[:-1], "payload", "prev_hash", "event_hash")
_INSERT_SQL = (
    f"INSERT INTO audit_log ({', '.join(_INSERT_COLUMNS)})"  # noqa: S608  (constant column names)
    f" VALUES ({', '.join(['%s'] * len(_INSERT_COLUMNS))}) RETURNING sequence"
)
# ON CONFLICT ... DO UPDATE reads the same on SQLite (3.24+) and PostgreSQL.
# No race on the conflict: the subject lock is already held. The new head's
# sequence is the last value (PostgreSQL takes it from the event's RETURNING).
_SUBJECT_COLUMNS = (
    ' (subject_id, tenant, "user", project, head_hash, last_event_at, event_count, head_sequence)'
)
_SUBJECT_ON_CONFLICT = (
    " ON CONFLICT (subject_id) DO UPDATE SET"
    " event_count = audit_subject.event_count + 1,"
    " head_sequence = excluded.head_sequence, head_hash = excluded.head_hash,"
    " last_event_at = excluded.last_event_at"
)
_SUBJECT_UPSERT_SQL = (
    f"INSERT INTO audit_subject{_SUBJECT_COLUMNS}"  # noqa: S608  (constant SQL)
    f" VALUES (%s, %s, %s, %s, %s, %s, 1, %s){_SUBJECT_ON_CONFLICT}"
)
_DAILY_UPSERT_SQL = (
    "INSERT INTO audit_daily_count (subject_id, day, event_count)"
    " VALUES (%s, %s, 1)"
    " ON CONFLICT (subject_id, day) DO UPDATE SET"
    " event_count = audit_daily_count.event_count + 1"
)

_TYPE_UPSERT_SQL = (
    "INSERT INTO audit_type_count (subject_id, event_type, event_count)"
    " VALUES (%s, %s, 1)"
    " ON CONFLICT (subject_id, event_type) DO UPDATE SET"
    " event_count = audit_type_count.event_count + 1"
)

# PostgreSQL: the event and its three counters in one round trip.
# Data-modifying WITH clauses all run, once each, whether or not the main
# statement reads them; a failure of any one fails the whole statement.
_APPEND_PG = (
    f"WITH event AS ({_INSERT_SQL}),"  # noqa: S608  (constant SQL)
    f" subject AS (INSERT INTO audit_subject{_SUBJECT_COLUMNS}"
    f" SELECT %s, %s, %s, %s, %s, %s, 1, sequence FROM event{_SUBJECT_ON_CONFLICT}),"
    f" daily AS ({_DAILY_UPSERT_SQL}), by_type AS ({_TYPE_UPSERT_SQL})"
    " SELECT sequence FROM event"
)


def subject_lock_key(subject_id: str) -> int:
    """A signed 64-bit key for ``pg_advisory_xact_lock``, stable across processes."""
    raw = hashlib.sha256(b"aetnaweb-audit:" + subject_id.encode("utf-8")).digest()[:8]
    return int.from_bytes(raw, "big", signed=True)


class HeldLocks:
    """A commit hook that does nothing: its presence says the locks taken with it are still held.

    Django keeps an ``on_commit`` callback exactly as long as the locks taken
    just before it registered: it runs and drops every callback at COMMIT,
    drops them all at ROLLBACK, and drops those registered inside a savepoint
    when that savepoint is rolled back, which is also when PostgreSQL releases
    the transaction-level locks taken inside it.

    One registered after an append also carries the subject's new head (the
    event's hash) and the newest leaf's sequence as the append left them, so
    the transaction's next append to that subject need not read them again
    (:func:`_known_head`). That is exact for as long as the hook lives: every
    append holds the subject's lock (on SQLite the database's write lock)
    until its transaction ends, so no other transaction can move that head,
    and a rolled-back savepoint takes its rows and its hooks away together.
    """

    __slots__ = ("head", "last_leaf_sequence", "subject_id")

    def __init__(
        self,
        subject_id: str,
        *,
        head: str | None = None,
        last_leaf_sequence: int | None = None,
    ) -> None:
        self.subject_id = subject_id
        self.head = head
        self.last_leaf_sequence = last_leaf_sequence

    def __call__(self) -> None:
        return None


def _still_held(subject_id: str) -> bool:
    # Each entry is (savepoint IDs, callback, robust): the callback is second.
    return any(
        isinstance(entry[1], HeldLocks) and entry[1].subject_id == subject_id
        for entry in connection.run_on_commit
    )


# How far back in the transaction's commit hooks a head is looked for: a
# bounded look keeps a transaction that appends to thousands of subjects linear;
# a head further back is read from the database again, as if never seen.
KNOWN_HEAD_WINDOW = 64


def _known_head(subject_id: str) -> tuple[str, int | None] | None:
    """(head hash, newest leaf's sequence) as this transaction's last appends left them.

    ``None`` if none of the transaction's recent appends (the last
    :data:`KNOWN_HEAD_WINDOW` commit hooks) was to ``subject_id``. The newest
    leaf is the log's, not the subject's, so it comes from the newest append
    to any subject: each append's value is at least its predecessor's, and a
    rolled-back savepoint drops only hooks newer than those it leaves. (The
    tree lock, or SQLite's write lock, keeps other transactions from adding
    leaves meanwhile; a leaf added on demand since, by a checkpoint's
    integration, only makes :func:`audit.tree.after_append` integrate sooner.)
    """
    newest: HeldLocks | None = None
    for entry in reversed(connection.run_on_commit[-KNOWN_HEAD_WINDOW:]):
        hook = entry[1]
        if isinstance(hook, HeldLocks) and hook.head is not None:
            newest = newest or hook
            if hook.subject_id == subject_id:
                return hook.head, newest.last_leaf_sequence
    return None


def lock_subject(subject_id: str) -> None:
    """Serialize appends to one subject until the current transaction ends.

    On PostgreSQL the Merkle log's lock is taken first, always: a workflow that
    locks its subject early and appends later would otherwise hold the subject
    and wait for the tree while an append elsewhere holds the tree and waits for
    the subject (a deadlock). One order, tree then subjects, rules that out.

    A transaction that already holds both (a remember locks its scope, then
    appends two events to it) does not ask again: each ask is a round trip
    (:class:`HeldLocks` says when the earlier locks are still held).
    """
    if connection.vendor == "postgresql":
        if connection.in_atomic_block and _still_held(subject_id):
            return
        # One round trip for both: PostgreSQL evaluates a select list left to
        # right, so the tree's lock is still taken (and waited for) first.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s), pg_advisory_xact_lock(%s)",
                [TREE_LOCK_KEY, subject_lock_key(subject_id)],
            )
        if connection.in_atomic_block:
            transaction.on_commit(HeldLocks(subject_id))
    # SQLite: BEGIN IMMEDIATE already holds the single database write lock.


def _check_context(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_CONTEXT_LENGTH:
        raise AuditError(
            f"{name} must be a non-empty string of at most {MAX_CONTEXT_LENGTH} characters"
        )
    return value


@dataclass(frozen=True)
class _EventInput:
    """An append's arguments once every one of them passed its check."""

    scope: Scope
    subject_id: str
    event_type: str
    actor: str
    payload: dict[str, Any]
    payload_text: str
    session_id: str | None
    turn_id: str | None
    record_id: str | None


def _check_event_type(event_type: Any) -> str:
    if (
        not isinstance(event_type, str)
        or len(event_type) > MAX_EVENT_TYPE_LENGTH
        or not EVENT_TYPE_RE.fullmatch(event_type)
    ):
        raise AuditError(
            f"invalid event type {event_type!r}: expected dotted lower-case words "
            f"of at most {MAX_EVENT_TYPE_LENGTH} characters",
            field="event_type",
        )
    return event_type


def _checked_input(
    subject: Scope | str,
    event_type: str,
    actor: str,
    payload: dict[str, Any],
    context: tuple[str | None, str | None, str | None],
) -> _EventInput:
    """Every argument of an append checked, before any lock is taken or row written."""
    try:
        scope = Scope.parse(subject)
    except ScopeError as exc:
        raise AuditError(f"audit subject refused: {exc}") from exc
    _check_event_type(event_type)
    _check_actor(actor)
    if not isinstance(payload, dict):
        raise AuditError("an audit payload must be a JSON object", field="payload")
    try:
        payload_text = check_round_trip(payload)
    except CanonicalJSONError as exc:
        raise AuditError(f"audit payload refused: {exc}", field="payload") from exc
    session_id, turn_id, record_id = context
    return _EventInput(
        scope=scope,
        subject_id=str(scope),
        event_type=event_type,
        actor=actor,
        payload=payload,
        payload_text=payload_text,
        session_id=_check_context("session_id", session_id),
        turn_id=_check_context("turn_id", turn_id),
        record_id=_check_context("record_id", record_id),
    )


def _insert_event(cursor: Any, event: _EventInput) -> tuple[AuditEvent, int | None]:
    """Chain the event onto its subject's head, insert it and count it; (the row, the newest leaf's sequence).

    Raw SQL on the hot path: the ORM's query building cost more than the
    database work (audit append is on every memory write). Counting is the
    dashboard's bookkeeping: the subject index and the day's and the type's
    counters.
    """
    known = _known_head(event.subject_id)
    if known is None:
        cursor.execute(_HEAD_SQL, [event.subject_id])
        head, last_leaf_sequence = cursor.fetchone()
    else:
        head, last_leaf_sequence = known
    row = AuditEvent(
        event_id=new_event_id(),
        subject_id=event.subject_id,
        event_type=event.event_type,
        created_at=utc_now_iso(),
        actor=event.actor,
        session_id=event.session_id,
        turn_id=event.turn_id,
        record_id=event.record_id,
        payload=event.payload_text,
        prev_hash=head,
    )
    row.event_hash = compute_event_hash(
        **{name: getattr(row, name) for name in _PREIMAGE_COLUMNS}, payload=event.payload
    )
    scope = event.scope
    values = [getattr(row, name) for name in _INSERT_COLUMNS]
    subject = [
        row.subject_id,
        scope.tenant,
        scope.user,
        scope.project,
        row.event_hash,
        row.created_at,
    ]
    daily = [
        row.subject_id,
        connection.ops.adapt_datefield_value(date.fromisoformat(row.created_at[:10])),
    ]
    by_type = [row.subject_id, row.event_type]
    if connection.vendor == "postgresql":
        cursor.execute(_APPEND_PG, [*values, *subject, *daily, *by_type])
        row.sequence = cursor.fetchone()[0]
    else:
        cursor.execute(_INSERT_SQL, values)
        row.sequence = cursor.fetchone()[0]
        cursor.execute(_SUBJECT_UPSERT_SQL, [*subject, row.sequence])
        cursor.execute(_DAILY_UPSERT_SQL, daily)
        cursor.execute(_TYPE_UPSERT_SQL, by_type)
    return row, last_leaf_sequence


@storable_text_arguments
def append_event(
    *,
    subject: Scope | str,
    event_type: str,
    actor: str,
    payload: dict[str, Any],
    session_id: str | None = None,
    turn_id: str | None = None,
    record_id: str | None = None,
) -> AuditEvent:
    """Append one event to ``subject``'s chain inside the caller's transaction.

    Payloads hold digests, IDs and structure, never content (audit-log-v1
    "What payloads may contain"); that is the caller's duty. The event joins
    the Merkle log with the next batch (:func:`audit.tree.after_append`).
    """
    if not transaction.get_connection().in_atomic_block:
        raise AuditError("append_event must be called inside the caller's transaction.atomic()")
    event = _checked_input(subject, event_type, actor, payload, (session_id, turn_id, record_id))
    # Tree lock first, then the subject's (lock_subject takes both, in that order).
    lock_subject(event.subject_id)
    with connection.cursor() as cursor:
        row, last_leaf_sequence = _insert_event(cursor, event)
        if after_append(cursor, sequence=row.sequence, last_leaf_sequence=last_leaf_sequence):
            last_leaf_sequence = row.sequence  # every event up to this one is a leaf now
        elif last_leaf_sequence is None:  # the log's first event: what _HEAD_SQL says now
            last_leaf_sequence = row.sequence - 1
    # The next append to this subject in this transaction chains on without a read.
    transaction.on_commit(
        HeldLocks(event.subject_id, head=row.event_hash, last_leaf_sequence=last_leaf_sequence)
    )
    announce(row)  # after commit, to whoever subscribed to this type (webhooks)
    return row


AGENT_EVENT_PREFIX = "agent."
# Where caller-described events live: the engine itself never writes a type
# under it, so nothing an agent logs can read as an engine event (a capture's
# agent.tool_call, a memory.forget). Callers may give the short form.
AGENT_LOG_PREFIX = "agent.log."
# Payload keys that belong to deletion evidence (receipts and the purge events
# they bind to). An agent event carrying them would look like a purge to a
# reader or a careless verifier, so they are refused at any depth.
RECEIPT_MIMIC_KEYS = frozenset(
    {
        "purged_record_ids",
        "purged_episode_ids",
        "selector_sha256",
        "utterance_sha256",
        "receipt_sha256",
        "audit_event_hash",
    }
)
EVIDENCE_FORMAT_PREFIXES = ("aetnamem-", "aetna-")


def agent_log_event_type(event_type: Any) -> str:
    """``agent.x`` -> ``agent.log.x`` (already namespaced types are kept); refuses the rest."""
    if not isinstance(event_type, str) or not event_type.startswith(AGENT_EVENT_PREFIX):
        raise AuditError(
            f"event type {event_type!r} refused: only agent.* events may be logged "
            "(e.g. agent.file_written)",
            field="event_type",
        )
    if event_type.startswith(AGENT_LOG_PREFIX):
        return event_type
    return AGENT_LOG_PREFIX + event_type.removeprefix(AGENT_EVENT_PREFIX)


def _receipt_mimic(value: Any, path: str = "payload") -> str | None:
    """Where in ``value`` a key of deletion evidence appears (``None``: nowhere)."""
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}"
            if key in RECEIPT_MIMIC_KEYS or (isinstance(key, str) and key.startswith("purged_")):
                return where
            if (
                key == "format"
                and isinstance(item, str)
                and item.startswith(EVIDENCE_FORMAT_PREFIXES)
            ):
                return f"{where} = {item!r}"
            found = _receipt_mimic(item, where)
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _receipt_mimic(item, f"{path}[{index}]")
            if found:
                return found
    return None


@storable_text_arguments
@transaction.atomic
def log_agent_event(
    *,
    subject: Scope | str,
    event_type: str,
    payload: dict[str, Any],
    principal: Principal,
    actor: str | None = None,
    session_id: str | None = None,
    turn_id: str | None = None,
    record_id: str | None = None,
) -> AuditEvent:
    """Append a caller-described event as ``agent.log.*``; every other event type is refused.

    Engine events (``memory.*``, ``action.*``, a capture's ``agent.*``) are
    written only by the engine that performs the change; an agent may only
    describe what it did, under ``agent.log.`` (``agent.x`` is stored as
    ``agent.log.x``), and never with the keys of deletion evidence. The
    payload is the caller's and must hold digests, not content.
    """
    stored_type = agent_log_event_type(event_type)
    mimic = _receipt_mimic(payload)
    if mimic:
        raise AuditError(
            f"{mimic} refused: that key belongs to deletion receipts and the purge events "
            "they bind to, which only the engine writes; forget through the memory engine "
            "to get a real receipt, or name the key differently",
            field="payload",
        )
    try:
        scope = Scope.parse(subject)
    except ScopeError as exc:
        raise AuditError(f"audit subject refused: {exc}") from exc
    access.require(principal, access.WRITE, scope)
    return append_event(
        subject=scope,
        event_type=stored_type,
        actor=access.audit_actor(principal, actor, default="agent"),
        payload=payload,
        session_id=session_id,
        turn_id=turn_id,
        record_id=record_id,
    )


def _check_actor(actor: Any) -> str:
    if not isinstance(actor, str) or not actor or len(actor) > MAX_ACTOR_LENGTH:
        raise AuditError(
            f"actor must be a non-empty string of at most {MAX_ACTOR_LENGTH} characters"
        )
    return actor


# -- checkpoints -----------------------------------------------------------------


def _auditable_subjects(principal: Principal) -> list[str] | None:
    """Subjects ``principal`` may audit; ``None`` means every subject."""
    if access.may(principal, access.AUDIT, Scope.platform()):
        return None
    if not access.has_capability_anywhere(principal, access.AUDIT):
        raise access.AccessDenied(f"{principal.label} may not audit anything")
    visible = access.scope_q(principal, access.AUDIT, canonical_field="subject_id")
    return list(AuditSubject.objects.filter(visible).values_list("subject_id", flat=True))


def _append_line(sink: Path, line: str) -> None:
    try:
        sink.parent.mkdir(parents=True, exist_ok=True)
        with sink.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise CheckpointError(f"cannot append the checkpoint to {sink}: {exc.strerror}") from exc


def create_checkpoint(
    *,
    principal: Principal,
    actor: str | None = None,
    sink: str | Path | None = None,
) -> dict[str, Any]:
    """Pin every chain ``principal`` may audit; store the document and append it to the sink.

    The line is appended before the row commits: a line without a row is still
    a true statement about the chains, while a row whose line never reached the
    sink would silently lose the copy kept outside the database.
    """
    if actor is not None:
        _check_actor(actor)  # a label the caller names is refused if malformed, never dropped
    actor = _check_actor(access.audit_actor(principal, actor))
    sink_path = Path(sink if sink is not None else settings.AETNAWEB_CHECKPOINT_SINK)
    with transaction.atomic():
        # No append between reading the heads and the log: one moment, one document.
        lock_tree()
        document = build_checkpoint_document(subject_ids=_auditable_subjects(principal))
        line = canonical_json(document)
        Checkpoint.objects.create(
            created_at=timezone.now(),
            created_by=actor,
            document=line,
            checkpoint_sha256=document["checkpoint_sha256"],
            subject_count=len(document["subjects"]),
            event_count=sum(entry["event_count"] for entry in document["subjects"].values()),
            sink=str(sink_path),
            tree_size=document["log"]["tree_size"],
            root_hash=document["log"]["root_hash"],
            note_signed="note" in document["log"],
        )
        _append_line(sink_path, line)
    return document


# -- verification runs -------------------------------------------------------------

PROGRESS_INTERVAL_SECONDS = 0.5
MAX_RECORDED_FAILURES = 100


@storable_text_arguments
@transaction.atomic
def start_verification_run(
    *,
    subject: Scope | str | None = None,
    principal: Principal,
    started_by: str | None = None,
) -> VerificationRun:
    """Record a run over ``subject``'s subtree (``None``: every chain) and start it after commit.

    The run is handed to the task queue once the transaction commits
    (:func:`audit.tasks.verify_run`, executed by ``manage.py db_worker``); poll
    the returned row (``status``, ``events_checked`` of ``total_events``).
    """
    if started_by is not None:
        _check_actor(started_by)  # a label the caller names is refused if malformed, never dropped
    started_by = _check_actor(access.audit_actor(principal, started_by))
    try:
        scope = Scope.parse(subject) if subject is not None else Scope.platform()
    except ScopeError as exc:
        raise AuditError(f"verification scope refused: {exc}") from exc
    access.require(principal, access.AUDIT, scope)
    # Summed by the database: one row back, whatever the number of chains.
    subjects = AuditSubject.objects.filter(**scope.subtree_filter())
    total = subjects.aggregate(total=Sum("event_count"))["total"] or 0
    now = timezone.now()
    run = VerificationRun.objects.create(
        scope=None if scope.is_platform else str(scope),
        tenant=None if scope.is_platform else scope.tenant,
        scope_depth=scope.depth,
        started_by=started_by,
        started_at=now,
        heartbeat_at=now,
        total_events=total,
    )
    transaction.on_commit(partial(_enqueue_run, run.pk))
    return run


def _enqueue_run(run_id: int) -> None:
    # Imported here: audit.tasks imports this module.
    from audit.tasks import verify_run

    try:
        verify_run.enqueue(run_id)
    except Exception:
        # The run row is committed; without a task it would read "running"
        # until it goes stale. Say at once that it never started.
        logger.exception("verification run %s could not be queued", run_id)
        VerificationRun.objects.filter(pk=run_id, status=VerificationRun.Status.RUNNING).update(
            status=VerificationRun.Status.ERROR,
            finished_at=timezone.now(),
            failures=[{"error": "verification could not be queued; is the task backend set up?"}],
        )


class _ProgressWriter:
    """Writes ``events_checked`` and a heartbeat at most every half second."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.last_write = time.monotonic()

    def __call__(self, events_checked: int) -> None:
        now = time.monotonic()
        if now - self.last_write < PROGRESS_INTERVAL_SECONDS:
            return
        self.last_write = now
        VerificationRun.objects.filter(pk=self.run_id).update(
            events_checked=events_checked, heartbeat_at=timezone.now()
        )


def _verify_run_scope(run: VerificationRun, progress: _ProgressWriter) -> VerificationReport:
    if run.scope is None:
        return verify_all(principal=SYSTEM, progress=progress)
    scope = Scope.parse(run.scope)
    subjects = AuditSubject.objects.filter(**scope.subtree_filter()).order_by("subject_id")
    return verify_subjects(
        subjects.values_list("subject_id", flat=True), principal=SYSTEM, progress=progress
    )


def run_verification(run_id: int) -> VerificationRun:
    """Execute a recorded run now, in this thread, and store its verdict.

    A run that raises is stored as ``error`` (it proves nothing either way)
    and the exception propagates.
    """
    run = VerificationRun.objects.get(pk=run_id)
    if not run.is_running:
        raise AuditError(f"verification run {run_id} has already finished ({run.status})")
    # The first heartbeat says a worker picked the run up (the page stops
    # showing "waiting for a task worker").
    VerificationRun.objects.filter(pk=run_id).update(heartbeat_at=timezone.now())
    try:
        report = _verify_run_scope(run, _ProgressWriter(run_id))
    except Exception as exc:
        VerificationRun.objects.filter(pk=run_id).update(
            status=VerificationRun.Status.ERROR,
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
            failures=[{"error": f"verification did not finish: {type(exc).__name__}"}],
        )
        raise
    failed = report.failed
    now = timezone.now()
    VerificationRun.objects.filter(pk=run_id).update(
        status=VerificationRun.Status.PASSED if report.ok else VerificationRun.Status.FAILED,
        finished_at=now,
        heartbeat_at=now,
        subjects_checked=len(report.subjects),
        events_checked=report.events_checked,
        first_bad_sequence=report.first_bad_sequence,
        failures=[subject.as_dict() for subject in failed[:MAX_RECORDED_FAILURES]],
    )
    logger.info(
        "verification run %s: %s chains, %s events, %s failed",
        run_id,
        len(report.subjects),
        report.events_checked,
        len(failed),
    )
    run.refresh_from_db()
    if run.status == VerificationRun.Status.FAILED:
        announce_failed_run(run)
    return run
