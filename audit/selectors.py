"""Every read of the evidence layer, with visibility built in.

``audit_log`` stores only the canonical ``subject_id`` (its columns are fixed
by audit-log-v1), so visibility is computed on the small subject index
(:class:`~audit.models.AuditSubject`, one row per chain, with tenant/user/project
columns that :func:`aetnaweb.access.scope_q` filters) and applied to events as
an exact ``subject_id IN (...)``: a literal list for a few hundred chains, a
subquery on the subject index beyond (see :func:`visible_subject_ids`), so the
cost never grows with every chain in the database and no parameter limit is
reached. A principal whose grants reach every chain (a grant on
``platform:*:*``, or the system principal) gets no subject filter at all.
Every event that comes back is re-checked with :func:`aetnaweb.access.may`
before use (scopes.md: a row failing that check is dropped, and that must be
unreachable); daily counts, which have no rows to re-check, only count
subject-index rows whose canonical string is their columns joined.

Lists page by key, newest first (``sequence < before``, ``limit + 1`` rows to
know whether an older page exists): never OFFSET, never ``COUNT(*)`` over
``audit_log``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Concat, Substr, Upper

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.errors import DomainError
from aetnaweb.scopes import PLATFORM, Scope, ScopeError
from audit import notes
from audit.canonical import canonical_json
from audit.checkpoints import CHECKPOINT_FORMAT, CheckpointError, LogHead, prove_consistency
from audit.models import (
    AuditDailyCount,
    AuditEvent,
    AuditSubject,
    AuditTypeCount,
    Checkpoint,
    VerificationRun,
)
from audit.verification import COLUMNS

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
EXPORT_CHUNK = 2_000
SUBJECT_COLUMN = COLUMNS.index("subject_id")
# ``AuditSubject.objects....values("subject_id")``: a subquery for ``subject_id__in``
SubjectIds = QuerySet[Any, Any]
SUBJECT_CHUNK = 500  # subjects per query when a caller names them (parameter limits)
SUBJECT_LIST_MAX = 500  # visible chains passed as a literal list; more, as a subquery


class AuditQueryError(DomainError, ValueError):
    """A filter that cannot be applied (a malformed scope, a bad limit or date)."""

    code = "invalid_audit_query"
    status = 400
    meaning = "an audit listing filter or cursor is not valid"


@dataclass(frozen=True)
class EventPage:
    """One page of events, newest first; ``next_before`` fetches the older page."""

    events: list[AuditEvent]
    next_before: int | None

    @property
    def has_next(self) -> bool:
        return self.next_before is not None


def readable(principal: Principal, subject_id: str, capability: str = access.READ) -> bool:
    """May ``principal`` use ``capability`` on this chain? The per-row re-check of every read.

    A malformed subject (tampering) lies in no subtree: only those who see
    every chain (the system principal, a grant on platform:*:*) see it.
    """
    try:
        return access.may(principal, capability, subject_id)
    except ScopeError:
        return sees_every_chain(principal, capability)


def sees_every_chain(principal: Principal, capability: str = access.READ) -> bool:
    """True when ``principal``'s grants reach every chain for ``capability`` (no filter needed)."""
    return principal.is_system or not access.scope_q(principal, capability)


def _parse(raw: Scope | str, what: str) -> Scope:
    try:
        return Scope.parse(raw)
    except ScopeError as exc:
        raise AuditQueryError(f"{what}: {exc}") from exc


def subjects_visible(
    principal: Principal, capability: str = access.READ, *, within: Scope | str | None = None
) -> list[str]:
    """Chains ``principal`` may use ``capability`` on (optionally inside ``within``), sorted."""
    rows = AuditSubject.objects.filter(
        access.scope_q(principal, capability, canonical_field="subject_id")
    )
    if within is not None:
        rows = rows.filter(**_parse(within, "scope").subtree_filter())
    subjects = rows.order_by("subject_id").values_list("subject_id", flat=True)
    if sees_every_chain(principal, capability):  # the re-check would keep every one
        return list(subjects)
    return [subject for subject in subjects if readable(principal, subject, capability)]


def _subject_rows(
    principal: Principal, capability: str, within: Scope | str | None
) -> QuerySet[AuditSubject] | None:
    """Subject-index rows ``principal`` may use ``capability`` on (inside ``within``);
    ``None`` when nothing narrows them (every chain)."""
    reach = access.scope_q(principal, capability, canonical_field="subject_id")
    area = _parse(within, "scope").subtree_filter() if within is not None else {}
    if not reach and not area:  # an empty Q: the system principal or a platform grant
        return None
    return AuditSubject.objects.filter(reach, **area).order_by()


def _consistent(rows: SubjectIds) -> SubjectIds:
    """Only index rows whose canonical string is their columns joined (a tampered row,
    relabelled with another tenant's columns, cannot widen a grant)."""
    return rows.alias(columns=Concat("tenant", Value(":"), "user", Value(":"), "project")).filter(
        subject_id=F("columns")
    )


def visible_subject_ids(
    principal: Principal, capability: str = access.READ, *, within: Scope | str | None = None
) -> list[str] | SubjectIds | None:
    """The chains ``principal`` may use ``capability`` on (inside ``within``), for
    ``subject_id__in=...``.

    ``None`` means every chain: no filter is needed (the system principal or a
    grant on ``platform:*:*``, and no ``within``). Up to ``SUBJECT_LIST_MAX``
    chains come back as a sorted list of literal values, checked against their
    columns: planners weigh a literal list value by value, so a busy chain's
    newest events are found by walking the sequence backwards instead of
    sorting all of them (a subquery made PostgreSQL sort 100,000 events of the
    benchmark's hot user for a page of 50). Beyond that, a subquery on the
    subject index: its size and cost do not grow with the number of chains,
    and no parameter limit is reached. Callers that return rows re-check each
    row with :func:`aetnaweb.access.may`; :func:`daily_counts`, which returns
    sums, adds the column check to the subquery itself.
    """
    rows = _subject_rows(principal, capability, within)
    if rows is None:
        return None
    first = list(
        rows.values_list("subject_id", "tenant", "user", "project")[: SUBJECT_LIST_MAX + 1]
    )
    if len(first) <= SUBJECT_LIST_MAX:
        return sorted(
            subject for subject, tenant, user, project in first
            if subject == f"{tenant}:{user}:{project}"
        )  # fmt: skip
    return rows.values("subject_id")


def _event_subjects(
    principal: Principal,
    capability: str,
    *,
    subject: Scope | str | None,
    within: Scope | str | None,
) -> list[str] | SubjectIds | None:
    """The subject filter for an event query; ``None`` means no filter (every chain)."""
    if subject is not None:
        subject_id = str(_parse(subject, "subject"))
        access.require(principal, capability, subject_id)
        return [subject_id]
    if not access.has_capability_anywhere(principal, capability):
        return []
    return visible_subject_ids(principal, capability, within=within)


def _iso_bound(value: datetime | str | None, what: str) -> str | None:
    """An ISO-8601 UTC string comparable with ``created_at`` as stored."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise AuditQueryError(f"{what} is not an ISO-8601 date or time: {value!r}") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def list_events(
    principal: Principal,
    *,
    subject: Scope | str | None = None,
    within: Scope | str | None = None,
    event_type: str | None = None,
    actor: str | None = None,
    session_id: str | None = None,
    record_id: str | None = None,
    created_from: datetime | str | None = None,
    created_before: datetime | str | None = None,
    before: int | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
) -> EventPage:
    """One page of visible events, newest first.

    ``subject`` is one exact chain; ``within`` is a scope's subtree (the
    chains at it and below). ``created_from`` is inclusive, ``created_before``
    exclusive. Pass the page's ``next_before`` as ``before`` for the next page.
    """
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise AuditQueryError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
    subjects = _event_subjects(principal, access.READ, subject=subject, within=within)
    if isinstance(subjects, list) and not subjects:
        return EventPage(events=[], next_before=None)
    events = AuditEvent.objects.all()
    if subjects is not None:
        events = events.filter(subject_id__in=subjects)
    if event_type:
        events = events.filter(event_type=event_type)
    if actor:
        # Case-insensitive ("Rita" finds "rita"), on the UPPER(actor) index.
        events = events.alias(actor_upper=Upper("actor")).filter(actor_upper=actor.upper())
    for name, value in (("session_id", session_id), ("record_id", record_id)):
        if value:
            events = events.filter(**_id_match(name, value))
    lower = _iso_bound(created_from, "created_from")
    upper = _iso_bound(created_before, "created_before")
    if lower is not None:
        events = events.filter(created_at__gte=lower)
    if upper is not None:
        events = events.filter(created_at__lt=upper)
    if before is not None:
        events = events.filter(sequence__lt=before)
    rows = list(events.order_by("-sequence")[: limit + 1])
    rows = [row for row in rows if readable(principal, row.subject_id, access.READ)]
    if len(rows) > limit:
        return EventPage(events=rows[:limit], next_before=rows[limit - 1].sequence)
    return EventPage(events=rows, next_before=None)


FULL_ID_RE = re.compile(r"(?:aud|mem|act|ret|ep)_[0-9a-f]{32}")


def _id_match(field: str, value: str) -> dict[str, str]:
    """A whole ID matches exactly (on its index); anything shorter is a prefix.

    Prefixes ignore case on both databases (a plain LIKE would fold case on
    SQLite and not on PostgreSQL): IDs are lower-case hex, and people type
    them from screenshots and tickets.
    """
    if FULL_ID_RE.fullmatch(value):
        return {field: value}
    return {f"{field}__istartswith": value}


def get_event(principal: Principal, event_id: str) -> AuditEvent:
    """One event by ``aud_`` ID; missing or invisible is ``AuditEvent.DoesNotExist`` (a 404)."""
    event = AuditEvent.objects.get(event_id=event_id)
    if not readable(principal, event.subject_id, access.READ):
        raise AuditEvent.DoesNotExist(f"no audit event {event_id}")
    return event


def events_by_id_prefix(principal: Principal, prefix: str, *, limit: int = 20) -> list[AuditEvent]:
    """Events whose ``event_id`` starts with ``prefix`` (a whole ID: exactly it), readable only."""
    rows = AuditEvent.objects.all()
    rows = (
        rows.filter(event_id=prefix)
        if len(prefix) == 36
        else rows.filter(event_id__startswith=prefix)
    )
    subjects = visible_subject_ids(principal)
    if isinstance(subjects, list) and not subjects:
        return []
    if subjects is not None:
        rows = rows.filter(subject_id__in=subjects)
    found = rows.order_by("event_id")[:limit]
    return [row for row in found if readable(principal, row.subject_id)]


def scopes_matching(principal: Principal, text: str, *, limit: int = 20) -> list[str]:
    """Scopes (chains) the principal may read whose tenant or user name contains ``text``.

    Read from the subject index (one row per scope that has ever had an
    event), case-insensitively, sorted; each is re-checked with
    :func:`aetnaweb.access.may`.
    """
    if not text or not access.has_capability_anywhere(principal, access.READ):
        return []
    rows = (
        AuditSubject.objects.filter(
            access.scope_q(principal, access.READ, canonical_field="subject_id")
        )
        .filter(Q(tenant__icontains=text) | Q(user__icontains=text))
        .order_by("subject_id")
        .values_list("subject_id", flat=True)[: limit * 2]
    )
    return [subject for subject in rows if readable(principal, subject)][:limit]


def events_for_record(
    principal: Principal, record_id: str, *, limit: int = 200
) -> list[AuditEvent]:
    """A record's history across the chains ``principal`` may read, oldest first."""
    rows = AuditEvent.objects.filter(record_id=record_id).order_by("sequence")[:limit]
    return [row for row in rows if readable(principal, row.subject_id, access.READ)]


def chain_events(
    principal: Principal, subject: Scope | str, *, after: int = 0, limit: int = 1000
) -> list[AuditEvent]:
    """One chain in order, from sequence ``after`` (exclusive), for reading it end to end."""
    subject_id = str(_parse(subject, "subject"))
    access.require(principal, access.READ, subject_id)
    rows = AuditEvent.objects.filter(subject_id=subject_id, sequence__gt=after)
    return list(rows.order_by("sequence")[:limit])


def daily_counts(
    principal: Principal,
    *,
    subjects: Iterable[str] | None = None,
    days: int = 30,
    today: date | None = None,
) -> list[tuple[date, int]]:
    """Events per UTC day for the last ``days`` days (oldest first, zeros included).

    Read from the per-subject daily counters ``append_event`` keeps, so the
    cost is bounded by subjects x days, whatever the size of ``audit_log``.
    Visibility is a subquery on the subject index (none for a principal who
    sees every chain), so any number of chains works; ``subjects`` narrows
    further and may be as long as you like (it is asked in chunks).
    """
    today = today or datetime.now(UTC).date()
    first = today - timedelta(days=days - 1)
    window = [first + timedelta(days=n) for n in range(days)]
    if not access.has_capability_anywhere(principal, access.READ):
        return [(day, 0) for day in window]
    rows = AuditDailyCount.objects.filter(day__gte=first, day__lte=today)
    visible = visible_subject_ids(principal)
    if isinstance(visible, list):
        rows = rows.filter(subject_id__in=visible)
    elif visible is not None:  # many chains: a sum has no row to re-check, so check columns
        rows = rows.filter(subject_id__in=_consistent(visible))
    totals: dict[date, int] = defaultdict(int)
    if subjects is None:
        chunks: list[QuerySet[AuditDailyCount]] = [rows]
    else:
        wanted = sorted(set(subjects))
        chunks = [
            rows.filter(subject_id__in=wanted[start : start + SUBJECT_CHUNK])
            for start in range(0, len(wanted), SUBJECT_CHUNK)
        ]
    for chunk in chunks:
        per_day = chunk.order_by().values("day").annotate(total=Sum("event_count"))
        for day, total in per_day.values_list("day", "total"):
            totals[day] += int(total or 0)
    return [(day, totals.get(day, 0)) for day in window]


def event_type_counts(principal: Principal) -> dict[str, int]:
    """Events per type over every chain ``principal`` may read (no scan of ``audit_log``).

    Read from the per-subject type counters ``append_event`` keeps; like
    :func:`daily_counts`, a sum has no row to re-check, so many chains are
    filtered with the column check.
    """
    if not access.has_capability_anywhere(principal, access.READ):
        return {}
    rows = AuditTypeCount.objects.all()
    visible = visible_subject_ids(principal)
    if isinstance(visible, list):
        rows = rows.filter(subject_id__in=visible)
    elif visible is not None:
        rows = rows.filter(subject_id__in=_consistent(visible))
    per_type = rows.order_by().values("event_type").annotate(total=Sum("event_count"))
    return {
        event_type: int(total or 0)
        for event_type, total in per_type.values_list("event_type", "total")
    }


def export_lines(principal: Principal, *, subject: Scope | str | None = None) -> Iterator[str]:
    """JSON Lines of one chain's (or every auditable chain's) rows, by ascending sequence.

    Each line is the canonical JSON of the row's columns, ``payload`` as the
    stored text. Access is checked now, before the first line; rows are then
    read in keyset chunks up to the current newest event, so memory stays
    constant and the iterator suits ``StreamingHttpResponse``.
    """
    if subject is None and access.may(principal, access.AUDIT, Scope.platform()):
        subjects = None
    else:
        subjects = _event_subjects(principal, access.AUDIT, subject=subject, within=None)
    horizon = AuditEvent.objects.order_by("-sequence").values_list("sequence", flat=True).first()
    return _export_rows(principal, subjects, horizon or 0)


def _export_rows(
    principal: Principal,
    subjects: list[str] | SubjectIds | None,
    horizon: int,
) -> Iterator[str]:
    if isinstance(subjects, list) and not subjects:
        return
    rows = AuditEvent.objects.filter(sequence__lte=horizon).order_by("sequence")
    if subjects is not None:
        rows = rows.filter(subject_id__in=subjects)
    auditable: dict[str, bool] = {}  # the per-row re-check, once per chain
    last = 0
    while True:
        chunk = list(rows.filter(sequence__gt=last).values_list(*COLUMNS)[:EXPORT_CHUNK])
        for values in chunk:
            subject_id = values[SUBJECT_COLUMN]
            if subject_id not in auditable:
                auditable[subject_id] = readable(principal, subject_id, access.AUDIT)
            if auditable[subject_id]:
                yield canonical_json(dict(zip(COLUMNS, values, strict=True))) + "\n"
        if len(chunk) < EXPORT_CHUNK:
            return
        last = chunk[-1][0]


# -- verification runs and checkpoints -----------------------------------------------------


def _run_scope(run: VerificationRun) -> str:
    return run.scope or str(Scope.platform())


def get_verification_run(principal: Principal, run_id: int) -> VerificationRun:
    """A run ``principal`` may audit (its scope, or every chain); else ``DoesNotExist``."""
    run = VerificationRun.objects.get(pk=run_id)
    if not readable(principal, _run_scope(run), access.AUDIT):
        raise VerificationRun.DoesNotExist(f"no verification run {run_id}")
    return run


def recent_verification_runs(principal: Principal, *, limit: int = 20) -> list[VerificationRun]:
    """The newest runs over scopes ``principal`` may audit."""
    runs = VerificationRun.objects.order_by("-started_at", "-id")
    if not principal.is_system:
        runs = runs.filter(Q(tenant__in=_audited_tenants(principal)) | Q(tenant__isnull=True))
    picked = []
    for run in runs[: limit * 5]:
        if readable(principal, _run_scope(run), access.AUDIT):
            picked.append(run)
            if len(picked) == limit:
                break
    return picked


def _audited_tenants(principal: Principal) -> list[str]:
    return sorted({scope.tenant for scope in access.granted_scopes(principal, access.AUDIT)})


def checkpoint_subjects(checkpoint: Checkpoint) -> dict[str, Any]:
    """The pinned subjects of a stored checkpoint document."""
    document = _checkpoint_document(checkpoint)
    subjects = document.get("subjects")
    return subjects if isinstance(subjects, dict) else {}


def _checkpoint_document(checkpoint: Checkpoint) -> dict[str, Any]:
    document = json.loads(checkpoint.document)
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint {checkpoint.pk} does not hold a v1 document")
    return document


def get_checkpoint(principal: Principal, checkpoint_id: int) -> Checkpoint:
    """A stored checkpoint, for someone who may audit every chain it pins; else ``DoesNotExist``.

    Its subject list would otherwise reveal chains (and tenants) outside the
    principal's grants.
    """
    checkpoint = Checkpoint.objects.get(pk=checkpoint_id)
    if principal.is_system:
        return checkpoint
    # A checkpoint that pins no chain still needs an auditor: all() of nothing is True.
    if not access.has_capability_anywhere(principal, access.AUDIT) or not all(
        readable(principal, subject, access.AUDIT) for subject in checkpoint_subjects(checkpoint)
    ):
        raise Checkpoint.DoesNotExist(f"no checkpoint {checkpoint_id}")
    return checkpoint


def latest_checkpoint(principal: Principal) -> Checkpoint | None:
    """The newest checkpoint ``principal`` may download, if any of the recent ones."""
    for checkpoint in Checkpoint.objects.order_by("-created_at", "-id")[:20]:
        try:
            return get_checkpoint(principal, checkpoint.pk)
        except Checkpoint.DoesNotExist:
            continue
    return None


def _log_head_of(checkpoint: Checkpoint, which: str) -> LogHead:
    try:
        return LogHead.parse(checkpoint.document, checkpoint_id=checkpoint.pk)
    except CheckpointError as exc:
        raise CheckpointError(
            f"checkpoint {checkpoint.pk} predates the Merkle log: it has no log head to prove "
            "anything about; pick a later one",
            field=which,
        ) from exc


def consistency_bundle(principal: Principal, *, old_id: int, new_id: int | None) -> dict[str, Any]:
    """The offline bundle proving that checkpoint ``new_id`` extends ``old_id``, or flagging a fork.

    ``new_id`` ``None`` means the newest checkpoint the principal may see. Both
    must be checkpoints the principal may see (else ``Checkpoint.DoesNotExist``,
    a 404 that never says which); a request no proof can answer (a checkpoint
    from before the log, the older one given second, an empty log) is a
    :class:`CheckpointError` naming the argument. A fork is an answer, not an
    error: the bundle says ``"consistent": false, "fork": true`` and why.
    """
    old_checkpoint = get_checkpoint(principal, old_id)
    new_checkpoint = (
        get_checkpoint(principal, new_id) if new_id is not None else latest_checkpoint(principal)
    )
    if new_checkpoint is None:  # the recent ones all pin chains beyond the principal's grants
        raise CheckpointError(
            "none of the newest checkpoints is one you may see: name the newer one (new)",
            field="new",
        )
    old, new = _log_head_of(old_checkpoint, "old"), _log_head_of(new_checkpoint, "new")
    if old.size > new.size:
        raise CheckpointError(
            f"checkpoint {old_checkpoint.pk} has {old.size} leaves and checkpoint "
            f"{new_checkpoint.pk} {new.size}: give the older (smaller) one as old",
            field="old",
        )
    if old.size == 0:
        raise CheckpointError(
            f"checkpoint {old_checkpoint.pk} is of an empty log: every log extends it, so there "
            "is nothing to prove; pick a later one",
            field="old",
        )
    return prove_consistency(old, new).bundle(old, new)


def published_verifier_key() -> str | None:
    """The checkpoint verifier key to publish (``NAME+KEYID+BASE64``), or None without one.

    Public by design: an auditor needs it to check receipts and consistency
    bundles offline, and it is worth the most when copied somewhere this
    server cannot change. An unreadable key file shows as no key: the pages
    that publish it must still render.
    """
    try:
        signer = notes.configured_signer()
    except notes.NoteError:
        return None
    return None if signer is None else signer.verifier.text()


def daily_type_counts(
    principal: Principal,
    *,
    event_types: Iterable[str],
    tenant: str,
    days: int = 30,
    today: date | None = None,
) -> dict[str, list[tuple[date, int]]]:
    """Events of each of ``event_types`` per UTC day in ``tenant``'s chains the principal may
    read, for the last ``days`` days (oldest first, zeros included).

    One grouped query, bounded to the window by sequence as well as by time:
    the window's events are the newest rows of the log, and how many there
    are is the sum of the per-day counters ``append_event`` keeps (an
    index-only range scan). So the cost follows the window's events, not the
    log's length. A gap in the sequence (a rolled-back insert) only widens
    the range; the time filter keeps the answer exact.
    """
    today = today or datetime.now(UTC).date()
    first = today - timedelta(days=days - 1)
    window = [first + timedelta(days=n) for n in range(days)]
    wanted = sorted(set(event_types))
    series: dict[str, list[tuple[date, int]]] = {kind: [(d, 0) for d in window] for kind in wanted}
    if not wanted or not access.has_capability_anywhere(principal, access.READ):
        return series
    in_window = AuditDailyCount.objects.filter(day__gte=first).aggregate(n=Sum("event_count"))["n"]
    head = AuditEvent.objects.order_by("-sequence").values_list("sequence", flat=True).first()
    if not in_window or head is None:
        return series
    rows = AuditEvent.objects.filter(
        sequence__gt=head - int(in_window),
        event_type__in=wanted,
        created_at__gte=first.isoformat(),
    )
    # The tenant's chains the principal may read, named (not a prefix match), so
    # the (subject_id, sequence) index reads only this tenant's window.
    if tenant == PLATFORM:
        root = str(Scope.platform())
        visible: list[str] | SubjectIds | None = (
            [root] if access.may(principal, access.READ, root) else []
        )
    else:
        visible = visible_subject_ids(principal, within=Scope.of(tenant))
    if isinstance(visible, list):
        if not visible:
            return series
        rows = rows.filter(subject_id__in=visible)
    elif visible is not None:  # sums have no row to re-check: check the columns in the subquery
        rows = rows.filter(subject_id__in=_consistent(visible))
    counts: dict[tuple[str, str], int] = {}
    grouped = (
        rows.annotate(day=Substr("created_at", 1, 10))
        .order_by()
        .values_list("event_type", "day")
        .annotate(n=Count("sequence"))
    )
    for kind, day, n in grouped:
        counts[(kind, day)] = n
    return {kind: [(d, counts.get((kind, d.isoformat()), 0)) for d in window] for kind in wanted}
