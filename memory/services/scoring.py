"""How recall scores and ranks its candidates: pure arithmetic, no database.

memory-engine.md "Recall": ``score = weight x (0.75 relevance + 0.15 trust +
0.10 recency)``, relevance fusing the full-text and semantic parts
(:mod:`memory.ranking`). :mod:`memory.services.recalling` gathers each
candidate's evidence from the indexes and the records table; this module
turns that evidence into scores, the ranked list and which candidates are
returned. Inputs in, numbers out: every rule here is unit-testable without
Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory import ranking

# Candidates asked of each index, and kept (and logged) per recall.
CANDIDATE_LIMIT = 50
# Nearest-by-meaning candidates asked of the vector index per recall. Fewer
# than the full-text ones: only those above the semantic floor count, a
# question rarely has more than a handful, and on SQLite the vector scan's
# cost grows with k (memory.vectors.COARSE_FACTOR; docs/memory-engine-notes.md).
SEMANTIC_CANDIDATES = 12
RELEVANCE_WEIGHT = 0.75
TRUST_WEIGHT = 0.15
RECENCY_WEIGHT = 0.10
# Keyed by the trust tiers' stored values (memory.models.TrustTier), so this
# module needs no model import.
TRUST_SCORES: dict[str, float] = {
    "trusted_user": 1.0,
    "user_confirmed": 0.9,
    "untrusted_content": 0.4,
}
# A tier missing from TRUST_SCORES scores as untrusted content.
UNKNOWN_TRUST = 0.4


@dataclass(frozen=True)
class Evidence:
    """What the indexes and the records table said about one usable candidate.

    ``pk`` orders candidates by age (a larger key is newer) and breaks score
    ties; ``raw`` and ``matched_terms`` are the full-text hit's (``raw`` is
    None when only the semantic index found it); ``similarity`` is the
    semantic neighbour's cosine (None when only the full-text index found it).
    """

    pk: int
    trust_tier: str
    weight: float
    raw: float | None = None
    matched_terms: int = 0
    similarity: float | None = None


@dataclass(frozen=True)
class Scored:
    pk: int
    score: float
    parts: dict[str, float]


@dataclass(frozen=True)
class Placed:
    """A scored candidate's place in the answer."""

    scored: Scored
    rank: int
    above_threshold: bool
    returned: bool


def lexical_part(raw: float, matched_terms: int, best_raw: float, term_count: int) -> float:
    """How much of the query the record holds, scaled by the index's rank against the best.

    A record that matches one word of many stays weakly relevant even when it
    is the only match.
    """
    share = raw / best_raw if best_raw > 0 else 0.0
    coverage = matched_terms / term_count
    return round(min(1.0, coverage * (0.5 + 0.5 * share)), 6)


def recency_parts(pks: Sequence[int]) -> dict[int, float]:
    """Each candidate's age rank among the candidates, oldest 0.0, newest 1.0 (alone: 1.0)."""
    by_age = sorted(pks)
    span = len(by_age) - 1
    return {pk: round(index / span, 6) if span else 1.0 for index, pk in enumerate(by_age)}


def score_one(evidence: Evidence, *, best_raw: float, term_count: int, recency: float) -> Scored:
    lexical = 0.0
    if evidence.raw is not None:
        lexical = lexical_part(evidence.raw, evidence.matched_terms, best_raw, term_count)
    semantic = (
        round(ranking.semantic_part(evidence.similarity), 6)
        if evidence.similarity is not None
        else 0.0
    )
    relevance = ranking.fuse(lexical, semantic)
    trust = TRUST_SCORES.get(evidence.trust_tier, UNKNOWN_TRUST)
    score = round(
        evidence.weight
        * (RELEVANCE_WEIGHT * relevance + TRUST_WEIGHT * trust + RECENCY_WEIGHT * recency),
        6,
    )
    parts = {
        "weight": evidence.weight,
        "relevance": relevance,
        "lexical": lexical,
        "semantic": semantic,
        "trust": trust,
        "recency": recency,
    }
    return Scored(evidence.pk, score, parts)


def rank(candidates: Sequence[Evidence], *, term_count: int) -> list[Scored]:
    """Score every candidate; best first (newest first on a tie), at most CANDIDATE_LIMIT."""
    best_raw = max((c.raw for c in candidates if c.raw is not None), default=0.0)
    recency = recency_parts([c.pk for c in candidates])
    scored = [
        score_one(c, best_raw=best_raw, term_count=term_count, recency=recency[c.pk])
        for c in candidates
    ]
    scored.sort(key=lambda item: (-item.score, -item.pk))
    # Two sources of up to 50 each: still at most 50 considered (and logged).
    return scored[:CANDIDATE_LIMIT]


def place(scored: Sequence[Scored], *, limit: int, min_score: float) -> list[Placed]:
    """Number the ranked candidates; the first ``limit`` scoring at least ``min_score`` return."""
    placed = []
    returned = 0
    for position, item in enumerate(scored, start=1):
        above = item.score >= min_score
        is_returned = above and returned < limit
        returned += int(is_returned)
        placed.append(Placed(item, position, above, is_returned))
    return placed
