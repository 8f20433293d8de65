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


def test_lexical_part_is_coverage_scaled_by_the_rank_against_the_best():
    # A record holding every query word with the best index score is fully relevant
    assert scoring.lexical_part(4.0, 2, best_raw=4.0, term_count=2) == 1.0
    # One word of two, at half the best score: 0.5 x (0.5 + 0.25)
    assert scoring.lexical_part(2.0, 1, best_raw=4.0, term_count=2) == 0.375
    # No positive best score: coverage alone, halved
    assert scoring.lexical_part(0.0, 1, best_raw=0.0, term_count=1) == 0.5


def test_recency_runs_from_the_oldest_zero_to_the_newest_one():
    assert scoring.recency_parts([30, 10, 20]) == {10: 0.0, 20: 0.5, 30: 1.0}
    # A lone candidate is the newest
    assert scoring.recency_parts([7]) == {7: 1.0}


def test_the_score_is_weight_times_the_weighted_parts():
    # Given a trusted, newest, fully matching record at the scope itself
    scored = scoring.score_one(
        Evidence(pk=1, trust_tier="trusted_user", weight=1.0, raw=3.0, matched_terms=1),
        best_raw=3.0,
        term_count=1,
        recency=1.0,
    )
    # Then 0.75 + 0.15 + 0.10, and every part is reported
    assert scored.score == 1.0
    assert scored.parts == {
        "weight": 1.0,
        "relevance": 1.0,
        "lexical": 1.0,
        "semantic": 0.0,
        "trust": 1.0,
        "recency": 1.0,
    }
    # And at an ancestor of weight 0.5 the same record scores half
    half = scoring.score_one(
        Evidence(pk=1, trust_tier="trusted_user", weight=0.5, raw=3.0, matched_terms=1),
        best_raw=3.0,
        term_count=1,
        recency=1.0,
    )
    assert half.score == 0.5


@pytest.mark.parametrize(
    ("tier", "trust"),
    [("trusted_user", 1.0), ("user_confirmed", 0.9), ("untrusted_content", 0.4), ("odd", 0.4)],
)
def test_trust_comes_from_the_tier_and_an_unknown_tier_counts_as_untrusted(tier, trust):
    scored = scoring.score_one(
        Evidence(pk=1, trust_tier=tier, weight=1.0), best_raw=0.0, term_count=1, recency=0.0
    )
    assert scored.parts["trust"] == trust
    assert scored.score == round(scoring.TRUST_WEIGHT * trust, 6)


def test_trust_and_recency_alone_stay_under_the_injection_threshold():
    # Given the best possible record that is not relevant at all
    scored = scoring.score_one(
        Evidence(pk=1, trust_tier="trusted_user", weight=1.0),
        best_raw=0.0,
        term_count=1,
        recency=1.0,
    )
    # Then it cannot reach recall_block's 0.3
    assert scored.score == 0.25
    assert scored.score < 0.3


def test_a_semantic_neighbour_is_fused_with_the_lexical_part():
    # Given a record found by meaning only, at a similarity halfway up the useful range
    similarity = (ranking.SEMANTIC_FLOOR + ranking.SEMANTIC_FULL) / 2
    scored = scoring.score_one(
        Evidence(pk=1, trust_tier="trusted_user", weight=1.0, similarity=similarity),
        best_raw=0.0,
        term_count=1,
        recency=0.0,
    )
    assert scored.parts["lexical"] == 0.0
    assert scored.parts["semantic"] == 0.5
    assert scored.parts["relevance"] == 0.5


def test_rank_puts_the_best_first_breaks_ties_newest_first_and_keeps_at_most_the_limit():
    # Given more equally scored candidates than the limit, and one better one
    same = [
        Evidence(pk=pk, trust_tier="untrusted_content", weight=1.0)
        for pk in range(1, scoring.CANDIDATE_LIMIT + 5)
    ]
    best = Evidence(pk=0, trust_tier="trusted_user", weight=1.0, raw=1.0, matched_terms=1)
    # When ranked
    ranked = scoring.rank([*same, best], term_count=1)
    # Then the matching one leads, the rest follow by recency (newest first), cut at the limit
    assert ranked[0].pk == 0
    assert len(ranked) == scoring.CANDIDATE_LIMIT
    assert [item.pk for item in ranked[1:4]] == [54, 53, 52]


def test_place_returns_the_first_limit_above_the_threshold():
    ranked = [
        scoring.Scored(pk, score, {}) for pk, score in [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.2)]
    ]
    # When two may be returned at a 0.5 threshold
    placed = scoring.place(ranked, limit=2, min_score=0.5)
    # Then ranks count from 1; the third is above the threshold but not returned; the last neither
    assert [(p.rank, p.above_threshold, p.returned) for p in placed] == [
        (1, True, True),
        (2, True, True),
        (3, True, False),
        (4, False, False),
    ]


def test_an_exact_tie_goes_to_the_newer_record():
    # Given an older trusted record and a newer untrusted one at a nearer-weighted scope,
    # scoring exactly the same: 1 x 0.15 x 1.0 == 0.9375 x (0.15 x 0.4 + 0.10 x 1.0)
    older = Evidence(pk=1, trust_tier="trusted_user", weight=1.0)
    newer = Evidence(pk=2, trust_tier="untrusted_content", weight=0.9375)
    # When ranked (in either input order)
    for given in ([older, newer], [newer, older]):
        ranked = scoring.rank(given, term_count=1)
        # Then the scores tie and the newer record comes first
        assert [item.score for item in ranked] == [0.15, 0.15]
        assert [item.pk for item in ranked] == [2, 1]
