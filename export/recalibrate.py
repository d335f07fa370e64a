"""Fit calibration and thresholds on the dev split with the graphs the service runs.

Training fits them on PyTorch's fp32 scores; int8 moves logits a little (mean 0.11 on dev), so
the shipped maps are re-fitted here on the shipped graphs, run as the service runs them:

1. the selector's Platt map, on its dev logits against the gold statement indices;
2. the selector's threshold, end to end: the one whose kept statements rank dev best;
3. the ranker's calibration map (Platt by default, isotonic kept as an alternative) and the
   abstention threshold, on the ranker's dev logits with the selector's statements.

The test split is never read here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from service.calibration import sigmoid
from service.model_bundle import load_bundle
from service.selection import choose_statements
from training import calibrate, metrics
from training.evaluate import Evaluator
from training.ranker import ranking_metrics
from training.selector import fit_relevance_calibration, precision_recall
from training.sugar import SugarExample

SELECTOR_THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)


def recalibrate(model_dir: Path, dev: Sequence[SugarExample], *, method: str = "platt") -> dict:
    """Re-fit the bundle's maps and thresholds on ``dev``; rewrites metadata.json. Returns dev metrics."""
    bundle = load_bundle(model_dir)
    assert bundle.selector is not None, "recalibration expects a bundle with a selector"
    evaluator = Evaluator(bundle)
    min_keep = bundle.selector.min_keep

    selector_logits = evaluator.selector_logits(dev, "u+S")
    selector_cal = fit_relevance_calibration(selector_logits, dev)
    relevance = [selector_cal(z) for z in selector_logits]

    def kept(threshold: float) -> list[list[int]]:
        return [choose_statements(r, threshold=threshold, min_keep=min_keep) for r in relevance]

    def statements(threshold: float) -> list[list[str]]:
        return [[e.statements[i] for i in k] for e, k in zip(dev, kept(threshold), strict=True)]

    by_threshold = {}
    for t in SELECTOR_THRESHOLDS:
        m = ranking_metrics(evaluator.logits(dev, statements(t)), dev)
        by_threshold[t] = {"precision_at_1": m["precision_at_1"], "ndcg_at_3": m["ndcg_at_3"]}
        print(f"selector threshold {t}: dev {by_threshold[t]}", flush=True)
    best_t = max(by_threshold, key=lambda t: (sum(by_threshold[t].values()), -abs(t - 0.5)))

    dev_logits = evaluator.logits(dev, statements(best_t))
    logits = np.concatenate(dev_logits)
    outcomes = np.asarray([int(y >= 1) for e in dev for y in e.labels])
    maps = {m: calibrate.fit(m, logits, outcomes) for m in ("platt", "isotonic")}
    probs = [maps[method](z) for z in dev_logits]
    threshold, abstain_acc = metrics.best_abstention_threshold(probs, [e.labels for e in dev])
    raw, cal = sigmoid(logits), np.concatenate(probs)
    calibrate.reliability_diagram(
        {"uncalibrated": (raw, outcomes), f"{method} (fitted on dev)": (cal, outcomes)},
        model_dir / "reliability_dev.png",
        title=f"{bundle.model_id}: calibration on the dev split",
    )
    dev_metrics = {
        **ranking_metrics(dev_logits, dev),
        "ece_before": metrics.expected_calibration_error(raw, outcomes),
        "ece_after": metrics.expected_calibration_error(cal, outcomes),
        "abstention_accuracy": abstain_acc,
        "selection": precision_recall(kept(best_t), [e.gold for e in dev]),
        "selector_threshold_scan": by_threshold,
    }
    meta_path = model_dir / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["selector"].update({"calibration": selector_cal.to_dict(), "threshold": best_t})
    meta["calibration"] = maps[method].to_dict()
    meta["calibration_alternatives"] = {m: c.to_dict() for m, c in maps.items()}
    meta["threshold"] = threshold
    meta["metrics"]["dev: u+S (all 12, selection), fitted here"] = dev_metrics
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return dev_metrics
