"""memory.services.scoring: recall's arithmetic, tested without a database (memory-engine.md "Recall")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memory import ranking
from memory.services import scoring
from memory.services.scoring import Evidence


def test_the_module_imports_nothing_but_the_standard_library_and_ranking():
    # Given scoring.py's own import statements
    tree = ast.parse(Path(scoring.__file__).read_text())
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    # Then none reaches Django, the ORM or another memory module than the pure ranking
    assert imported <= {
        "__future__.annotations",
        "collections.abc.Sequence",
        "dataclasses.dataclass",
        "memory.ranking",
    }
    assert "django" not in Path(ranking.__file__).read_text()


def test_a_rare_word_outweighs_a_common_one_without_any_word_list():
    # Given a scope of 1000 records where a name is in 500 and a topic word in 3
    weights = ranking.bm25_weights({"maria": 500, "dentist": 3, "absent": 0}, 1000)
    # Then the rare word weighs several times the common one, and an absent word weighs the most
    assert weights["dentist"] > 5 * weights["maria"]
    assert weights["absent"] > weights["dentist"]
    # And no weight is negative, even for a word every record holds
    assert ranking.idf(1000, 1000) > 0
    assert ranking.idf(2001, 1000) > 0  # a capped count above the visible count


def test_bm25_normalises_by_length():
    # Given two records holding the same word, one short and one long
    weights = {"bicycle": 2.0}
    short = ranking.bm25({"bicycle"}, 4, 8.0, weights)
    long = ranking.bm25({"bicycle"}, 32, 8.0, weights)
    # Then the shorter one scores higher, and a record of average length scores the bare weight
    assert short > long
    assert ranking.bm25({"bicycle"}, 8, 8.0, weights) == pytest.approx(2.0)
    # And a record holding none of the words scores 0
    assert ranking.bm25(set(), 4, 8.0, weights) == 0.0


def test_the_word_share_is_the_held_part_of_the_query_weight():
    weights = {"dentist": 3.0, "go": 1.0}
    assert ranking.coverage({"dentist"}, weights) == pytest.approx(0.75)
    assert ranking.coverage({"go"}, weights) == pytest.approx(0.25)
    assert ranking.coverage({"dentist", "go"}, weights) == 1.0
    assert ranking.coverage({"go"}, {}) == 0.0


def test_confidence_is_a_probability_rising_with_the_evidence():
    # Given the fused evidence of cosine and word share
    low = ranking.confidence(0.1, 0.0)
    mid = ranking.confidence(0.4, 0.5)
    high = ranking.confidence(0.8, 1.0)
    # Then confidence stays in [0, 1] and rises with either part
    assert 0.0 <= low < mid < high <= 1.0
    assert ranking.confidence(0.4, 0.8) > ranking.confidence(0.4, 0.2)
    # And without a cosine (semantic recall off) the lexical calibration applies
    assert ranking.confidence(None, 1.0) > ranking.confidence(None, 0.1)
    assert ranking.confidence(None, 0.5) != ranking.confidence(0.0, 0.5)


def test_an_unrelated_neighbour_falls_below_the_default_confidence():
    # A cosine typical of unrelated sentences, holding no word of the question
    assert ranking.confidence(0.15, 0.0) < ranking.DEFAULT_MIN_CONFIDENCE
    # A close paraphrase holding the question's key word reaches it
    assert ranking.confidence(0.6, 0.6) >= ranking.DEFAULT_MIN_CONFIDENCE


def test_reciprocal_rank_fusion_scales_to_one_for_first_everywhere():
    # Kept for the measured comparison (docs/memory-engine-notes.md)
    assert ranking.fuse((1, 1), 2) == 1.0
    assert ranking.fuse((1, None), 2) == 0.5
    assert ranking.fuse((None, None), 2) == 0.0
    assert ranking.fuse((2, 3), 2) < ranking.fuse((1, 3), 2)


def test_recency_runs_from_the_oldest_zero_to_the_newest_one():
    assert scoring.recency_parts([30, 10, 20]) == {10: 0.0, 20: 0.5, 30: 1.0}
    # A lone candidate is the newest
    assert scoring.recency_parts([7]) == {7: 1.0}


def _one(evidence: Evidence) -> scoring.Scored:
    return scoring.rank([evidence])[0]


def test_the_score_is_relevance_times_weight_trust_and_recency():
    # Given a trusted record at the scope itself, found by both indexes
    evidence = Evidence(
        pk=1,
        trust_tier="trusted_user",
        weight=1.0,
        bm25=2.0,
        share=0.8,
        similarity=0.7,
        neighbour=True,
    )
    scored = _one(evidence)
    # Then its relevance is its confidence and, alone (the newest), its score is the relevance
    assert scored.parts["relevance"] == scored.confidence == ranking.confidence(0.7, 0.8)
    assert scored.score == pytest.approx(scored.confidence, abs=1e-6)
    assert scored.parts["lexical_rank"] == 1.0 and scored.parts["semantic_rank"] == 1.0
    assert set(scored.parts) == {
        "weight",
        "relevance",
        "lexical",
        "lexical_rank",
        "word_share",
        "semantic",
        "semantic_rank",
        "context",
        "trust",
        "recency",
    }
    # And alone (no conversation around it) it gains no context
    assert scored.parts["context"] == 0.0
    # And at an ancestor of weight 0.5 the same record scores half, with the same confidence
    half = _one(Evidence(**{**evidence.__dict__, "weight": 0.5}))
    assert half.score == pytest.approx(scored.score / 2, abs=1e-6)
    assert half.confidence == scored.confidence


@pytest.mark.parametrize(
    ("tier", "trust"),
    [("trusted_user", 1.0), ("user_confirmed", 0.9), ("untrusted_content", 0.4), ("odd", 0.4)],
)
def test_trust_comes_from_the_tier_and_an_unknown_tier_counts_as_untrusted(tier, trust):
    scored = _one(Evidence(pk=1, trust_tier=tier, weight=1.0, share=1.0, bm25=1.0))
    assert scored.parts["trust"] == trust
    assert scored.score == round(scored.parts["relevance"] * trust, 6)


def test_trust_and_recency_alone_score_nothing():
    # Given the best possible record that matches nothing at all (no word, no meaning)
    scored = _one(Evidence(pk=1, trust_tier="trusted_user", weight=1.0, similarity=-0.2))
    # Then it scores (almost) nothing and is far below any confidence threshold
    assert scored.score < 0.01
    assert scored.confidence < ranking.DEFAULT_MIN_CONFIDENCE


def test_trust_and_recency_apply_after_relevance():
    # Given a more relevant older untrusted-but-confirmed record and a less relevant newer trusted one
    relevant = Evidence(pk=1, trust_tier="user_confirmed", weight=1.0, similarity=0.7, share=0.6)
    weaker = Evidence(pk=2, trust_tier="trusted_user", weight=1.0, similarity=0.45, share=0.2)
    # When ranked
    ranked = scoring.rank([weaker, relevant])
    # Then relevance decides; trust and recency do not lift the weaker one above it
    assert [item.pk for item in ranked] == [1, 2]
    # And recency alone moves a score by at most RECENCY_BONUS
    assert (
        ranked[0].score >= ranked[0].parts["relevance"] * 0.9 * (1 - scoring.RECENCY_BONUS) - 1e-6
    )


def test_lexical_and_semantic_lists_are_ranked_apart():
    # Given one record found by words only and one found by meaning only
    words = Evidence(pk=1, trust_tier="trusted_user", weight=1.0, bm25=3.0, share=1.0)
    meaning = Evidence(pk=2, trust_tier="trusted_user", weight=1.0, similarity=0.5, neighbour=True)
    lexical, semantic = scoring.list_ranks([words, meaning])
    # Then each list holds only its own record
    assert lexical == {1: 1} and semantic == {2: 1}


def test_rank_puts_the_best_first_breaks_ties_newest_first_and_keeps_at_most_the_limit():
    # Given more equally scored candidates than the limit, and one better one
    same = [
        Evidence(pk=pk, trust_tier="trusted_user", weight=1.0, similarity=0.3)
        for pk in range(1, scoring.CANDIDATE_LIMIT + 5)
    ]
    best = Evidence(
        pk=0, trust_tier="trusted_user", weight=1.0, similarity=0.3, bm25=1.0, share=1.0
    )
    # When ranked
    ranked = scoring.rank([*same, best])
    # Then the matching one leads, the rest follow by recency (newest first), cut at the limit
    assert ranked[0].pk == 0
    assert len(ranked) == scoring.CANDIDATE_LIMIT
    assert [item.pk for item in ranked[1:4]] == [54, 53, 52]


def test_place_returns_the_first_limit_reaching_both_thresholds():
    ranked = [
        scoring.Scored(pk, score, confidence, {})
        for pk, score, confidence in [
            (1, 0.9, 0.9),
            (2, 0.8, 0.3),
            (3, 0.7, 0.8),
            (4, 0.2, 0.9),
            (5, 0.6, 0.7),
        ]
    ]
    # When two may be returned at a 0.5 score and 0.5 confidence threshold
    placed = scoring.place(ranked, limit=2, min_score=0.5, min_confidence=0.5)
    # Then ranks count from 1; the low-confidence second and the low-score fourth are skipped
    assert [(p.rank, p.above_threshold, p.returned) for p in placed] == [
        (1, True, True),
        (2, False, False),
        (3, True, True),
        (4, False, False),
        (5, True, False),
    ]


def test_place_returns_nothing_when_no_candidate_is_confident_enough():
    ranked = [scoring.Scored(1, 0.9, 0.1, {}), scoring.Scored(2, 0.8, 0.2, {})]
    placed = scoring.place(ranked, limit=5, min_score=0.0, min_confidence=0.5)
    assert not any(p.returned for p in placed)


def test_an_exact_tie_goes_to_the_newer_record():
    # Given two records with the same evidence
    older = Evidence(pk=1, trust_tier="trusted_user", weight=1.0, similarity=0.5)
    newer = Evidence(pk=2, trust_tier="trusted_user", weight=1.0, similarity=0.5)
    # When ranked (in either input order)
    for given in ([older, newer], [newer, older]):
        ranked = scoring.rank(given)
        # Then the newer record comes first
        assert [item.pk for item in ranked] == [2, 1]


def _turn(pk: int, turn: int | None, similarity: float, session: str = "s1") -> Evidence:
    return Evidence(
        pk=pk,
        trust_tier="trusted_user",
        weight=1.0,
        similarity=similarity,
        session=session,
        turn=turn,
    )


def test_a_turn_gains_from_the_matching_turn_before_it_more_than_from_the_one_after():
    # Given a question turn matching strongly (turn 7), the reply after it (turn 8),
    # and a reply in another session just as close to the query on its own
    question = _turn(1, 7, 0.8)
    reply = _turn(2, 8, 0.4)
    elsewhere = _turn(3, 8, 0.4, session="s2")
    # When ranked
    ranked = {item.pk: item for item in scoring.rank([question, reply, elsewhere])}
    # Then the reply gains CONTEXT_BEFORE of the question's match; the other reply gains nothing
    assert ranked[2].parts["context"] == pytest.approx(ranking.CONTEXT_BEFORE * 0.8)
    assert ranked[3].parts["context"] == 0.0
    # And the question gains CONTEXT_AFTER of the reply's match (the smaller share)
    assert ranked[1].parts["context"] == pytest.approx(ranking.CONTEXT_AFTER * 0.4)
    # And the context raises the reply's confidence above its twin's, so it ranks higher
    assert ranked[2].confidence == ranking.confidence(0.4, 0.0, ranking.CONTEXT_BEFORE * 0.8)
    assert ranked[2].confidence > ranked[3].confidence
    assert ranked[2].score > ranked[3].score


def test_no_session_or_no_adjacent_turn_means_no_context():
    # Given consecutive records without a session, and same-session turns two apart
    loose = [_turn(1, 1, 0.8, session=""), _turn(2, 2, 0.4, session="")]
    apart = [_turn(3, 10, 0.8), _turn(4, 12, 0.4)]
    unplaced = [_turn(5, None, 0.8), _turn(6, None, 0.4)]
    # Then none of them gains anything
    for group in (loose, apart, unplaced):
        assert all(item.parts["context"] == 0.0 for item in scoring.rank(group))


def test_a_turn_takes_the_best_of_its_records_as_its_context():
    # Given a turn held by a kept turn and a weaker fact, and the reply after it
    kept, fact, reply = _turn(1, 4, 0.7), _turn(2, 4, 0.3), _turn(3, 5, 0.2)
    ranked = {item.pk: item for item in scoring.rank([kept, fact, reply])}
    # Then the reply gains from the better of the two records of the turn before it
    assert ranked[3].parts["context"] == pytest.approx(ranking.CONTEXT_BEFORE * 0.7)
    # And a context gain never goes below zero for a turn that matches negatively
    assert ranking.context_gain(-0.5, None) == 0.0
