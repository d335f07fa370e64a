"""What the experiments share: the dev split, the shipped model's graphs, and one report line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from service.model_bundle import load_bundle
from training.evaluate import Evaluator
from training.ranker import ranking_metrics
from training.selector import precision_recall
from training.sugar import SugarExample, load_sugar, select, split_indices

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SUGAR = Path("../shared/data/sugar/sugar.jsonl")
# The experiments study model 1.1.0's statement selector (retired; 2.0 has none). Restore it with
# `git checkout 7983f94 -- models/sugar-minilm-l6` before running them.
MODEL = Path("models/sugar-minilm-l6")


def splits() -> tuple[list[SugarExample], list[SugarExample]]:
    """The train and dev examples of the shipped model's split (the test split is never read)."""
    examples = load_sugar(SUGAR)
    seed = int(load_bundle(MODEL).metadata["training_data"]["split_seed"])
    ids = split_indices(examples, seed=seed)
    return select(examples, ids["train"]), select(examples, ids["dev"])


def evaluator() -> Evaluator:
    """The shipped model's graphs, run as the service runs them."""
    return Evaluator(load_bundle(MODEL))


def shipped_relevance(ev: Evaluator, dev: Sequence[SugarExample]) -> list[np.ndarray]:
    """The shipped selector's calibrated relevance of each dev example's 12 statements."""
    spec = ev.bundle.selector
    assert spec is not None
    return [spec.calibration(z) for z in ev.selector_logits(dev, "u+S")]


def report(
    name: str,
    ev: Evaluator,
    dev: Sequence[SugarExample],
    kept: Sequence[Sequence[int]],
    logits: Sequence[np.ndarray] | None = None,
) -> Sequence[np.ndarray]:
    """Print selection F1/P/R and the ranker's P@1 and nDCG@3 with the kept statements."""
    if logits is None:
        logits = ev.logits(dev, [[e.statements[i] for i in k] for e, k in zip(dev, kept, strict=True)])
    m = ranking_metrics(logits, dev)
    pr = precision_recall(kept, [list(e.gold) for e in dev])
    print(
        f"{name}: selection F1 {pr['f1']:.3f} P {pr['precision']:.3f} R {pr['recall']:.3f} | "
        f"P@1 {m['precision_at_1']:.3f} nDCG@3 {m['ndcg_at_3']:.3f}",
        flush=True,
    )
    return logits
