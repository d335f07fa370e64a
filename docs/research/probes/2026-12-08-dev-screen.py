r"""The dev screen before an export (2026-12-08): P@1, ECE and abstention at 2.10.0's threshold, one pass.

    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-08-dev-screen.py \
        runs/probe-pointwise/start runs/probe-interp/pt-soup-4-a0.6 ...

The dev lists of 2026-12-07-interpolate-s24.py (600 of Topical-Chat), each run's logits with the
last-turn view at 0.5 and mapped by Platt on SUGAR's dev lists (``ranker export --calibrate-on
sugar``), as 2026-12-07-threshold-refit.py does. Per set: P@1, ECE (10 bins), and abstention
accuracy at 2.10.0's threshold (``--threshold-from``). The screen the soup of four's refusal asks
for (2026-12-08-soup-of-four-release-check.md): DailyDialog++ ECE no higher than 2.10.0's and
abstention within -0.005 on DailyDialog++ and SUGAR. DailyDialog++ is read, never trained or fitted on.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

from dialogue_ranker.evaluation import metrics

_spec = importlib.util.spec_from_file_location(
    "refit", Path(__file__).with_name("2026-12-07-threshold-refit.py")
)
refit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refit)
frontier = refit.frontier


def screen(run: Path, lists: dict) -> dict[str, dict[str, float]]:
    scorer = frontier.RunScorer(run, last_turn_weight=0.5)
    logits = {name: scorer.logits(chosen) for name, chosen in lists.items()}
    labels = {name: [[int(c.appropriate) for c in x.candidates] for x in chosen]
              for name, chosen in lists.items()}  # fmt: skip
    platt = frontier.fit_platt(
        np.concatenate(logits["sugar"]), np.concatenate([np.array(y) for y in labels["sugar"]])
    )
    out = {}
    for name in lists:
        probs = [platt(z) for z in logits[name]]
        out[name] = {
            "P@1": float(
                np.mean([metrics.precision_at_1(p, y) for p, y in zip(probs, labels[name], strict=True)])
            ),
            "ECE": metrics.expected_calibration_error(np.concatenate(probs), np.concatenate(labels[name])),
            "abstain": metrics.abstention_accuracy(probs, labels[name], refit.SHIPPED),
        }
    return out


def main(runs: list[Path]) -> None:
    lists = refit.dev_lists()
    for run in runs:
        print(run)
        for name, figures in screen(run, lists).items():
            row = "  ".join(f"{k} {v:.3f}" for k, v in figures.items())
            print(f"  {name:15} {row}", flush=True)


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
