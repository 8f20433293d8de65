"""Embeddings are computed before the write transaction, never while it holds the lock."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings

from aetnaweb.access import SYSTEM
from memory import embeddings, services, vectors
from memory.errors import RecordStateError
from memory.models import Record

ALICE = "acme:alice:*"
BEEF = "I avoid beef at business dinners."


@pytest.fixture
def embed_calls(monkeypatch):
    """Every embedding computed, with whether a transaction was open at that moment."""
    calls: list[tuple[str, bool]] = []
    real = embeddings.embed

    def spy(text: str) -> bytes | None:
        calls.append((text, connection.in_atomic_block))
        return real(text)

    monkeypatch.setattr(embeddings, "embed", spy)
    return calls


def test_reindex_embeds_each_batch_before_its_transaction(clean_index, embed_calls):
    # Given records stored while semantic recall was off
    with override_settings(AETNAWEB_SEMANTIC_RECALL=False):
        for text in (BEEF, "My sister Maria lives in Lisbon.", "I take my coffee black."):
            services.remember(principal=SYSTEM, scope=ALICE, text=text)
    pks = list(Record.objects.filter(status="active").values_list("pk", flat=True))
    embed_calls.clear()
    # When reindexed two records per batch
    assert vectors.reindex(batch=2) == 3
    # Then each record was embedded once, and never inside a transaction
    assert len(embed_calls) == 3
    assert not any(in_transaction for _, in_transaction in embed_calls)
    assert vectors.indexed_pks(pks) == set(pks)


@pytest.mark.django_db
def test_index_records_reuses_what_was_prepared_ahead(embed_calls):
    # Given a record's content embedded ahead
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    record = Record.objects.get(record_id=record_id)
    vectors.unindex_records([record.pk])
    with vectors.prepared([record.content]):
        embed_calls.clear()
        # When it is indexed inside the block
        vectors.index_records([(record.pk, record.record_id, record.scope, record.content)])
        # Then the model is not run again
        assert embed_calls == []
    assert vectors.indexed_pks([record.pk]) == {record.pk}
    # And outside the block nothing is cached: indexing embeds again
    vectors.index_records([(record.pk, record.record_id, record.scope, record.content)])
    assert len(embed_calls) == 1


@pytest.mark.django_db
def test_a_prepared_vector_is_the_one_the_record_would_get(embed_calls):
    # The vector written is byte for byte the one embedding inside would have given.
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    record = Record.objects.get(record_id=record_id)
    inside = vectors.search(visible_scopes=[ALICE], query="Am I vegetarian?", limit=1)
    vectors.unindex_records([record.pk])
    with vectors.prepared([record.content]):
        vectors.index_records([(record.pk, record.record_id, record.scope, record.content)])
    assert vectors.search(visible_scopes=[ALICE], query="Am I vegetarian?", limit=1) == inside


def test_remember_embeds_before_its_transaction_and_writes_the_vector_inside(
    clean_index, embed_calls
):
    # When a user states a fact (outside any caller's transaction, as a view or the API does)
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    # Then its content was embedded exactly once, with no transaction open
    assert len(embed_calls) == 1 and embed_calls[0][1] is False
    # And the vector was written with the record
    pk = Record.objects.get(record_id=record_id).pk
    assert vectors.indexed_pks([pk]) == {pk}


def test_remember_fact_embeds_before_its_transaction(clean_index, embed_calls):
    record_id = services.remember_fact(
        principal=SYSTEM, scope=ALICE, key="airline", value="KLM"
    ).record_ids[0]
    assert len(embed_calls) == 1 and embed_calls[0][1] is False
    pk = Record.objects.get(record_id=record_id).pk
    assert vectors.indexed_pks([pk]) == {pk}


def test_quarantined_content_is_not_embedded_at_all(clean_index, embed_calls):
    # Webpage content lands quarantined, gets no vector, so no model time is spent on it.
    services.remember(principal=SYSTEM, scope=ALICE, text=f"<webpage>{BEEF}</webpage>")
    assert embed_calls == []


def test_promote_embeds_before_its_transaction_and_writes_the_vector_inside(
    clean_index, embed_calls
):
    # Given a quarantined record
    quarantined = services.remember(
        principal=SYSTEM, scope=ALICE, text=f"<webpage>{BEEF}</webpage>"
    ).record_ids[0]
    pk = Record.objects.get(record_id=quarantined).pk
    # When a reviewer promotes it
    services.promote(principal=SYSTEM, scope=ALICE, record_id=quarantined)
    # Then it was embedded once, before the transaction, and the vector is there
    assert len(embed_calls) == 1 and embed_calls[0][1] is False
    assert vectors.indexed_pks([pk]) == {pk}


def test_a_refused_promote_embeds_nothing_and_writes_nothing(clean_index, embed_calls):
    # Given an active record (not quarantined): promote refuses
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    embed_calls.clear()
    events = list(Record.objects.values_list("record_id", "status", "updated_at"))
    with pytest.raises(RecordStateError):
        services.promote(principal=SYSTEM, scope=ALICE, record_id=record_id)
    assert embed_calls == []
    assert list(Record.objects.values_list("record_id", "status", "updated_at")) == events
