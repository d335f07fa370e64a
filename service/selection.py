"""Which situational statements the ranker sees, given their relevance probabilities.

The rule is shared by serving and evaluation so both select alike: keep each statement whose
calibrated relevance reaches the threshold, never fewer than ``min_keep`` (the best scored),
most relevant first. The ranker was trained on statements in shuffled order, and truncation
drops statements from the end of the list, so the least relevant go first when space runs out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def select_statements(relevance: Sequence[float], *, threshold: float, min_keep: int) -> list[int]:
    """Indices of the kept statements, by descending relevance (ties keep input order)."""
    probs = np.asarray(relevance, dtype=np.float64)
    if probs.size == 0:
        return []
    order = np.argsort(-probs, kind="stable")
    kept = [int(i) for i in order if probs[i] >= threshold]
    if len(kept) < min_keep:
        kept = [int(i) for i in order[: min(min_keep, probs.size)]]
    return kept
