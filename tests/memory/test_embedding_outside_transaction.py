"""Embeddings are computed ahead of the write transaction, never while it holds the lock.

On SQLite before BEGIN, on the caller's thread. On PostgreSQL remember and
remember_fact embed on a thread of their own while the transaction runs its
first statements (``vectors.prepared(..., alongside=True)``).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from aetnaweb.access import SYSTEM
from memory import embeddings, services, vectors
from memory.errors import RecordStateError
from memory.models import Record

ALICE = "acme:alice:*"
# remember and remember_fact embed alongside their transaction on PostgreSQL.
ALONGSIDE = connection.vendor == "postgresql"
BEEF = "I avoid beef at business dinners."


@pytest.fixture
def embed_calls(monkeypatch):
    """Every embedding computed: (text, a transaction open on that thread, the thread's name)."""
    calls: list[tuple[str, bool, str]] = []
    real = embeddings.embed

    def spy(text: str) -> bytes | None:
        calls.append((text, connection.in_atomic_block, threading.current_thread().name))
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
    assert not any(in_transaction for _, in_transaction, _ in embed_calls)
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
    # Then its content was embedded exactly once, with no transaction open:
    # on SQLite by the caller before BEGIN, on PostgreSQL alongside it
    assert len(embed_calls) == 1 and embed_calls[0][1] is False
    assert embed_calls[0][2].startswith("embed_" if ALONGSIDE else "MainThread")
    # And the vector was written with the record
    pk = Record.objects.get(record_id=record_id).pk
    assert vectors.indexed_pks([pk]) == {pk}


def test_remember_fact_embeds_before_its_transaction(clean_index, embed_calls):
    record_id = services.remember_fact(
        principal=SYSTEM, scope=ALICE, key="airline", value="KLM"
    ).record_ids[0]
    assert len(embed_calls) == 1 and embed_calls[0][1] is False
    assert embed_calls[0][2].startswith("embed_" if ALONGSIDE else "MainThread")
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
    assert embed_calls == [(embed_calls[0][0], False, "MainThread")]
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


@pytest.mark.django_db
@pytest.mark.parametrize("alongside", [False, True])
def test_a_vector_embedded_alongside_is_the_one_embedded_before(alongside):
    # Given a record whose vector is removed
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    record = Record.objects.get(record_id=record_id)
    before = vectors.search(visible_scopes=[ALICE], query="Am I vegetarian?", limit=1)
    vectors.unindex_records([record.pk])
    # When it is indexed again in a block that embeds alongside (PostgreSQL) or ahead
    with vectors.prepared([record.content], alongside=alongside):
        vectors.index_records([(record.pk, record.record_id, record.scope, record.content)])
    # Then the search finds the same vector
    assert vectors.search(visible_scopes=[ALICE], query="Am I vegetarian?", limit=1) == before


@pytest.mark.django_db
@pytest.mark.skipif(not ALONGSIDE, reason="SQLite embeds before BEGIN, never alongside")
def test_a_block_does_not_end_before_the_embedding_it_started(monkeypatch):
    # Given an embedding that takes a while, on its own thread
    finished: list[str] = []
    real = embeddings.embed

    def slow(text: str) -> bytes | None:
        time.sleep(0.3)
        vector = real(text)
        finished.append(text)
        return vector

    monkeypatch.setattr(embeddings, "embed", slow)
    # When the block fails before it uses the vector
    with pytest.raises(ValueError), vectors.prepared([BEEF], alongside=True):
        raise ValueError("the write failed")
    # Then the embedding had finished when the block ended: nothing runs on behind it
    assert len(finished) == 1


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_process_gets_embedding_threads_of_its_own():
    """Threads do not survive a fork: a child reusing its parent's pool would wait forever."""
    # Given the pool in use in this process (its thread now idle)
    assert vectors._embedder_pool().submit(lambda: 1).result(timeout=5) == 1
    pid = os.fork()
    if pid == 0:  # the child: its own pool runs work
        try:
            ok = vectors._embedder_pool().submit(lambda: 7).result(timeout=5) == 7
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


CORPUS = (Path(__file__).parent / "data" / "rewrite_corpus.txt").read_text().splitlines()


@override_settings(AETNAWEB_EMBED_THREADS=2)
def test_a_large_block_is_embedded_in_shares_each_vector_the_single_one(clean_index, embed_calls):
    # Given a few hundred different texts (the rewrite corpus, 304 sentences)
    texts = [vectors.embedding_text(text) for text in CORPUS]
    alone = {text: embeddings.embed(text) for text in texts}
    embed_calls.clear()
    # When they are prepared as one block, as an import prepares its turns
    with vectors.prepared(texts):
        ahead = vectors._ahead.blocks[-1]
        shared = {text: ahead.vector(text) for text in texts}
    # Then each text was embedded once, part of them on a second thread, none in a transaction
    assert sorted(text for text, _, _ in embed_calls) == sorted(texts)
    threads = {thread for _, _, thread in embed_calls}
    assert "MainThread" in threads and any(t.startswith("embed_share") for t in threads)
    assert not any(in_transaction for _, in_transaction, _ in embed_calls)
    # And every vector is byte for byte the one the text gets alone
    assert shared == alone


@pytest.mark.django_db
@pytest.mark.parametrize(("threads", "count"), [(1, 40), (2, 15)])
def test_one_thread_or_a_small_block_is_embedded_on_the_callers_thread(embed_calls, threads, count):
    # Given one embedding thread configured, or a block below two shares of SHARE_FROM texts
    texts = [vectors.embedding_text(text) for text in CORPUS[:count]]
    # When the block is prepared
    with override_settings(AETNAWEB_EMBED_THREADS=threads), vectors.prepared(texts):
        pass
    # Then every text was embedded on the calling thread
    assert len(embed_calls) == count
    assert {thread for _, _, thread in embed_calls} == {"MainThread"}
