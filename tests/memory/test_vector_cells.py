"""SQLite: a big scope's vectors are split into cells and a search reads only the nearest (vector_cells)."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from aetnaweb.access import SYSTEM
from jobs.models import Job
from memory import reindexing, services, vector_cells, vectors
from memory.models import Record

pytestmark = [
    pytest.mark.skipif(connection.vendor != "sqlite", reason="sqlite-vec cells"),
    pytest.mark.django_db,
]

ALICE = "acme:alice:*"
BOB = "acme:bob:*"
BEEF = "I avoid beef at business dinners."
QUESTION = "Am I vegetarian?"


@pytest.fixture
def small_cells(monkeypatch):
    """Thresholds a test can reach: split from 200 vectors, about 25 per cell."""
    monkeypatch.setattr(vector_cells, "TRAIN_AT", 200)
    monkeypatch.setattr(vector_cells, "VECTORS_PER_CELL", 25)
    monkeypatch.setattr(vector_cells, "MIN_CELLS", 4)
    monkeypatch.setattr(vector_cells, "MIN_MEMBERS", 5)
    monkeypatch.setattr(vector_cells, "MIN_PROBE", 2)
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 50)
    vector_cells.forget_cached()


def _fill(scope: str, count: int, start: int = 0) -> None:
    for index in range(start, start + count):
        services.remember(
            principal=SYSTEM,
            scope=scope,
            text=f"Remember that project {index} uses codename falcon{index} and budget {index * 7}.",
        )


def _cells_of(pks: list[int]) -> dict[int, int]:
    marks = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT record_pk, cell FROM {vectors.TABLE} WHERE record_pk IN ({marks})", pks
        )
        return {int(pk): int(cell) for pk, cell in cursor.fetchall()}


def _centroid_rows(scope: str) -> list[tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT cell, generation FROM {vector_cells.CELLS_TABLE} WHERE scope = %s", [scope]
        )
        return [(int(cell), int(gen)) for cell, gen in cursor.fetchall()]


def _pk(record_id: str) -> int:
    return Record.objects.get(record_id=record_id).pk


def test_a_small_scope_stays_in_cell_zero_and_is_not_due(small_cells):
    beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    assert _cells_of([_pk(beef)]) == {_pk(beef): 0}
    assert not vector_cells.due(ALICE)
    assert vectors.train_cells(ALICE) == []
    assert _centroid_rows(ALICE) == []


def test_a_split_scope_files_every_vector_in_a_cell_and_still_finds_the_meaning(
    small_cells, monkeypatch
):
    # Given a scope over the threshold (no job runs: the check is turned off here)
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    _fill(ALICE, 260)
    assert vector_cells.due(ALICE)
    # When it is trained
    [trained] = vectors.train_cells(ALICE)
    # Then it has about one cell per 25 vectors, every vector left cell 0 for one of them,
    pks = list(Record.objects.filter(scope=ALICE, status="active").values_list("pk", flat=True))
    cells = _cells_of(pks)
    centroids = {cell for cell, _ in _centroid_rows(ALICE)}
    assert trained.generation == 1 and trained.refiled == len(pks) == 261
    assert 4 <= trained.cells == len(centroids) <= 261 // 25
    assert set(cells) == set(pks) and set(cells.values()) <= centroids
    # a search reads only some of the cells, and still finds the beef record first
    with connection.cursor() as cursor:
        plan = vector_cells.plan(
            cursor, [ALICE, "acme:*:*"], vectors.embeddings.embed(QUESTION) or b""
        )
    assert plan[0] == vector_cells.Branch(["acme:*:*"], [0], near=True)
    near, far = plan[1:]
    assert near.scopes == far.scopes == [ALICE] and near.near and not far.near
    # (cell 0 and the nearest tenth of the probed cells near, the rest far; none twice)
    probed = near.cells[1:] + far.cells
    assert near.cells[0] == 0 and len(set(probed)) == len(probed)
    assert len(probed) == vector_cells.probe_count(trained.cells) < trained.cells
    assert len(near.cells) - 1 == math.ceil(vector_cells.NEAR_SHARE * len(probed))
    hits = vectors.search(visible_scopes=[ALICE, "acme:*:*"], query=QUESTION, limit=5)
    assert hits[0].pk == _pk(beef)
    # and it is no longer due (until it grows RETRAIN_GROWTH times)
    assert not vector_cells.due(ALICE)


def test_after_the_split_new_vectors_go_to_their_cell_and_forget_removes_them(
    small_cells, monkeypatch
):
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    _fill(ALICE, 240)
    vectors.train_cells(ALICE)
    centroids = {cell for cell, _ in _centroid_rows(ALICE)}
    # A record remembered after the split is filed under a centroid, not in cell 0
    beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    assert _cells_of([_pk(beef)])[_pk(beef)] in centroids
    assert vectors.search(visible_scopes=[ALICE], query=QUESTION, limit=3)[0].pk == _pk(beef)
    # and forgetting it leaves no vector behind, whatever its cell
    services.forget(principal=SYSTEM, scope=ALICE, selector="beef")
    assert vectors.indexed_pks([_pk(beef)]) == set()
    assert all(
        h.pk != _pk(beef) for h in vectors.search(visible_scopes=[ALICE], query=QUESTION, limit=5)
    )


def test_a_siblings_split_scope_is_never_read_even_with_the_same_cell_numbers(
    small_cells, monkeypatch
):
    # Given two sibling scopes, both split (their cells carry the same numbers), and the
    # beef fact stored only at Bob's
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    bob_beef = services.remember(principal=SYSTEM, scope=BOB, text=BEEF).record_ids[0]
    _fill(ALICE, 220)
    _fill(BOB, 220, start=1000)
    vectors.train_cells()
    assert {c for c, _ in _centroid_rows(ALICE)} & {c for c, _ in _centroid_rows(BOB)}
    # When Alice asks by meaning
    hits = vectors.search(visible_scopes=[ALICE, "acme:*:*"], query=QUESTION, limit=10)
    result = services.recall(principal=SYSTEM, scope=ALICE, query=QUESTION, limit=10)
    # Then nothing of Bob's comes back, from the index or from recall
    assert hits and all(Record.objects.get(pk=h.pk).scope == ALICE for h in hits)
    assert bob_beef not in [c.record_id for c in result.candidates]


def test_training_again_replaces_the_generation_and_an_interrupted_one_is_finished(
    small_cells, monkeypatch
):
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    beef = services.remember(principal=SYSTEM, scope=ALICE, text=BEEF).record_ids[0]
    _fill(ALICE, 220)
    vectors.train_cells(ALICE)
    # Given a second training that stopped after writing its centroids (before refiling)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {vector_cells.CELLS_TABLE} (scope, cell, generation, token, "
            "trained_size, centroid) SELECT scope, cell + %s, 2, 'interrupted', trained_size, centroid "
            f"FROM {vector_cells.CELLS_TABLE} WHERE scope = %s",
            [vector_cells.CELL_SPAN, ALICE],
        )
    # Then searches still find every vector (both generations are probed, and cell 0)
    assert {gen for _, gen in _centroid_rows(ALICE)} == {1, 2}
    assert vectors.search(visible_scopes=[ALICE], query=QUESTION, limit=3)[0].pk == _pk(beef)
    # When a training runs to the end
    trained = vector_cells.train(ALICE, table=vectors.TABLE)
    # Then only its generation is left and every vector is filed in it
    assert trained is not None and trained.generation == 3
    assert {gen for _, gen in _centroid_rows(ALICE)} == {3}
    pks = list(Record.objects.filter(scope=ALICE, status="active").values_list("pk", flat=True))
    first = 3 * vector_cells.CELL_SPAN + 1
    assert all(first <= cell < first + trained.cells for cell in _cells_of(pks).values())
    assert vectors.search(visible_scopes=[ALICE], query=QUESTION, limit=3)[0].pk == _pk(beef)
    # and this process, which had read the older generations' centroids, files a new
    # vector under the new ones
    later = services.remember(principal=SYSTEM, scope=ALICE, text="I commute by bicycle.")
    cell = _cells_of([_pk(later.record_ids[0])])[_pk(later.record_ids[0])]
    assert first <= cell < first + trained.cells


def test_crossing_the_threshold_queues_one_reindex_job_that_splits_the_scope(
    small_cells, django_capture_on_commit_callbacks
):
    # Given a scope whose writes cross the threshold (the check runs after every 50th
    # write of this process, once committed)
    with django_capture_on_commit_callbacks(execute=True):
        _fill(ALICE, 260)
    # Then one reindex job was queued by the system for that scope (not one per check)
    job = Job.objects.get(kind=Job.Kind.REINDEX, scope=ALICE)
    assert job.started_by == reindexing.CELLS_STARTED_BY and job.is_queued
    assert reindexing.schedule_cells_if_due(ALICE) is None
    assert _centroid_rows(ALICE) == []
    # When a task worker runs it
    done = reindexing.run_reindex(job.pk)
    # Then it split the scope, and the scope is no longer due: nothing more is queued
    assert done.status == Job.Status.DONE and done.result["cells"][ALICE] >= 4
    assert _centroid_rows(ALICE)
    assert reindexing.schedule_cells_if_due(ALICE) is None
    assert Job.objects.filter(kind=Job.Kind.REINDEX).count() == 1


def test_a_job_no_worker_picked_up_is_not_queued_again_however_old(small_cells, monkeypatch):
    # Given a scope due for a split and a job queued for it hours ago that no worker ran
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    _fill(ALICE, 210)
    job = reindexing.schedule_cells_if_due(ALICE)
    assert job is not None and job.is_queued
    hours_ago = timezone.now() - timedelta(hours=5)
    Job.objects.filter(pk=job.pk).update(started_at=hours_ago, heartbeat_at=hours_ago)
    assert Job.objects.get(pk=job.pk).is_stale
    # When the scope is checked again, nothing more is queued
    assert reindexing.schedule_cells_if_due(ALICE) is None
    # but a job whose worker started and then went silent is replaced
    Job.objects.filter(pk=job.pk).update(heartbeat_at=hours_ago + timedelta(minutes=1))
    assert reindexing.schedule_cells_if_due(ALICE) is not None
    assert Job.objects.filter(kind=Job.Kind.REINDEX, scope=ALICE).count() == 2


def test_the_reindex_command_reports_the_split(small_cells, monkeypatch, capsys):
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    _fill(ALICE, 220)
    call_command("memory", "reindex")
    out = capsys.readouterr().out
    assert f"split {ALICE} into " in out and "vectors refiled" in out


def test_resplit_splits_a_scope_again_now_and_needs_a_scope(small_cells, monkeypatch, capsys):
    # Given a split scope from which many records were then forgotten (not due: it did
    # not grow)
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    _fill(ALICE, 220)
    vectors.train_cells(ALICE)
    preview = services.forget_preview(principal=SYSTEM, scope=ALICE, selector="project")
    services.forget(
        principal=SYSTEM,
        scope=ALICE,
        selector="project",
        expected_record_ids=list(preview.record_ids),
        confirm_count=preview.count,
    )
    _fill(ALICE, 210, start=5000)
    assert not vector_cells.due(ALICE)
    # When an operator asks for a re-split of that scope
    call_command("memory", "reindex", "--scope", ALICE, "--resplit")
    # Then it has a new generation of centroids and nothing else
    assert {gen for _, gen in _centroid_rows(ALICE)} == {2}
    assert f"split {ALICE} into " in capsys.readouterr().out
    # and --resplit without a scope is refused before anything runs
    with pytest.raises(CommandError, match="--resplit needs --scope"):
        call_command("memory", "reindex", "--resplit")
    assert {gen for _, gen in _centroid_rows(ALICE)} == {2}


def test_kmeans_drops_clusters_too_small_to_stand_for_many_records(monkeypatch):
    # Given two big groups of vectors and three stray ones, and room for five clusters
    monkeypatch.setattr(vector_cells, "MIN_MEMBERS", 20)
    rng = np.random.default_rng(4)
    a, b = np.eye(384, dtype=np.float32)[0], np.eye(384, dtype=np.float32)[1]
    data = np.vstack(
        [
            a + 0.01 * rng.standard_normal((60, 384)),
            b + 0.01 * rng.standard_normal((60, 384)),
            rng.standard_normal((3, 384)),
        ]
    ).astype(np.float32)
    # When clustered
    centroids = vector_cells.kmeans(data, 5, seed=1)
    # Then every centroid kept is a unit mean of at least 20 vectors: no stray one is
    # stored as its own centroid
    assert 1 <= len(centroids) <= 3
    assert np.allclose(np.linalg.norm(centroids, axis=1), 1.0, atol=1e-5)
    for stray in data[-3:]:
        unit = stray / np.linalg.norm(stray)
        assert float(np.max(centroids @ unit)) < 0.99


def test_the_far_cells_are_read_under_the_near_windows_bound_and_the_answer_is_unchanged(
    small_cells, monkeypatch
):
    # Given a split scope
    monkeypatch.setattr(vector_cells, "CHECK_EVERY", 10**9)
    _fill(ALICE, 260)
    services.remember(principal=SYSTEM, scope=ALICE, text=BEEF)
    vectors.train_cells(ALICE)
    questions = [QUESTION] + [f"What is the budget of project {n}?" for n in range(0, 260, 37)]
    near_share = vector_cells.NEAR_SHARE
    for question in questions:
        # When it is searched (the near cells first, then the far ones under a bound)
        with CaptureQueriesContext(connection) as captured:
            hits = vectors.search(visible_scopes=[ALICE, "acme:*:*"], query=question, limit=5)
        knn = [q["sql"] for q in captured if "coarse MATCH" in q["sql"]]
        # Then the far cells are read only for vectors within the near window's worst distance
        assert len(knn) == 2 and "distance <=" not in knn[0] and "AND distance <= " in knn[1]
        # And the hits are exactly those of reading every probed cell for the whole window
        monkeypatch.setattr(vector_cells, "NEAR_SHARE", 1.0)
        with CaptureQueriesContext(connection) as captured:
            every = vectors.search(visible_scopes=[ALICE, "acme:*:*"], query=question, limit=5)
        assert len([q for q in captured if "coarse MATCH" in q["sql"]]) == 1
        assert hits == every and len(hits) == 5
        monkeypatch.setattr(vector_cells, "NEAR_SHARE", near_share)
