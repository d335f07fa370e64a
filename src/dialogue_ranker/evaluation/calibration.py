"""Fit, apply and draw the logit -> P(appropriate) calibration (scikit-learn does the fitting)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from dialogue_ranker.evaluation import metrics
from dialogue_ranker.serving.calibration import Calibrator


class UnorderedLogits(ValueError):
    """The logits do not order the classes: a Platt fit would fall as the logit rises."""


def fit_platt(
    logits: Sequence[float], outcomes: Sequence[int], sample_weight: Sequence[float] | None = None
) -> Calibrator:
    """Platt scaling: p = sigmoid(a * logit + b), fitted by (nearly unregularised) logistic regression.

    ``sample_weight`` weighs each logit's outcome (e.g. to give pooled sets equal shares).
    """
    x = np.asarray(logits, dtype=np.float64).reshape(-1, 1)
    model = LogisticRegression(C=1e4).fit(x, np.asarray(outcomes), sample_weight=sample_weight)
    a, b = float(model.coef_[0, 0]), float(model.intercept_[0])
    if a <= 0:
        raise UnorderedLogits("Platt fit gave a non-increasing map: the logits do not separate the classes")
    return Calibrator(method="platt", params={"a": a, "b": b})


def fit_isotonic(logits: Sequence[float], outcomes: Sequence[int]) -> Calibrator:
    """Isotonic regression, stored as its breakpoints for piecewise-linear interpolation."""
    x = np.asarray(logits, dtype=np.float64)
    model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(x, np.asarray(outcomes))
    xs, ys = model.X_thresholds_, model.y_thresholds_
    # Breakpoints may repeat an x; keep the last y of each so x is strictly increasing.
    keep = np.append(np.diff(xs) > 0, True)
    return Calibrator(method="isotonic", params={"x": xs[keep].tolist(), "y": ys[keep].tolist()})


def fit(method: str, logits: Sequence[float], outcomes: Sequence[int]) -> Calibrator:
    """Fit the named method: ``platt`` (default) or ``isotonic``."""
    if method == "platt":
        return fit_platt(logits, outcomes)
    if method == "isotonic":
        return fit_isotonic(logits, outcomes)
    raise ValueError(f"unknown calibration method {method!r}")


def reliability_diagram(
    curves: dict[str, tuple[Sequence[float], Sequence[int]]], path: str | Path, *, title: str
) -> None:
    """Draw observed frequency against predicted probability, one line per named curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5), dpi=110)
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect")
    for name, (probs, outcomes) in curves.items():
        bins = [b for b in metrics.reliability_bins(probs, outcomes) if b["count"]]
        ece = metrics.expected_calibration_error(probs, outcomes)
        ax.plot(
            [b["mean_prob"] for b in bins],
            [b["frequency"] for b in bins],
            marker="o",
            label=f"{name} (ECE {ece:.3f})",
        )
    ax.set_xlabel("predicted P(appropriate)")
    ax.set_ylabel("observed frequency")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
