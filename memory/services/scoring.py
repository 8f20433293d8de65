"""How recall scores and ranks its candidates: pure arithmetic, no database.

memory-engine.md "Recall": relevance fuses the full-text (BM25) and semantic
evidence into a calibrated match confidence (:mod:`memory.ranking`); scope
weight, trust and recency apply after it, as factors:

    score = relevance x weight x trust x (1 - RECENCY_BONUS x (1 - recency))

so trust and recency without relevance score 0, and recency only orders
near-ties. Each candidate carries its ``confidence`` (the relevance before
the factors), which decides whether it is returned at all.
:mod:`memory.services.recalling` gathers each candidate's evidence from the
indexes and the records table; this module turns that evidence into scores,
the ranked list and which candidates are returned. Inputs in, numbers out:
every rule here is unit-testable without Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory import ranking

# Candidates asked of the full-text index, and kept (and logged) per recall.
CANDIDATE_LIMIT = 50
# Nearest-by-meaning candidates asked of the vector index per recall (the
# neighbour pool; docs/memory-engine-notes.md measures its recall of the
# exact nearest neighbours).
SEMANTIC_CANDIDATES = 12
# Recency's most: a tenth of a percent (the oldest candidate loses it), so
# it orders near-ties and nothing more; a score stays within [0, 1]. (Half a
# percent reordered good matches: the confidence is close to 1 for all of
# them, so recency decided; docs/memory-engine-notes.md measures it.)
RECENCY_BONUS = 0.001
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
    ties; ``bm25`` is the full-text weight (None when only the semantic index
    found it) and ``share`` the part of the query's word weight it holds;
    ``similarity`` is the query's cosine with it (None when semantic recall
    is unavailable or the record has no vector); ``neighbour`` says whether
    it was among the nearest neighbours (the semantic list). ``session`` and
    ``turn`` place it in a conversation: its session ID and its source
    message's position (the episode's key, consecutive within an import);
    records of adjacent turns of one session lend each other context
    (:func:`memory.ranking.context_gain`). No session: no context.
    """

    pk: int
    trust_tier: str
    weight: float
    bm25: float | None = None
    share: float = 0.0
    similarity: float | None = None
    neighbour: bool = False
    session: str = ""
    turn: int | None = None


@dataclass(frozen=True)
class Scored:
    pk: int
    score: float
    confidence: float
    parts: dict[str, float]


@dataclass(frozen=True)
class Placed:
    """A scored candidate's place in the answer."""

    scored: Scored
    rank: int
    above_threshold: bool
    returned: bool


def recency_parts(pks: Sequence[int]) -> dict[int, float]:
    """Each candidate's age rank among the candidates, oldest 0.0, newest 1.0 (alone: 1.0)."""
    by_age = sorted(pks)
    span = len(by_age) - 1
    return {pk: round(index / span, 6) if span else 1.0 for index, pk in enumerate(by_age)}


def list_ranks(candidates: Sequence[Evidence]) -> tuple[dict[int, int], dict[int, int]]:
    """Each candidate's 1-based place in the lexical list and in the semantic list.

    Lexical: by BM25, best first. Semantic: the nearest neighbours by
    cosine, best first. Ties go to the newer record. (Logged with each
    candidate's parts, and the input of :func:`memory.ranking.fuse`.)
    """
    lexical = sorted(
        (c for c in candidates if c.bm25 is not None and c.bm25 > 0),
        key=lambda c: (-(c.bm25 or 0.0), -c.pk),
    )
    semantic = sorted(
        (c for c in candidates if c.neighbour and c.similarity is not None),
        key=lambda c: (-(c.similarity or 0.0), -c.pk),
    )
    return (
        {c.pk: place for place, c in enumerate(lexical, start=1)},
        {c.pk: place for place, c in enumerate(semantic, start=1)},
    )


def _own_evidence(candidate: Evidence) -> float:
    """What the confidence calibrates: the match, or the word share without a cosine."""
    if candidate.similarity is None:
        return candidate.share
    return ranking.match(candidate.similarity, candidate.share)


def context_parts(candidates: Sequence[Evidence]) -> dict[int, float]:
    """What each candidate gains from the candidate turns beside it in its session.

    A turn's evidence is the best of its candidate records' (a kept turn and
    the facts it states share one turn); the turn before a candidate's is
    ``turn - 1`` in the same session, the one after ``turn + 1``.
    """
    best: dict[tuple[str, int], float] = {}
    for c in candidates:
        if c.session and c.turn is not None:
            key = (c.session, c.turn)
            best[key] = max(best.get(key, 0.0), _own_evidence(c))
    gains = {}
    for c in candidates:
        if c.session and c.turn is not None:
            gains[c.pk] = round(
                ranking.context_gain(
                    best.get((c.session, c.turn - 1)), best.get((c.session, c.turn + 1))
                ),
                6,
            )
        else:
            gains[c.pk] = 0.0
    return gains


def rank(candidates: Sequence[Evidence]) -> list[Scored]:
    """Score every candidate; best first (newest first on a tie), at most CANDIDATE_LIMIT."""
    lexical_rank, semantic_rank = list_ranks(candidates)
    recency = recency_parts([c.pk for c in candidates])
    context = context_parts(candidates)
    scored = []
    for c in candidates:
        relevance = ranking.confidence(c.similarity, c.share, context[c.pk])
        trust = TRUST_SCORES.get(c.trust_tier, UNKNOWN_TRUST)
        score = round(
            relevance * c.weight * trust * (1.0 - RECENCY_BONUS * (1.0 - recency[c.pk])), 6
        )
        parts = {
            "weight": c.weight,
            "relevance": relevance,
            "lexical": round(c.bm25 or 0.0, 6),
            "lexical_rank": float(lexical_rank.get(c.pk, 0)),
            "word_share": round(c.share, 6),
            "semantic": round(c.similarity, 6) if c.similarity is not None else 0.0,
            "semantic_rank": float(semantic_rank.get(c.pk, 0)),
            "context": context[c.pk],
            "trust": trust,
            "recency": recency[c.pk],
        }
        scored.append(Scored(c.pk, score, relevance, parts))
    scored.sort(key=lambda item: (-item.score, -item.pk))
    # Two sources: still at most CANDIDATE_LIMIT considered (and logged).
    return scored[:CANDIDATE_LIMIT]


def place(
    scored: Sequence[Scored], *, limit: int, min_score: float, min_confidence: float
) -> list[Placed]:
    """Number the ranked candidates; the first ``limit`` reaching both thresholds return."""
    placed = []
    returned = 0
    for position, item in enumerate(scored, start=1):
        above = item.score >= min_score and item.confidence >= min_confidence
        is_returned = above and returned < limit
        returned += int(is_returned)
        placed.append(Placed(item, position, above, is_returned))
    return placed
