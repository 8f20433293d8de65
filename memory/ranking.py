"""How recall weighs text evidence: BM25, rank fusion and a calibrated match confidence.

Pure arithmetic (no database): :mod:`memory.search` and
:mod:`memory.services.scoring` call it.

- **BM25** (Robertson and Zaragoza's weighting, k1 = 1.2, b = 0.75) over the
  query words a record holds: a word's weight is its rarity among the
  *visible* active records (``idf``), so a name or verb that half the scope
  holds counts for little without any hand list, and a long record's match
  counts for less than a short one's. Records are single facts or single
  turns, so a word is counted as present or absent (term frequency 1).
- **Fusion**: the lexical list (BM25) and the semantic list (cosine) are
  fused by a calibrated combination, the cosine plus LEXICAL_WEIGHT times the
  share of the query's BM25 word weight the record holds, turned into a
  probability by a logistic calibration (:func:`confidence`). That
  probability is the candidate's relevance and its ``confidence``. Reciprocal
  rank fusion (Cormack et al. 2009; :func:`fuse`) was measured beside it and
  ranked worse on both benches (docs/memory-engine-notes.md); it stays for
  that comparison. The share, not the raw BM25, goes in: it is bounded and
  comparable from one question to the next, which a calibration needs.
- **Conversation context**: a stored conversation turn answers the turn
  before it, so a candidate gains part of the match of the candidate turns
  right before and after it in the same session (:func:`context_gain`;
  CONTEXT_BEFORE, CONTEXT_AFTER). Records without a session gain nothing.
- DEFAULT_MIN_CONFIDENCE is the one threshold every surface uses to say
  "no memory fits".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

BM25_K1 = 1.2
BM25_B = 0.75
RRF_K = 60

# all-MiniLM-L6-v2 cosines: unrelated sentences sit around -0.1 to 0.25,
# paraphrases and question/answer pairs from about 0.25 up; 0.6 and above
# is as good as a verbatim match. A neighbour at or below the floor is not a
# candidate at all (every record has *some* nearest neighbour).
SEMANTIC_FLOOR = 0.25
SEMANTIC_FULL = 0.6

# The fusion (a calibrated combination, chosen over reciprocal rank fusion
# by measurement: docs/memory-engine-notes.md): a candidate's evidence is
#     match = cosine + LEXICAL_WEIGHT x share of the query's BM25 word weight
# and its confidence is Platt's logistic calibration of that evidence,
#     confidence = 1 / (1 + exp(-(INTERCEPT + SLOPE x match))).
# LEXICAL_WEIGHT was chosen on LoCoMo conversations 1-5 (the tuning set)
# and bench/recall_quality.py together (the paraphrase set favours meaning,
# LoCoMo's stored turns favour words; 0.5 keeps the first's recall@1);
# INTERCEPT and SLOPE were fitted by `bench/recall_quality.py --calibrate` on
# the calibration half of that bench's questions. When semantic recall is
# unavailable the cosine is unknown and the lexical-only pair applies.
LEXICAL_WEIGHT = 0.5
CONFIDENCE_INTERCEPT = -5.02
CONFIDENCE_SLOPE = 11.90
LEXICAL_CONFIDENCE_INTERCEPT = -1.91
LEXICAL_CONFIDENCE_SLOPE = 6.68
# Below this confidence a candidate is not returned; when none reaches it,
# recall answers "no memory fits". Chosen on the same calibration half (the
# most correct first answers kept with at most 10% of no-answer questions
# answered); the one default of the API, MCP, clients, recall_block and the
# LangGraph store.
DEFAULT_MIN_CONFIDENCE = 0.31


# Conversation context (chosen on LoCoMo conversations 1-5 through the
# conversation import, docs/memory-engine-notes.md): a candidate's match
# gains CONTEXT_BEFORE times the best match among the records of the turn
# just before it in the same session (the question it answers), or
# CONTEXT_AFTER times that of the turn just after it (the reply that picks
# it up), whichever is more. Only records that are candidates count: no
# extra read. With no session (single facts) nothing changes.
CONTEXT_BEFORE = 0.25
CONTEXT_AFTER = 0.15


def idf(postings: int, visible: int) -> float:
    """BM25's word weight for a word ``postings`` of ``visible`` records hold (never negative)."""
    total = max(visible, postings)
    return math.log(1.0 + (total - postings + 0.5) / (postings + 0.5))


def bm25_weights(postings: Mapping[str, int], visible: int) -> dict[str, float]:
    """Each query word's weight; a word no visible record holds weighs the most."""
    return {term: idf(count, visible) for term, count in postings.items()}


def bm25(
    held: Iterable[str], length: int, average_length: float, weights: Mapping[str, float]
) -> float:
    """BM25 of a record holding the words ``held``, of ``length`` indexed words."""
    norm = 1.0 - BM25_B + BM25_B * (max(length, 1) / max(average_length, 1.0))
    saturation = (BM25_K1 + 1.0) / (1.0 + BM25_K1 * norm)
    return sum(weights.get(term, 0.0) for term in held) * saturation


def coverage(held: Iterable[str], weights: Mapping[str, float]) -> float:
    """The share of the query's word weight a record holds, in [0, 1]."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return min(1.0, sum(weights.get(term, 0.0) for term in set(held)) / total)


def semantic_part(similarity: float) -> float:
    """A cosine similarity as a relevance in [0, 1] (0 at or below the floor)."""
    if similarity <= SEMANTIC_FLOOR:
        return 0.0
    return min(1.0, (similarity - SEMANTIC_FLOOR) / (SEMANTIC_FULL - SEMANTIC_FLOOR))


def reciprocal_rank(rank: int | None) -> float:
    """One list's contribution for a candidate at ``rank`` (1-based; None: not in it)."""
    return 0.0 if rank is None else 1.0 / (RRF_K + rank)


def fuse(ranks: Iterable[int | None], lists: int) -> float:
    """Reciprocal rank fusion over ``lists`` non-empty lists, scaled to [0, 1]."""
    if lists <= 0:
        return 0.0
    best = lists * reciprocal_rank(1)
    return round(sum(reciprocal_rank(rank) for rank in ranks) / best, 6)


def match(similarity: float | None, share: float) -> float:
    """The fused evidence of a candidate (see LEXICAL_WEIGHT); the cosine counts 0 when unknown."""
    return (similarity or 0.0) + LEXICAL_WEIGHT * share


def context_gain(before: float | None, after: float | None) -> float:
    """What a candidate's conversation context adds to its evidence.

    ``before`` and ``after`` are the best evidence (a match, or the word
    share without a model) among the candidate records of the turns just
    before and just after it in its session; None when there is none.
    """
    return max(
        CONTEXT_BEFORE * max(before or 0.0, 0.0),
        CONTEXT_AFTER * max(after or 0.0, 0.0),
    )


def confidence(similarity: float | None, share: float, context: float = 0.0) -> float:
    """The calibrated probability that this candidate is what the question asks for.

    ``context`` is what :func:`context_gain` adds to the candidate's own
    evidence (0 for a record outside a conversation).
    """
    if similarity is None:
        logit = LEXICAL_CONFIDENCE_INTERCEPT + LEXICAL_CONFIDENCE_SLOPE * (share + context)
    else:
        logit = CONFIDENCE_INTERCEPT + CONFIDENCE_SLOPE * (match(similarity, share) + context)
    return round(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit)))), 6)
