r"""The pointwise loss weighted per file (2026-12-07-pointwise-per-file.md).

    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-07-pointwise-per-file.py \
        runs/probe-pointwise/OUT.json runs/probe-pointwise/control runs/probe-pointwise/weighted

Scores each training run in PyTorch (full view plus the last turn at 0.5, as 2.10.0 serves) on dev
samples of the shippable sets and on DailyDialog++ (evaluation only), fits a Platt map on SUGAR's
dev lists alone (as the export's ``--calibrate-on sugar``), and prints per run: the map, SUGAR's
right replies' mean logit, and each set's P@1 and ECE under that map. Nothing is fitted on
DailyDialog++.
"""

import json
import sys
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import read_lists
from dialogue_ranker.evaluation.calibration import fit_platt
from dialogue_ranker.evaluation.domains import held_out
from dialogue_ranker.evaluation.metrics import expected_calibration_error as ece
from dialogue_ranker.training.evaluate_run import RunScorer

DATA = Path("runs/dialogue-minilm-l6-2.11.20/data")
SETS = {
    "sugar": ("sugar.jsonl", "dev", 0),  # every dev list (196)
    "topical-chat": ("topical-chat.jsonl", "dev", 200),
    "sgd": ("sgd-train.jsonl", "dev", 200),
    "persona-chat": ("persona-chat.jsonl", "dev", 200),
    "taskmaster": ("taskmaster.jsonl", "dev", 200),
    "dailydialog-pp": ("dailydialog-pp.jsonl", "all", 200),  # evaluation only
}


def figures(run: Path, lists: dict) -> dict:
    scorer = RunScorer(run, last_turn_weight=0.5)
    logits = {name: scorer.logits(chosen) for name, chosen in lists.items()}
    labels = {name: [np.array([int(c.appropriate) for c in x.candidates]) for x in chosen]
              for name, chosen in lists.items()}  # fmt: skip
    platt = fit_platt(np.concatenate(logits["sugar"]), np.concatenate(labels["sugar"]))
    right = np.concatenate([z[y == 1] for z, y in zip(logits["sugar"], labels["sugar"], strict=True)])
    sets = {}
    for name in lists:
        z, y = logits[name], labels[name]
        p1 = np.mean([y_[int(np.argmax(z_))] == 1 for z_, y_ in zip(z, y, strict=True)])
        probs, outcomes = np.asarray(platt(np.concatenate(z))), np.concatenate(y)
        sets[name] = {
            "p_at_1": round(float(p1), 3),
            "ece": round(ece(probs, outcomes), 3),
            "mean_p": round(float(probs.mean()), 3),
            "share": round(float(outcomes.mean()), 3),
        }
    return {"map": {k: round(v, 3) for k, v in platt.params.items()},
            "sugar_right_mean_logit": round(float(right.mean()), 3), "sets": sets}  # fmt: skip


def main(out: Path, runs: list[Path]) -> None:
    lists = {name: held_out(read_lists(DATA / file), split, n, 0) for name, (file, split, n) in SETS.items()}
    result = {str(run): figures(run, lists) for run in runs}
    out.write_text(json.dumps(result, indent=1))
    for run, f in result.items():
        print(run, f["map"], "SUGAR right mean logit", f["sugar_right_mean_logit"])
        for name, s in f["sets"].items():
            mean = f"mean p {s['mean_p']:.3f} / share {s['share']:.3f}"
            print(f"  {name:15} P@1 {s['p_at_1']:.3f}  ECE {s['ece']:.3f}  {mean}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
