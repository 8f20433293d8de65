"""Property: any single-row edit to audit_log is caught (design.md "Tests").

Every column but ``sequence`` is bound by the row's own hash, so an edit is
caught by the chain rule; the one exception is a payload rewritten into
another spelling of the same JSON object (the chain rule hashes the parsed
payload, so meaning, not spelling, is protected). ``sequence`` is not part of
the preimage (audit-log-v1): renumbering a row is caught by the chain rule
when it reorders the subject's events, and otherwise only by a checkpoint
that pinned that row (documented in docs/auditors.md).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from django.db import transaction
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aetnaweb.access import SYSTEM
from audit.checkpoints import build_checkpoint_document, containment_failures
from audit.models import AuditEvent
from audit.verification import COLUMNS, verify_all
from tests.audit.conftest import mixed_chains, tamper, tool

pytestmark = pytest.mark.django_db

SUBJECTS = ["acme:alice:proj", "acme:*:*", "platform:*:*", "zeta:bob:x"]
NOT_NULL = {"event_id", "subject_id", "event_type", "created_at", "actor", "payload", "event_hash"}
# No NUL (PostgreSQL text refuses it) and no lone surrogates (not encodable as UTF-8).
text = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30
)


def new_value(column: str):
    if column == "payload":
        return text | st.dictionaries(text, st.integers() | text, max_size=3).map(json.dumps)
    if column in NOT_NULL:
        return text
    return st.none() | text


def canonical_payload(raw):
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return (
        json.dumps(value, sort_keys=True, separators=(",", ":"))
        if isinstance(value, dict)
        else None
    )


def tool_failures() -> dict[str, list[str]]:
    """The standalone verifier on a SQLite copy of the table as this transaction sees it."""
    copy = sqlite3.connect(":memory:")
    copy.execute(f"CREATE TABLE audit_log ({', '.join(COLUMNS)}, PRIMARY KEY (sequence))")
    rows = AuditEvent.objects.order_by("sequence").values_list(*COLUMNS)
    copy.executemany(f"INSERT INTO audit_log VALUES ({', '.join('?' * len(COLUMNS))})", rows)
    results = tool.verify_all_chains(copy)
    copy.close()
    return {r.subject_id: r.failure_lines() for r in results if not r.ok}


def test_any_single_row_edit_is_caught():
    events = mixed_chains(SUBJECTS, per_subject=4)
    pins = build_checkpoint_document()["subjects"]
    sequences = {e.sequence for e in events}
    event_ids = {e.event_id for e in events}

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def edit_one_row(data):
        target = data.draw(st.sampled_from(events), label="row")
        column = data.draw(st.sampled_from(COLUMNS), label="column")
        stored = AuditEvent.objects.get(pk=target.pk)
        old = getattr(stored, column)
        if column == "sequence":
            new = data.draw(st.integers(1, 10**6).filter(lambda n: n not in sequences))
        else:
            new = data.draw(new_value(column), label="value")
        assume(new != old)
        assume(not (column == "event_id" and new in event_ids))
        same_meaning = column == "payload" and canonical_payload(new) == canonical_payload(old)
        assume(not same_meaning)  # a re-spelled payload is the same event (see module doc)

        with transaction.atomic():
            tamper(
                f"UPDATE audit_log SET {column} = %s WHERE sequence = %s", [new, target.sequence]
            )
            report = verify_all(principal=SYSTEM)
            failures = {r.subject_id: r.failure_lines() for r in report.subjects if not r.ok}
            assert tool_failures() == failures  # the two verifiers agree on every edit
            pinned = containment_failures(pins)
            transaction.set_rollback(True)

        if column != "sequence":
            assert not report.ok, f"{column} edit of row {target.sequence} went unnoticed"
            return
        chain = [e.sequence for e in events if e.subject_id == target.subject_id]
        reordered = sorted(new if s == target.sequence else s for s in chain) != [
            new if s == target.sequence else s for s in chain
        ]
        assert report.ok != reordered
        if pins[target.subject_id]["sequence"] == target.sequence:
            assert pinned, "a renumbered head must fail its checkpoint"

    edit_one_row()
