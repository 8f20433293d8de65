"""Chain verification: the chain rule of audit-log-v1, fast and in constant memory.

For one subject, events taken by ascending ``sequence``: the first has a null
``prev_hash``, each later one names the previous one's ``event_hash``, and
every ``event_hash`` recomputes from its preimage (the canonical JSON of the
ten preimage fields, ``payload`` parsed).

Rows are read in keyset chunks (``sequence > last ORDER BY sequence LIMIT n``)
up to a horizon fixed when verification starts, never with OFFSET and never
all at once. Chunks rather than one long cursor: on SQLite no read snapshot
stays open while a verification run writes its progress, and on PostgreSQL the
horizon makes the chunks consistent with one another (an append still in
flight at the horizon can only be the newest event of its subject, so no
chain seen here ever misses a middle event). Memory grows with the number of
subjects, never with the number of events.

The hot loop avoids the ORM and ``json.dumps``: a payload stored flat and
canonical (the engine's usual payload) is recognized by one regular expression
and hashed as stored; any other payload goes through the C JSON scanner and a C
encoder configured for canonical output. The loop formats the preimage's
nine string fields with the same escaping ``json.dumps`` uses (one f-string). The result is
byte-for-byte the canonical JSON of the preimage (tests compare it with
:func:`audit.chain.compute_event_hash` and with ``tools/verify_audit.py``).

Failure messages are shared word for word with ``tools/verify_audit.py`` so
the two verifiers can be compared line by line.

Checks that need rows outside ``audit_log`` (the memory engine's check that
each record still holds the content its creation event binds) are registered
by the app that owns those rows (:func:`register_subject_check`) and run after
the walk; their failures join the chain's report. The evidence layer imports
nothing from the engines.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope, ScopeError
from audit.canonical import loads_strict, reject_json_constant
from audit.chain import PREIMAGE_FIELDS

CHUNK_SIZE = 10_000
MAX_REASONS = 20

COLUMNS = ("sequence", *PREIMAGE_FIELDS, "event_hash")  # an audit_log row as stored
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM audit_log"  # noqa: S608  (constant column names)

# The reasons a chain fails, worded exactly as tools/verify_audit.py words them.
BAD_SUBJECT = "subject is not a canonical scope string"
BAD_HASH = "event_hash does not recompute from the event's preimage"
BROKEN_LINK = "prev_hash does not match the previous event's event_hash"
FIRST_HAS_PREV = "first event of the chain has a non-null prev_hash"
PAYLOAD_NOT_JSON = "payload is not JSON"
PAYLOAD_NOT_OBJECT = "payload is not a JSON object"
PAYLOAD_NOT_FINITE = "payload holds a number that is not finite"
NOT_TEXT = "a hashed column holds a value that is not text"

_quote = json.encoder.encode_basestring_ascii


_scan_once = json.JSONDecoder(parse_constant=reject_json_constant).scan_once  # type: ignore[attr-defined]


def _no_default(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _make_payload_encoder() -> Callable[[Any, int], tuple[str, ...]]:
    """Canonical JSON of a parsed payload as a 1-tuple, the encoder built once.

    ``json.dumps`` builds a new encoder on every call; at hundreds of thousands
    of events a second that construction dominates. The C encoder with
    ``markers=None`` skips the cycle check, which parsed JSON cannot need. It
    is used only when it answers a dict with a single string, so the hot loop
    can index ``[0]`` instead of joining.
    """
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is not None:
        try:
            c_encode = c_make_encoder(None, _no_default, _quote, None, ":", ",", True, False, False)
            probe = c_encode({"b": [1, {"d": None, "c": "\u00e9"}], "a": 1.5}, 0)
        except TypeError:  # a Python whose C encoder takes other arguments
            c_encode, probe = None, None
        if isinstance(probe, tuple) and probe == ('{"a":1.5,"b":[1,{"c":"\\u00e9","d":null}]}',):
            return c_encode
    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
    return lambda value, _level: (encoder.encode(value),)


_encode_payload = _make_payload_encoder()


# A payload text that is already canonical JSON, recognized without parsing it:
# a flat object of at most 16 keys in strictly ascending order, whose strings
# (keys and values) hold only printable ASCII other than '"' and '\' (which
# ensure_ascii writes as they are), and whose other values are true, false,
# null or an integer of at most 16 digits in canonical form (no "-0", no
# leading zero). For such a text the canonical JSON of its parse is the text
# itself, so parsing and re-encoding it (most of the cost of a row) can be
# skipped. Anything else, including every malformed payload, takes the
# parse-and-encode path, which alone decides failures.
_PLAIN = r"[ !#-\[\]-~]*+"
_SCALAR = rf'(?:"{_PLAIN}"|0|-?[1-9][0-9]{{0,15}}+|true|false|null)'
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


def _canonical_payload(payload_text: Any) -> str:
    """The careful path: canonical payload text, or ``ValueError`` naming what is wrong."""
    if not isinstance(payload_text, str):
        raise ValueError(PAYLOAD_NOT_JSON)
    try:
        value, end = _scan_once(payload_text, 0)
    except (StopIteration, ValueError):
        value, end = None, -1
    if end != len(payload_text):
        # Not canonical text (leading/trailing whitespace) or not JSON at all:
        # the strict parser decides which.
        try:
            value = loads_strict(payload_text)
        except ValueError as exc:
            raise ValueError(PAYLOAD_NOT_JSON) from exc
    if type(value) is not dict:
        raise ValueError(PAYLOAD_NOT_OBJECT)
    try:
        return _encode_payload(value, 0)[0]
    except ValueError as exc:  # 1e999 parses to inf, which has no JSON form
        raise ValueError(PAYLOAD_NOT_FINITE) from exc


def is_canonical_subject(subject_id: Any) -> bool:
    if not isinstance(subject_id, str):
        return False
    try:
        return str(Scope.parse(subject_id)) == subject_id
    except ScopeError:
        return False


# -- reports ------------------------------------------------------------------


@dataclass
class SubjectReport:
    """The verdict on one subject's chain."""

    subject_id: str
    events_checked: int = 0
    first_bad_sequence: int | None = None
    reasons: list[str] = field(default_factory=list)
    problem_count: int = 0
    last_sequence: int | None = None
    head_hash: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def failure_lines(self) -> list[str]:
        """Reasons as printed, capped like tools/verify_audit.py caps them."""
        lines = list(self.reasons)
        if self.problem_count > len(self.reasons):
            lines.append(f"... and {self.problem_count - len(self.reasons)} more problems")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject_id": self.subject_id,
            "ok": self.ok,
            "events_checked": self.events_checked,
            "first_bad_sequence": self.first_bad_sequence,
            "reasons": self.failure_lines(),
        }


@dataclass
class VerificationReport:
    """The verdict on a set of chains, subjects in first-seen order."""

    subjects: list[SubjectReport]

    @property
    def ok(self) -> bool:
        return all(report.ok for report in self.subjects)

    @property
    def events_checked(self) -> int:
        return sum(report.events_checked for report in self.subjects)

    @property
    def first_bad_sequence(self) -> int | None:
        bad = [r.first_bad_sequence for r in self.subjects if r.first_bad_sequence is not None]
        return min(bad) if bad else None

    @property
    def failed(self) -> list[SubjectReport]:
        return [report for report in self.subjects if not report.ok]

    def by_subject(self) -> dict[str, SubjectReport]:
        return {report.subject_id: report for report in self.subjects}


# -- the walk -------------------------------------------------------------------


class _ChainWalker:
    """Carries per-subject state across chunks; feed it rows in ascending sequence."""

    def __init__(self) -> None:
        # subject -> [last event_hash, events seen, last sequence, report]:
        # a list, because item assignment is the cheapest mutation per row.
        self._state: dict[Any, list[Any]] = {}
        # Key sets of flat payloads already seen in ascending order.
        self._ordered_keys: set[tuple[str | None, ...]] = set()

    def _open(self, subject_id: Any, sequence: int) -> list[Any]:
        key = subject_id if isinstance(subject_id, str) else repr(subject_id)
        report = SubjectReport(subject_id=key)
        state = [None, 0, None, report]
        self._state[subject_id] = state
        if not is_canonical_subject(subject_id):
            _fail(report, sequence, BAD_SUBJECT)
        return state

    def reports(self) -> list[SubjectReport]:
        """One report per subject seen, in first-seen order, counts brought up to date."""
        reports = []
        for head_hash, seen, last_sequence, report in self._state.values():
            report.events_checked = seen
            report.last_sequence = last_sequence
            report.head_hash = head_hash
            reports.append(report)
        return reports

    def _canonical_payload_text(self, payload_text: Any) -> str:
        """The payload's canonical text, or ``ValueError`` naming what is wrong with it.

        Most payloads are stored flat and canonical: recognized by one regular
        expression, not parsed. Payloads repeat few key sets: one already seen
        in ascending order is a set lookup, not a sort (the set is capped:
        constant memory). Anything else goes through the C scanner and
        encoder, and what they refuse to :func:`_canonical_payload`, which
        names the problem.
        """
        if type(payload_text) is str:
            match = _flat_canonical(payload_text)
            if match is not None:
                groups = match.groups()
                ordered = self._ordered_keys
                if groups in ordered:
                    return payload_text
                keys = groups[: len(groups) - groups.count(None)]
                if keys == tuple(sorted(set(keys))):
                    if len(ordered) < _ORDERED_KEY_SETS:
                        ordered.add(groups)
                    return payload_text
        try:
            value, end = _scan_once(payload_text, 0)
            if end != len(payload_text) or type(value) is not dict:
                raise ValueError
            return str(_encode_payload(value, 0)[0])
        except (StopIteration, ValueError, TypeError):
            return _canonical_payload(payload_text)

    def feed(self, rows: Iterable[tuple[Any, ...]]) -> int:
        """Check ``rows``; returns how many were read.

        The loop body is the whole cost of verification, so it is written
        flat: local names, one f-string for the preimage (the same bytes as
        ``canonical_json`` of the preimage dict, which the tests check
        against :func:`audit.chain.compute_event_hash`), one Python call per
        row (the payload's canonical text), C calls otherwise.
        """
        q = _quote
        sha256 = hashlib.sha256
        canonical = self._canonical_payload_text
        states = self._state
        count = 0
        for row in rows:
            count += 1
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
                state = self._open(subject_id, sequence)
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
                _fail(state[3], sequence, NOT_TEXT)
            except ValueError as exc:  # the payload, worded by _canonical_payload
                _fail(state[3], sequence, str(exc))
            else:
                if sha256(preimage.encode()).hexdigest() != event_hash:
                    _fail(state[3], sequence, BAD_HASH)
            # A subject's first event expects a null prev_hash, which is the
            # state's starting value, so one comparison covers both rules.
            if prev_hash != state[0]:
                _fail(state[3], sequence, FIRST_HAS_PREV if state[1] == 0 else BROKEN_LINK)
            state[0] = event_hash
            state[1] += 1
            state[2] = sequence
        return count


def _fail(report: SubjectReport, sequence: int | None, reason: str) -> None:
    report.problem_count += 1
    if sequence is not None and (
        report.first_bad_sequence is None or sequence < report.first_bad_sequence
    ):
        report.first_bad_sequence = sequence
    if len(report.reasons) < MAX_REASONS:
        report.reasons.append(reason if sequence is None else f"sequence {sequence}: {reason}")


ProgressCallback = Callable[[int], None]

# subjects (None: every subject) -> (subject_id, sequence or None, reason) failures
SubjectCheck = Callable[[list[str] | None], Iterable[tuple[str, int | None, str]]]
_subject_checks: list[SubjectCheck] = []


def register_subject_check(check: SubjectCheck) -> None:
    """Run ``check`` after every chain walk; registering the same function twice keeps one."""
    if check not in _subject_checks:
        _subject_checks.append(check)


def _apply_subject_checks(reports: list[SubjectReport], subjects: list[str] | None) -> None:
    """Add the registered checks' failures to ``reports`` (a report per failing subject)."""
    by_subject = {report.subject_id: report for report in reports}
    for check in _subject_checks:
        for subject_id, sequence, reason in check(subjects):
            report = by_subject.get(subject_id)
            if report is None:
                report = by_subject[subject_id] = SubjectReport(subject_id=subject_id)
                reports.append(report)
            _fail(report, sequence, reason)


def _horizon() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT MAX(sequence) FROM audit_log")
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _walk(
    walker: _ChainWalker,
    *,
    subject_id: str | None,
    horizon: int,
    progress: ProgressCallback | None,
    done_before: int = 0,
) -> int:
    """Feed every row of one subject (or of all) up to ``horizon``; returns rows read."""
    if subject_id is None:
        sql = f"{_SELECT} WHERE sequence > %s AND sequence <= %s ORDER BY sequence LIMIT %s"
    else:
        sql = (
            f"{_SELECT} WHERE subject_id = %s AND sequence > %s AND sequence <= %s "
            "ORDER BY sequence LIMIT %s"
        )
    last = 0
    total = 0
    with connection.cursor() as cursor:
        while True:
            params: list[Any] = [last, horizon, CHUNK_SIZE]
            if subject_id is not None:
                params.insert(0, subject_id)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            if not rows:
                break
            total += walker.feed(rows)
            last = rows[-1][0]
            if progress is not None:
                progress(done_before + total)
            if len(rows) < CHUNK_SIZE:
                break
    return total


def _require_audit(principal: Principal, subject_id: str) -> None:
    # A malformed subject string can still name a stored chain (tampering);
    # only a trusted caller may verify those.
    if principal.is_system:
        return
    access.require(principal, access.AUDIT, subject_id)


def verify_subject(
    subject: Scope | str,
    *,
    principal: Principal,
    progress: ProgressCallback | None = None,
) -> SubjectReport:
    """Check one subject's chain; an unknown subject is an empty chain, which holds."""
    subject_id = str(subject)
    _require_audit(principal, subject_id)
    walker = _ChainWalker()
    _walk(walker, subject_id=subject_id, horizon=_horizon(), progress=progress)
    reports = walker.reports() or [SubjectReport(subject_id=subject_id)]
    _apply_subject_checks(reports, [subject_id])
    return reports[0]


def verify_subjects(
    subjects: Iterable[str],
    *,
    principal: Principal,
    progress: ProgressCallback | None = None,
) -> VerificationReport:
    """Check the named chains one after another, each through the subject index."""
    subjects = list(subjects)
    for subject_id in subjects:
        _require_audit(principal, subject_id)
    horizon = _horizon()
    walker = _ChainWalker()
    done = 0
    for subject_id in subjects:
        done += _walk(
            walker, subject_id=subject_id, horizon=horizon, progress=progress, done_before=done
        )
    seen = {report.subject_id: report for report in walker.reports()}
    reports = [seen.get(s) or SubjectReport(subject_id=s) for s in subjects]
    _apply_subject_checks(reports, subjects)
    return VerificationReport(subjects=reports)


def verify_all(
    *,
    principal: Principal,
    progress: ProgressCallback | None = None,
) -> VerificationReport:
    """Check every chain in one pass over ``audit_log`` in sequence order.

    Only a principal that may audit ``platform:*:*`` (or a trusted in-process
    caller) verifies everything; others verify the subjects they may audit
    through :func:`verify_subjects`.
    """
    access.require(principal, access.AUDIT, Scope.platform())
    walker = _ChainWalker()
    _walk(walker, subject_id=None, horizon=_horizon(), progress=progress)
    reports = walker.reports()
    _apply_subject_checks(reports, None)
    return VerificationReport(subjects=reports)
