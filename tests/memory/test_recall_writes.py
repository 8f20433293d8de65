"""Recall's writes under concurrency: reads outside the write transaction, audit kept.

Recall scores its candidates (full-text and vector queries, the query
embedding) before it opens a transaction, then takes the write lock only for
its audit event and retrieval log. These tests pin that split, that a record
forgotten in between never reaches the answer or the log, and that a failed
write answers 503 and leaves nothing half-written.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from django.db import OperationalError, connection, transaction
from django.test import Client

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import search, services
from memory.models import Record, RetrievalEvent, RetrievalHit
from memory.services import scoring
from tests.api.conftest import issue_token

S = "acme:alice:proj"


def _spy(
    module: Any, name: str, after_first: Callable[[], None] | None = None
) -> tuple[Any, list[bool]]:
    """Patch ``module.name``; note whether each call ran inside a transaction.

    ``after_first`` runs right after the first call returns: another client's
    write landing after recall read its candidates.
    """
    original = getattr(module, name)
    in_transaction: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        in_transaction.append(connection.in_atomic_block)
        result = original(*args, **kwargs)
        if after_first is not None and len(in_transaction) == 1:
            after_first()
        return result

    return mock.patch.object(module, name, side_effect=spy), in_transaction


def _spy_on_search() -> tuple[Any, list[bool]]:
    return _spy(search, "lexical_matches")


@pytest.mark.django_db(transaction=True)
def test_recall_scores_outside_any_transaction_and_still_logs_and_audits():
    # Given a fact
    services.remember(principal=SYSTEM, scope=S, text="My backup email is bob@example.com.")
    patch, in_transaction = _spy_on_search()
    # When it is recalled
    with patch:
        result = services.recall(principal=SYSTEM, scope=S, query="backup email")
    # Then the candidates were read without holding a transaction (no write lock)
    assert in_transaction == [False]
    # And the recall is audited and logged with every candidate, as before
    assert len(result.candidates) == 1
    event = RetrievalEvent.objects.get(retrieval_id=result.retrieval_id)
    assert event.audit_event_id == result.audit_event_id
    audit = AuditEvent.objects.get(event_id=result.audit_event_id)
    assert audit.event_type == "memory.recall"
    assert json.loads(audit.payload)["returned_ids"] == list(result.record_ids)
    assert list(RetrievalHit.objects.values_list("record_id", flat=True)) == list(result.record_ids)


@pytest.mark.django_db(transaction=True)
def test_recall_block_scores_outside_any_transaction_too():
    services.remember(principal=SYSTEM, scope=S, text="My backup email is bob@example.com.")
    patch, in_transaction = _spy_on_search()
    with patch:
        block = services.recall_block(principal=SYSTEM, scope=S, query="backup email")
    assert in_transaction == [False]
    assert block.record_ids and RetrievalEvent.objects.filter(purpose="recall_block").count() == 1
    assert AuditEvent.objects.filter(event_type="memory.context_injected").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_record_forgotten_while_recall_reads_never_reaches_the_answer_or_the_log():
    # Given two facts that both match the query
    gone = services.remember(
        principal=SYSTEM, scope=S, text="My backup email is bob@example.com."
    ).record_ids[0]
    kept = services.remember(
        principal=SYSTEM, scope=S, text="My work email is alice@example.com."
    ).record_ids[0]

    def forget_meanwhile() -> None:
        # Another client forgets one of them after recall read its candidates
        services.forget(principal=SYSTEM, scope=S, record_ids=[gone])

    # (scoring.place is the last step of scoring: every row has been read by then)
    patch, in_transaction = _spy(scoring, "place", after_first=forget_meanwhile)
    # When the recall logs what it found
    with patch:
        result = services.recall(principal=SYSTEM, scope=S, query="email")
    # Then it scored again under the lock, and only the record still active is there
    assert in_transaction == [False, True]
    assert result.record_ids == [kept]
    assert set(RetrievalHit.objects.values_list("record_id", flat=True)) == {kept}
    event = AuditEvent.objects.get(event_id=result.audit_event_id)
    assert gone not in event.payload
    assert Record.objects.get(record_id=gone).content == ""


@pytest.mark.django_db(transaction=True)
def test_the_rescoring_after_a_race_keeps_the_metadata_filter():
    # Given two matching facts for customer 7 and one for customer 8
    gone = services.remember(
        principal=SYSTEM, scope=S, text="My backup email is bob@example.com.", metadata={"c": 7}
    ).record_ids[0]
    kept = services.remember(
        principal=SYSTEM, scope=S, text="My work email is alice@example.com.", metadata={"c": 7}
    ).record_ids[0]
    other = services.remember(
        principal=SYSTEM, scope=S, text="My home email is eve@example.com.", metadata={"c": 8}
    ).record_ids[0]

    def forget_meanwhile() -> None:
        services.forget(principal=SYSTEM, scope=S, record_ids=[gone])

    patch, in_transaction = _spy(scoring, "place", after_first=forget_meanwhile)
    # When a recall filtered on customer 7 races with a forget
    with patch:
        result = services.recall(principal=SYSTEM, scope=S, query="email", metadata={"c": 7})
    # Then the fresh scoring under the lock still filters: customer 8's record never appears
    assert in_transaction == [False, True]
    assert result.record_ids == [kept]
    assert other not in RetrievalHit.objects.values_list("record_id", flat=True)


def _recall_over_http(secret: str) -> Any:
    return Client().post(
        "/api/v1/memory/recall",
        data=json.dumps({"scope": S, "query": "backup email"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


@pytest.mark.django_db
def test_a_failed_retrieval_log_write_is_503_and_leaves_no_audit_event():
    # Given a fact and a token
    services.remember(principal=SYSTEM, scope=S, text="My backup email is bob@example.com.")
    secret = issue_token("acme:alice:*")
    events = AuditEvent.objects.count()
    # When the database refuses the retrieval log's write (after the audit append)
    failing = mock.patch(
        "memory.services.recalling.create_row",
        side_effect=OperationalError("database is locked"),
    )
    with failing:
        response = _recall_over_http(secret)
    # Then the agent is told to retry, and the audit event went with the log
    assert response.status_code == 503
    assert response.json()["error"] == "service_unavailable"
    assert AuditEvent.objects.count() == events
    assert RetrievalEvent.objects.count() == 0 and RetrievalHit.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_recalls_from_many_threads_are_each_audited_and_the_chain_does_not_fork():
    # Given a fact and 6 threads (separate connections) recalling it 3 times each
    services.remember(principal=SYSTEM, scope=S, text="My backup email is bob@example.com.")
    secret = issue_token("acme:alice:*")
    statuses: list[int] = []
    barrier = threading.Barrier(6)

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(3):
                statuses.append(_recall_over_http(secret).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # Then every recall answered, was logged and audited once, in one unforked chain
    assert statuses == [200] * 18
    assert RetrievalEvent.objects.count() == 18
    recalls = AuditEvent.objects.filter(event_type="memory.recall", subject_id=S)
    assert recalls.count() == 18
    chain = list(AuditEvent.objects.filter(subject_id=S).values_list("prev_hash", flat=True))
    assert len(chain) == len(set(chain))
    with transaction.atomic():  # the log is consistent: one retrieval per audit event
        assert set(RetrievalEvent.objects.values_list("audit_event_id", flat=True)) == set(
            recalls.values_list("event_id", flat=True)
        )
