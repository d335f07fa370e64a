"""Ranking, calibration and abstention metrics, as the SUGAR paper and the service define them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def precision_at_1(scores: Sequence[float], labels: Sequence[int]) -> float:
    """1.0 when the top-scored candidate has the highest rating present (ties count), else 0.0."""
    top = int(np.argmax(np.asarray(scores)))
    return float(labels[top] == max(labels))


def ndcg_at_k(scores: Sequence[float], labels: Sequence[int], k: int = 3) -> float:
    """nDCG@k with the ratings as gains: sum(rel_i / log2(i + 1)) over the top k, normalised."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    gains = [labels[i] for i in order[:k]]
    ideal = sorted(labels, reverse=True)[:k]
    dcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def reciprocal_rank(scores: Sequence[float], labels: Sequence[int]) -> float:
    """1 / rank of the first candidate carrying the highest rating present."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    best = max(labels)
    for rank, i in enumerate(order, start=1):
        if labels[i] == best:
            return 1.0 / rank
    return 0.0


def ordered_pairs(scores: Sequence[float], grades: Sequence[float]) -> tuple[float, int]:
    """Of the candidate pairs whose grades differ, how many the scores order the same way (ties half).

    Returns (agreeing, pairs) so a dataset pools its pairs: the share of response pairs a ranker
    orders as the human ratings do, the agreement measure of response-rating studies.
    """
    s = np.asarray(scores, dtype=np.float64)
    g = np.asarray(grades, dtype=np.float64)
    upper = np.triu(np.ones((len(g), len(g)), dtype=bool), k=1)
    rated = upper & (g[:, None] != g[None, :])
    same_way = np.sign(s[:, None] - s[None, :]) * np.sign(g[:, None] - g[None, :])
    return float(np.sum((same_way[rated] + 1) / 2)), int(rated.sum())


def expected_calibration_error(probs: Sequence[float], outcomes: Sequence[int], bins: int = 10) -> float:
    """ECE over equal-width probability bins: sum_b (n_b / n) * |mean(p) - mean(y)| in bin b."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(outcomes, dtype=np.float64)
    if len(p) == 0:
        return 0.0
    # Bin b holds (b/bins, (b+1)/bins]; p == 0 falls in the first bin.
    which = np.clip(np.ceil(p * bins).astype(int) - 1, 0, bins - 1)
    ece = 0.0
    for b in range(bins):
        mask = which == b
        if mask.any():
            ece += mask.mean() * abs(p[mask].mean() - y[mask].mean())
    return float(ece)


def reliability_bins(probs: Sequence[float], outcomes: Sequence[int], bins: int = 10) -> list[dict]:
    """Per-bin count, mean predicted probability and observed frequency (for the diagram)."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(outcomes, dtype=np.float64)
    which = np.clip(np.ceil(p * bins).astype(int) - 1, 0, bins - 1)
    rows = []
    for b in range(bins):
        mask = which == b
        rows.append(
            {
                "low": b / bins,
                "high": (b + 1) / bins,
                "count": int(mask.sum()),
                "mean_prob": float(p[mask].mean()) if mask.any() else None,
                "frequency": float(y[mask].mean()) if mask.any() else None,
            }
        )
    return rows


def abstention_accuracy(
    probs_per_example: Sequence[Sequence[float]],
    labels_per_example: Sequence[Sequence[int]],
    threshold: float,
) -> float:
    """Abstention accuracy over examples that have a bad candidate.

    Two decisions per example: the full candidate set must not abstain (its best probability
    reaches the threshold) and the set of only its bad candidates must abstain (none reaches it).
    """
    decisions = []
    for probs, labels in zip(probs_per_example, labels_per_example, strict=True):
        if 0 not in labels:
            continue
        bad = [p for p, lab in zip(probs, labels, strict=True) if lab == 0]
        decisions.append(max(probs) >= threshold)
        decisions.append(max(bad) < threshold)
    return float(np.mean(decisions)) if decisions else 0.0


def best_abstention_threshold(
    probs_per_example: Sequence[Sequence[float]], labels_per_example: Sequence[Sequence[int]]
) -> tuple[float, float]:
    """The threshold maximising abstention accuracy (midpoint of the best interval) and its accuracy.

    The grid is every midpoint between adjacent distinct probabilities (and just outside both
    ends); each is scored with :func:`abstention_accuracy`'s two decisions per example, counted by
    binary search over the examples' best and best-bad probabilities, so a thousand lists of
    fifteen candidates take milliseconds, not the minute a loop over the grid took.
    """
    candidates = np.unique(np.asarray([float(p) for probs in probs_per_example for p in probs]))
    if not len(candidates):
        return 0.5, 0.0
    grid = np.concatenate(
        ([candidates[0] - 1e-6], (candidates[:-1] + candidates[1:]) / 2, [candidates[-1] + 1e-6])
    )
    best_all, best_bad = [], []
    for probs, labels in zip(probs_per_example, labels_per_example, strict=True):
        if 0 in labels:
            best_all.append(max(probs))
            best_bad.append(max(p for p, lab in zip(probs, labels, strict=True) if lab == 0))
    if not best_all:
        return float(np.clip(grid[len(grid) // 2], 0.0, 1.0)), 0.0
    # Right decisions at t: the full set keeps an answer (best >= t), the bad set abstains (best bad < t).
    kept = len(best_all) - np.searchsorted(np.sort(best_all), grid, side="left")
    abstained = np.searchsorted(np.sort(best_bad), grid, side="left")
    right = kept + abstained
    best = grid[right == right.max()]
    # The middle of the optimal thresholds is the one least sensitive to a shift between splits.
    return float(np.clip(best[len(best) // 2], 0.0, 1.0)), float(right.max() / (2 * len(best_all)))
