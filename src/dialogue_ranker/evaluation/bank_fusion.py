"""The arithmetic of a bank's final ranking: metrics of reranked lists, fusions, their fit, calibration.

A dev bank query's retrieved list is ``k`` bank responses, nearest first, each with its cosine,
the ranker's logit (views combined, as served) and each view's, the response's centred hubness in
the bank (:mod:`dialogue_ranker.serving.banks.hubness`); ``hits`` marks the query's own
good replies, ``kept`` the responses the service ranks (not masked as a repeat of a turn: a
Topical-Chat bank holds the conversation's own earlier turns, at cosine 1 with the query). Every
fusion maps those to one score per response; the list is then ordered by it (ties keep the
retrieval order, as the service's stable sort does; masked ones last) and measured: R@1, R@10 and
MRR, a query whose good replies were not retrieved counting as a miss. Everything works on
(queries x k) arrays at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.calibration import fit_platt
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.fusion import Fusion

#: The cosine weights tried for ``logit + w * cosine`` (the issue's 20 among them).
WEIGHTS = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0, 30.0, 50.0)
#: Reciprocal rank fusion's constant (the usual 60).
RRF_K = 60
#: Hubness weights tried, as multiples of the cosine weight (CSLS subtracts it at 1).
HUBNESS_RATIOS = (0.0, 0.5, 0.75, 1.0, 1.25, 1.5)
#: Prior weights tried for ``logit - beta * (prior - centre) + w * cosine``.
PRIOR_WEIGHTS = (0.5, 1.0)


@dataclass(frozen=True)
class Retrieved:
    """One dataset's queries and their ``k`` nearest bank responses under one retriever, scored."""

    cosines: np.ndarray
    logits: np.ndarray
    #: (queries x 3 x k): each view's logits, every turn, the last turn, the prior (NaN: not scored,
    #: as for a one-turn query).
    views: np.ndarray
    hits: np.ndarray
    kept: np.ndarray
    #: (queries x k): each retrieved response's centred hubness in its bank.
    hubness: np.ndarray

    @property
    def prior(self) -> np.ndarray:
        """The prior view's logits (NaN where a query has none)."""
        return self.views[:, 2]

    @property
    def queries(self) -> int:
        """How many queries."""
        return int(self.hits.shape[0])

    def subset(self, rows: np.ndarray) -> Retrieved:
        """The given queries only."""
        return Retrieved(*(getattr(self, f)[rows] for f in RETRIEVED_FIELDS))


def ranked_metrics(scores: np.ndarray, hits: np.ndarray, kept: np.ndarray | None = None) -> dict[str, float]:
    """R@1, R@10 and MRR of each row ordered by ``scores`` (stable: ties keep the given order).

    ``kept``: the entries ranked (the others, masked, go last and never count).
    """
    if kept is not None:
        scores, hits = np.where(kept, scores, -np.inf), hits & kept
    order = np.argsort(-scores, axis=1, kind="stable")
    ordered = np.take_along_axis(hits, order, axis=1)
    found = ordered.any(axis=1)
    first = np.argmax(ordered, axis=1)
    return {
        "r_at_1": round(float(np.mean(found & (first < 1))), 4),
        "r_at_10": round(float(np.mean(found & (first < 10))), 4),
        "mrr": round(float(np.mean(np.where(found, 1.0 / (first + 1), 0.0))), 4),
    }


def ranks(scores: np.ndarray) -> np.ndarray:
    """Each entry's rank in its row, 1 for the best (stable)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    out = np.empty_like(order)
    np.put_along_axis(out, order, np.arange(1, scores.shape[1] + 1)[None, :], axis=1)
    return out


def reciprocal_rank_fusion(r: Retrieved) -> np.ndarray:
    """1 / (60 + retrieval rank) + 1 / (60 + ranker rank)."""
    return 1.0 / (RRF_K + ranks(r.cosines)) + 1.0 / (RRF_K + ranks(r.logits))


def without_prior(r: Retrieved, beta: float, centre: float) -> np.ndarray:
    """The logit less ``beta`` times the prior view's (centred) logit, where there is one."""
    return r.logits - beta * np.nan_to_num(r.prior - centre, nan=0.0)


def fused(r: Retrieved, fusion: Fusion) -> np.ndarray:
    """The final scores ``fusion`` gives ``r``'s lists, as the service computes them."""
    return fusion.fuse(r.logits, r.cosines, r.hubness)


def fusions(r: Retrieved, centre: float, prior_centre: float) -> dict[str, np.ndarray]:
    """Every fusion tried, by name: the ranker, linear weights, hubness, rank fusion, the prior removed."""
    out = {"retrieval alone, its top k": r.cosines, "ranker alone": r.logits}
    out["cosine - hubness, its top k"] = r.cosines - r.hubness
    for w in WEIGHTS[1:]:
        out[linear_name(w)] = Fusion(cosine_weight=w, cosine_centre=centre).fuse(r.logits, r.cosines)
    for w in (8.0, 12.0, 20.0):
        for ratio in HUBNESS_RATIOS[1:]:
            fusion = Fusion(cosine_weight=w, cosine_centre=centre, hubness_weight=ratio * w)
            out[linear_name(w, ratio * w)] = fused(r, fusion)
    out["rank fusion (1/(60+rank), both)"] = reciprocal_rank_fusion(r)
    if not np.isnan(r.prior).all():
        for beta in PRIOR_WEIGHTS:
            for w in (5.0, 10.0, 20.0):
                score = without_prior(r, beta, prior_centre) + w * (r.cosines - centre)
                out[f"logit - {beta:g} x prior + {w:g} x cosine"] = score
    return out


def linear_name(weight: float, hubness_weight: float = 0.0) -> str:
    """A linear fusion's row name."""
    name = f"logit + {weight:g} x cosine"
    return f"{name} - {hubness_weight:g} x hubness" if hubness_weight else name


def pooled(retrieved: Sequence[Retrieved]) -> Retrieved:
    """Several datasets' queries as one (their lists must have the same ``k``)."""
    return Retrieved(*(np.concatenate([getattr(r, f) for r in retrieved]) for f in RETRIEVED_FIELDS))


RETRIEVED_FIELDS = ("cosines", "logits", "views", "hits", "kept", "hubness")


def centre_of(retrieved: Sequence[Retrieved]) -> float:
    """The mean cosine of the ranked (unmasked) retrieved responses: the fusion's ``cosine_centre``."""
    r = pooled(retrieved)
    return round(float(r.cosines[r.kept].mean()), 4)


def fit_weights(
    retrieved: Sequence[Retrieved],
    centre: float,
    weights: Sequence[float] = WEIGHTS,
    ratios: Sequence[float] = HUBNESS_RATIOS,
) -> tuple[Fusion, float]:
    """The fusion of best mean MRR over the datasets, and that MRR.

    Tried: each cosine weight ``w`` with each hubness weight ``ratio x w``; ties go to the smaller
    cosine weight, then the smaller hubness weight. A mean over datasets, not over their pooled
    queries: a bank of many queries does not outvote another.
    """
    best: tuple[Fusion, float] | None = None
    for w in weights:
        for ratio in ratios:
            fusion = Fusion(cosine_weight=w, cosine_centre=centre, hubness_weight=ratio * w)
            mrr = float(np.mean([ranked_metrics(fused(r, fusion), r.hits, r.kept)["mrr"] for r in retrieved]))
            if best is None or mrr > best[1] + 1e-9:
                best = (fusion, mrr)
    assert best is not None
    return best


def cross_validated(
    scored: dict[str, Retrieved], fit_on: Sequence[str], folds: int, seed: int
) -> tuple[dict[str, dict[str, float]], list[Fusion]]:
    """Each dataset's queries ranked by a fusion fitted on the other folds; the pooled metrics.

    Each dataset's queries fall in ``folds`` seeded parts. For each part, :func:`fit_weights` fits
    on the other parts of the ``fit_on`` datasets (as the fusion itself is fitted), and that fusion
    ranks the part; the metrics are over every part's queries at once. Every query is measured
    by weights that never saw it, and every query counts once: an estimate of what the fitting
    gives on unseen queries with less noise than one held-out sample. Also returns each fold's fit.
    """
    rng = np.random.default_rng(seed)
    parts = {name: rng.permutation(r.queries) % folds for name, r in scored.items()}
    centre = centre_of([scored[name] for name in fit_on])
    out = {name: np.empty_like(r.logits) for name, r in scored.items()}
    chosen = []
    for fold in range(folds):
        fusion, _ = fit_weights([scored[name].subset(parts[name] != fold) for name in fit_on], centre)
        chosen.append(fusion)
        for name, r in scored.items():
            rows = parts[name] == fold
            out[name][rows] = fused(r.subset(rows), fusion)
    metrics = {name: ranked_metrics(out[name], r.hits, r.kept) for name, r in scored.items()}
    return metrics, chosen


def transfer(scored: dict[str, Retrieved], centre: float) -> dict[str, dict[str, dict[str, float]]]:
    """The weights fitted on each dataset alone, and what they give on every dataset (do they transfer?)."""
    columns: dict[str, dict[str, dict[str, float]]] = {name: {} for name in scored}
    for fit_name, r in scored.items():
        fusion, _ = fit_weights([r], centre)
        name_of = linear_name(fusion.cosine_weight, fusion.hubness_weight)
        for name, x in scored.items():
            columns[name][f"fitted on {fit_name}: {name_of}"] = ranked_metrics(
                fused(x, fusion), x.hits, x.kept
            )
    return columns


def abstention_accuracy(
    probs: np.ndarray, hits: np.ndarray, threshold: float, kept: np.ndarray | None = None
) -> float:
    """Right decisions to answer or abstain, two per query as in ``ranker evaluate``.

    A query whose list holds one of its good replies must answer (its best probability reaches
    the threshold); the list without its good replies must abstain (its best stays below). A list
    with no good reply retrieved has only the second decision. Bank labels are a lower bound: an
    other conversation's reply that fits counts as wrong. Masked entries (not ``kept``) never count.
    """
    if kept is not None:
        probs, hits = np.where(kept, probs, -np.inf), hits & kept
    found = hits.any(axis=1)
    best_all = probs.max(axis=1)
    best_bad = np.where(hits, -np.inf, probs).max(axis=1)
    right = np.concatenate([(best_all >= threshold)[found], best_bad < threshold])
    return float(np.mean(right))


def best_threshold(probs: np.ndarray, hits: np.ndarray, kept: np.ndarray) -> float:
    """The threshold of best abstention accuracy on a 0.01 grid (the middle of the best ones)."""
    grid = np.round(np.arange(0.01, 1.0, 0.01), 2)
    accuracy = np.array([abstention_accuracy(probs, hits, float(t), kept) for t in grid])
    best = grid[accuracy == accuracy.max()]
    return float(best[len(best) // 2])


def calibration_rows(
    r: Retrieved, fusion: Fusion, bundle_map: Calibrator, bundle_threshold: float
) -> dict[str, dict[str, float]]:
    """ECE and abstention accuracy of the ranker's logits and the fused scores under each map."""
    scores = fused(r, fusion)
    rows: dict[str, tuple[np.ndarray, float]] = {
        "ranker alone, the bundle's map": (bundle_map(r.logits), bundle_threshold),
        "fused, the bundle's map": (bundle_map(scores), bundle_threshold),
    }
    if fusion.calibration is not None and fusion.threshold is not None:
        rows["fused, the bank's own map"] = (fusion.calibration(scores), fusion.threshold)
    return {name: _calibration(probs, r, t) for name, (probs, t) in rows.items()}


def _calibration(probs: np.ndarray, r: Retrieved, threshold: float) -> dict[str, float]:
    outcomes = r.hits[r.kept].astype(int)
    return {
        "ece": round(metrics.expected_calibration_error(probs[r.kept], outcomes), 4),
        "abstention_accuracy": round(abstention_accuracy(probs, r.hits, threshold, r.kept), 4),
        "threshold": round(threshold, 4),
        "mean_top_score": round(float(np.where(r.kept, probs, 0.0).max(axis=1).mean()), 4),
    }


def bank_map(r: Retrieved, fusion: Fusion) -> tuple[Calibrator, float]:
    """A Platt map fitted on fused scores and hits, and the threshold of best abstention under it."""
    scores = fused(r, fusion)
    calibration = fit_platt(scores[r.kept], r.hits[r.kept].astype(int))
    return calibration, best_threshold(calibration(scores), r.hits, r.kept)


def table(
    columns: dict[str, dict[str, dict[str, float]]], keys: Sequence[str] = ("r_at_1", "r_at_10", "mrr")
) -> str:
    """A markdown table: a row per method, for each column group (a dataset) its metrics."""
    groups = list(columns)
    methods: list[str] = []
    for group in groups:
        methods += [m for m in columns[group] if m not in methods]
    heads = {"r_at_1": "R@1", "r_at_10": "R@10", "mrr": "MRR", "ece": "ECE",
             "abstention_accuracy": "abstention acc.", "threshold": "threshold",
             "mean_top_score": "mean top score"}  # fmt: skip
    head = "| method | " + " | ".join(f"{g} {heads.get(k, k)}" for g in groups for k in keys) + " |"
    lines = [head, "| --- |" + " ---: |" * (len(groups) * len(keys))]

    def cell(m: dict[str, float] | None, k: str) -> str:
        return "-" if m is None or m.get(k) is None else f"{m[k]:.3f}"

    for method in methods:
        cells = [cell(columns[g].get(method), k) for g in groups for k in keys]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
