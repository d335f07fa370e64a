r"""Abstention accuracy on dev at the shipped threshold and at a threshold chosen again (2026-12-07).

    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-07-threshold-refit.py \
        runs/probe-pointwise/start runs/probe-interp/pt-soup-23-24-a0.8 ...

The dev lists of 2026-12-07-interpolate-s24.py (600 of Topical-Chat), each run mapped by Platt on
SUGAR's dev lists (``ranker export --calibrate-on sugar``). For each run, every set's abstention
accuracy (metrics.abstention_accuracy) at 2.10.0's threshold (``--threshold-from``), at the threshold
best on SUGAR's dev lists, and at the one best on the five shippable sets pooled
(``--threshold-on``). DailyDialog++ is read, never chosen on: it is the row the release check of
soup 23+24 at 0.8 refused (-0.017 at 2.10.0's threshold).
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from dialogue_ranker.evaluation import metrics

_spec = importlib.util.spec_from_file_location(
    "frontier", Path(__file__).with_name("2026-12-07-multi-right-frontier.py")
)
frontier = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(frontier)
SHIPPABLE = ("sugar", "topical-chat", "sgd", "persona-chat", "taskmaster")
SHIPPED = float(json.loads(Path("runs/model-2.10.0/metadata.json").read_text())["threshold"])


def abstention(run: Path, lists: dict) -> dict[str, tuple[float, dict[str, float]]]:
    scorer = frontier.RunScorer(run, last_turn_weight=0.5)
    logits = {name: scorer.logits(chosen) for name, chosen in lists.items()}
    labels = {name: [[int(c.appropriate) for c in x.candidates] for x in chosen]
              for name, chosen in lists.items()}  # fmt: skip
    sugar_labels = np.concatenate([np.array(y) for y in labels["sugar"]])
    platt = frontier.fit_platt(np.concatenate(logits["sugar"]), sugar_labels)
    probs = {name: [platt(z) for z in logits[name]] for name in lists}
    thresholds = {
        "2.10.0's": SHIPPED,
        "SUGAR's best": metrics.best_abstention_threshold(probs["sugar"], labels["sugar"])[0],
        "pooled best": metrics.best_abstention_threshold(
            [p for s in SHIPPABLE for p in probs[s]], [y for s in SHIPPABLE for y in labels[s]]
        )[0],
    }
    return {
        label: (t, {name: metrics.abstention_accuracy(probs[name], labels[name], t) for name in lists})
        for label, t in thresholds.items()
    }


def dev_lists() -> dict:
    """Each set's dev lists, as 2026-12-07-interpolate-s24.py reads them, with 600 of Topical-Chat."""
    frontier.pointwise.SETS["topical-chat"] = ("topical-chat.jsonl", "dev", 600)
    return {
        name: frontier.held_out(frontier.read_lists(frontier.pointwise.DATA / file), split, n, 0)
        for name, (file, split, n) in frontier.pointwise.SETS.items()
    }


def main(runs: list[Path]) -> None:
    lists = dev_lists()
    for run in runs:
        print(run)
        for label, (t, acc) in abstention(run, lists).items():
            row = "  ".join(f"{n} {v:.3f}" for n, v in acc.items())
            print(f"  {label:13} threshold {t:.3f}  {row}", flush=True)


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
