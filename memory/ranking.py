"""How recall turns full-text and semantic evidence into one text relevance.

Both signals become a number in [0, 1] and are fused by a "noisy OR":

    relevance = 1 - (1 - lexical) * (1 - semantic)

- ``lexical``: the full-text part (query words the record holds, scaled by
  the index's own rank against the best candidate), as before.
- ``semantic``: the cosine similarity between the query's and the record's
  embeddings, mapped linearly from [SEMANTIC_FLOOR, SEMANTIC_FULL] to [0, 1]
  and clipped. Below the floor a neighbour says nothing and is not a
  candidate at all (every record has *some* nearest neighbour, so without a
  floor any question would pull in facts, and negatives would "find"
  something).

Why this fusion: it keeps each part readable on its own (either alone gives
exactly its own value, so lexical-only recall scores as it always did), it
rises when both agree, and it never exceeds 1, so the spec's score
(weight x (0.75 relevance + 0.15 trust + 0.10 recency)) and the 0.3 injection
threshold keep their meaning: trust and recency alone (at most 0.25) still
never inject.
"""

from __future__ import annotations

# all-MiniLM-L6-v2 cosines: unrelated sentences sit around -0.1 to 0.25,
# paraphrases and question/answer pairs from about 0.25 up; 0.6 and above
# is as good as a verbatim match. Measured on bench/recall_quality.py.
SEMANTIC_FLOOR = 0.25
SEMANTIC_FULL = 0.6


def semantic_part(similarity: float) -> float:
    """A cosine similarity as a relevance in [0, 1] (0 below the floor)."""
    if similarity <= SEMANTIC_FLOOR:
        return 0.0
    return min(1.0, (similarity - SEMANTIC_FLOOR) / (SEMANTIC_FULL - SEMANTIC_FLOOR))


def fuse(lexical: float, semantic: float) -> float:
    """The fused text relevance of a candidate (see the module docstring)."""
    return round(1.0 - (1.0 - lexical) * (1.0 - semantic), 6)
