"""Paired bootstrap intervals of the difference between two models' metric on the same items.

A metric here is a function of per-item sums: each item (a ranking list, a hand-made case, a bank
query) contributes a row of numbers, and the metric reads the column sums of the items drawn. A
mean (P@1, nDCG@3) is ``sum(value) / sum(1)``; a pooled share (situation flip, pairs agreed) is
``sum(won) / sum(pairs)``; ECE over equal-width bins is ``sum_b |sum(p in b) - sum(y in b)| /
sum(n)``. So one resample is a vector of how many times each item was drawn, and every metric of
it is a matrix product: thousands of resamples cost a fraction of a second.

Paired: both models' rows are summed with the same draws, so the interval is of the difference on
the same items, which is much narrower than two independent intervals would suggest (the items'
own difficulty cancels). The interval is the percentile interval of the resampled differences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Resamples by default: the 2.5th and 97.5th percentiles of 1,000 move by about 0.1 of the
#: interval's width between seeds, well under the differences the gate is for.
RESAMPLES = 1000


@dataclass(frozen=True)
class Metric:
    """A metric of per-item rows: ``value(sums)`` maps column sums (resamples x columns) to values."""

    name: str
    value: Callable[[np.ndarray], np.ndarray]
    #: Whether a larger value is better (False for ECE).
    higher_is_better: bool = True


def ratio(name: str, *, higher_is_better: bool = True) -> Metric:
    """``sum(column 0) / sum(column 1)``: a mean (column 1 all ones) or a pooled share."""

    def value(sums: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums[..., 0] / sums[..., 1]

    return Metric(name, value, higher_is_better)


def ratio_rows(numerators: np.ndarray, denominators: np.ndarray | None = None) -> np.ndarray:
    """Rows for :func:`ratio`: each item's numerator and denominator (default 1: a mean)."""
    numerators = np.asarray(numerators, dtype=np.float64)
    ones = np.ones_like(numerators) if denominators is None else np.asarray(denominators, dtype=np.float64)
    return np.stack([numerators, ones], axis=1)


def ece_metric(name: str = "ece", bins: int = 10) -> Metric:
    """Expected calibration error over ``bins`` equal-width bins, from :func:`ece_rows` rows."""

    def value(sums: np.ndarray) -> np.ndarray:
        count, prob, outcome = sums[..., :bins], sums[..., bins : 2 * bins], sums[..., 2 * bins :]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.abs(prob - outcome).sum(axis=-1) / count.sum(axis=-1)

    return Metric(name, value, higher_is_better=False)


def ece_rows(probs: list[np.ndarray], outcomes: list[np.ndarray], bins: int = 10) -> np.ndarray:
    """Per item (a list of candidates): per bin its candidates, their probabilities' sum, their outcomes' sum.

    The bins are :func:`dialogue_ranker.evaluation.metrics.expected_calibration_error`'s: bin b holds
    (b/bins, (b+1)/bins], a probability of 0 the first.
    """
    rows = np.zeros((len(probs), 3 * bins))
    for i, (p, y) in enumerate(zip(probs, outcomes, strict=True)):
        p, y = np.asarray(p, dtype=np.float64), np.asarray(y, dtype=np.float64)
        which = np.clip(np.ceil(p * bins).astype(int) - 1, 0, bins - 1)
        rows[i, :bins] = np.bincount(which, minlength=bins)
        rows[i, bins : 2 * bins] = np.bincount(which, weights=p, minlength=bins)
        rows[i, 2 * bins :] = np.bincount(which, weights=y, minlength=bins)
    return rows


@dataclass(frozen=True)
class Interval:
    """A metric of two models on the same items: both values, their difference and its interval."""

    shipped: float
    candidate: float
    low: float
    high: float
    items: int

    @property
    def difference(self) -> float:
        """The candidate's value minus the shipped model's."""
        return self.candidate - self.shipped


def draws(items: int, *, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """(resamples x items): how many times each item is drawn in each resample (``items`` draws each)."""
    rng = np.random.default_rng(seed)
    picked = rng.integers(0, items, size=(resamples, items))
    counts = np.zeros((resamples, items))
    np.add.at(counts, (np.arange(resamples)[:, None], picked), 1.0)
    return counts


def paired_interval(
    metric: Metric,
    shipped: np.ndarray,
    candidate: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Both models' metric on their rows (the same items, in order), and the difference's interval.

    The paired bootstrap interval of candidate minus shipped. Raises ``ValueError`` when the rows
    are not of the same items.
    """
    shipped, candidate = np.asarray(shipped, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if shipped.shape != candidate.shape or shipped.ndim != 2 or len(shipped) == 0:
        raise ValueError(f"paired rows must be of the same items: {shipped.shape} and {candidate.shape}")
    weights = draws(len(shipped), resamples=resamples, seed=seed)
    differences = metric.value(weights @ candidate) - metric.value(weights @ shipped)
    # A resample without any item the metric counts (a share of no pairs) says nothing: left out.
    differences = differences[np.isfinite(differences)]
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(differences, [tail, 100 - tail]) if len(differences) else (np.nan, np.nan)
    return Interval(
        shipped=float(metric.value(shipped.sum(axis=0))),
        candidate=float(metric.value(candidate.sum(axis=0))),
        low=float(low),
        high=float(high),
        items=len(shipped),
    )
