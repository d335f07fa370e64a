r"""Two runs' logits averaged per candidate (an output ensemble), against their weight average.

    HF_HUB_OFFLINE=1 .venv/bin/python -m experiments.output_ensemble --run runs/ranker-open \
        --with runs/ranker --weights 0,0.3,0.4,0.5,0.6,0.7,1

The soup (``training.interpolate``) averages the two runs' weights: one model, one pass. This
averages what they say instead, ``(1 - w) * run + w * other`` per candidate logit, each run scored
in PyTorch with the last-turn view as the service scores (``--last-turn-weight``): two passes a
request. Only the ranking figures are reported (P@1, nDCG@3, R@1 of 10, the within-context AUCs,
pairs agreed); calibration would be fitted on the combined logits by the export. Each run's logits
are kept in ``--out`` so more weights cost nothing. DailyDialog++ is read for evaluation and model
selection only (its licence).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from service.calibration import sigmoid
from training.domain_eval import RunScorer, evaluate, held_out
from training.ranking_data import read_lists

DATA = Path("runs/data")
#: name: (file, split, most lists), as the evaluation tables read them.
SETS = {
    "topical-chat dev": ("topical-chat.jsonl", "dev", 600),
    "topical-chat test": ("topical-chat.jsonl", "test", 600),
    "sugar dev": ("sugar.jsonl", "dev", 0),
    "sugar test": ("sugar.jsonl", "test", 0),
    "sugar unseen": ("sugar-unseen-by-both.jsonl", "all", 0),
    "dailydialog-pp": ("dailydialog-pp.jsonl", "all", 0),
}
SHOWN = ("precision_at_1", "ndcg_at_3", "r1_of_10", "auc_adversarial", "auc_random", "pair_agreement")


def load_sets() -> dict[str, list]:
    """Each set's lists, chosen as the evaluation CLI chooses them (``--max-lists``, seed 0).

    So the figures sit beside the evaluation tables' (the soup's) on the same lists.
    """
    return {
        name: held_out(read_lists(DATA / file), split, most) for name, (file, split, most) in SETS.items()
    }


def cached_logits(run: Path, sets: dict[str, list], out: Path, weight: float) -> dict[str, list[np.ndarray]]:
    """The run's logits of every set, kept in ``out`` under a digest of the sets' lists."""
    text = json.dumps({name: [x.to_json() for x in lists] for name, lists in sets.items()}, sort_keys=True)
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
    cache = out / f"{run.name}-view{weight:g}-{digest}.npz"
    ends = {name: np.cumsum([len(x.candidates) for x in lists])[:-1] for name, lists in sets.items()}
    if cache.exists():
        saved = np.load(cache, allow_pickle=False)
        return {name: np.split(saved[name], ends[name]) for name in sets}
    scorer = RunScorer(run, last_turn_weight=weight)
    logits = {name: scorer.logits(lists) for name, lists in sets.items()}
    out.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **{name: np.concatenate(zs) for name, zs in logits.items()})
    return logits


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--with", dest="other", type=Path, required=True)
    p.add_argument("--weights", default="0,0.5,1", help="the other run's shares to report")
    p.add_argument("--last-turn-weight", type=float, default=0.5)
    p.add_argument("--out", type=Path, default=Path("runs/output-ensemble"))
    args = p.parse_args(argv)
    sets = load_sets()
    mine, theirs = (
        cached_logits(run, sets, args.out, args.last_turn_weight) for run in (args.run, args.other)
    )
    report: dict[str, dict] = {}
    print("| share of " + args.other.name + " | " + " | ".join(SETS) + " |")
    for w in (float(x) for x in args.weights.split(",")):
        row = {}
        for name, lists in sets.items():
            combined = [(1 - w) * a + w * b for a, b in zip(mine[name], theirs[name], strict=True)]
            probs = [sigmoid(z) for z in combined]
            result = evaluate(lists, probs, 0.5)
            row[name] = {k: result[k] for k in SHOWN if result[k] is not None}
        report[str(w)] = row
        cells = [" / ".join(f"{v:.3f}" for v in row[name].values()) for name in sets]
        print(f"| {w:g} | " + " | ".join(cells) + " |", flush=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
