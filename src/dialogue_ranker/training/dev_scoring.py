"""A run's dev lists scored, ranked and calibrated (Platt and the abstention threshold).

``ranker train`` calibrates a run with these; the export, the soups (``interpolate``), ``recover``
and ``ranker evaluate`` score and re-fit on the same dev lists, read back from the run's config.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.evaluation import calibration as calibrate
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.domains import evaluate
from dialogue_ranker.serving.calibration import Calibrator, sigmoid
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.training.backbone import device
from dialogue_ranker.training.shared_prefix import score_requests
from dialogue_ranker.training.train_lists import Source, encode, load_splits


def run_dev_lists(config: dict[str, Any]) -> dict[str, list[RankingList]]:
    """The dev lists a run was scored and calibrated on, from its ``config.json``."""
    split_args = argparse.Namespace(
        data=[Source(d["name"], Path(d["file"]), d["weight"]) for d in config["data"]],
        seed=config["seed"],
        dev_seed=config.get("dev_seed"),  # absent in runs from before --dev-seed
        dev_lists=config["dev_lists"],
        limit=config.get("limit"),
    )
    return load_splits(split_args)[1]


def dev_logits(model, encoder: ListEncoder, dev: dict[str, list[RankingList]]) -> dict[str, list[np.ndarray]]:
    """Candidate logits of every dev list, per file."""
    return {
        name: [
            np.asarray(z)
            for z in score_requests(model, encoder, [encode(encoder, x) for x in lists], device())
        ]
        for name, lists in dev.items()
    }


def dev_report(dev: dict[str, list[RankingList]], logits: dict[str, list[np.ndarray]]) -> dict[str, dict]:
    """Ranking metrics per file on uncalibrated scores (calibration does not change the order)."""
    return {name: evaluate(lists, [sigmoid(z) for z in logits[name]], 0.5) for name, lists in dev.items()}


def fit_calibration(
    dev: dict[str, list[RankingList]], logits: dict[str, list[np.ndarray]], *, keep_identity: bool = False
) -> dict[str, Any]:
    """Platt (isotonic as the alternative) and the abstention threshold on the pooled dev lists.

    Returns the maps, the threshold, its abstention accuracy, and the pooled logits and outcomes.
    When the logits do not order the classes Platt fails: ``keep_identity`` keeps the identity map
    instead (training, where only an undertrained smoke run gets there; the export re-fits on the
    shipped graph without it and refuses such a model).
    """
    pooled = [(x, z) for name in dev for x, z in zip(dev[name], logits[name], strict=True)]
    flat = np.concatenate([z for _, z in pooled])
    outcomes = np.asarray([int(c.appropriate) for x, _ in pooled for c in x.candidates])
    maps = {"isotonic": calibrate.fit("isotonic", flat, outcomes)}
    try:
        maps["platt"] = calibrate.fit("platt", flat, outcomes)
    except ValueError as e:
        if not keep_identity:
            raise
        print(f"WARNING: {e}; the run keeps the identity map")
        maps["platt"] = Calibrator.identity()
    threshold, accuracy = metrics.best_abstention_threshold(
        [maps["platt"](z) for _, z in pooled], [[int(c.appropriate) for c in x.candidates] for x, _ in pooled]
    )
    return {
        "maps": maps,
        "threshold": threshold,
        "abstention_accuracy": accuracy,
        "logits": flat,
        "outcomes": outcomes,
    }


def calibrated_report(
    dev: dict[str, list[RankingList]], logits: dict[str, list[np.ndarray]], fitted: dict[str, Any]
) -> dict[str, dict]:
    """Metrics per file on probabilities from ``fitted`` (:func:`fit_calibration`), at its threshold."""
    platt = fitted["maps"]["platt"]
    return {name: evaluate(dev[name], [platt(z) for z in logits[name]], fitted["threshold"]) for name in dev}


def write_calibration(path: Path, fitted: dict[str, Any]) -> None:
    """A run's ``calibration.json``: every fitted map (Platt in use) and the abstention threshold."""
    calibration = {
        "method": "platt",
        "maps": {m: c.to_dict() for m, c in fitted["maps"].items()},
        "threshold": fitted["threshold"],
    }
    path.write_text(json.dumps(calibration, indent=2))
