r"""Whether a run leaves 2.10.0's calibration frontier (2026-12-07-multi-right.md).

    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-07-multi-right-frontier.py \
        runs/probe-pointwise/start runs/probe-pointwise/control runs/probe-multi-right/multi-right

Scores each run on the dev samples of 2026-12-07-pointwise-per-file.py (the same lists), keeps the
slope of its SUGAR-fitted Platt map and moves the intercept over a grid; at each intercept, each
set's ECE. Prints per run the worst rise over the first run's ECE (at its own SUGAR map) across
SUGAR, Topical-Chat, SGD, persona chat, Taskmaster and DailyDialog++, at the SUGAR map and at the
best intercept. A run that leaves the frontier has a best worst rise at or below zero. DailyDialog++
is read, never fitted on: the intercept is the only thing chosen, and it is reported, not shipped.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import read_lists
from dialogue_ranker.evaluation.calibration import fit_platt
from dialogue_ranker.evaluation.domains import held_out
from dialogue_ranker.evaluation.metrics import expected_calibration_error as ece
from dialogue_ranker.training.evaluate_run import RunScorer

_spec = importlib.util.spec_from_file_location(
    "pointwise", Path(__file__).with_name("2026-12-07-pointwise-per-file.py")
)
pointwise = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pointwise)
SHIFTS = np.round(np.arange(-1.0, 1.01, 0.05), 2)


def curves(run: Path, lists: dict) -> tuple[dict, dict]:
    scorer = RunScorer(run, last_turn_weight=0.5)
    per_list = {name: scorer.logits(chosen) for name, chosen in lists.items()}
    z = {name: np.concatenate(logits) for name, logits in per_list.items()}
    y = {name: np.concatenate([[int(c.appropriate) for c in x.candidates] for x in chosen])
         for name, chosen in lists.items()}  # fmt: skip
    params = fit_platt(z["sugar"], y["sugar"]).params
    a, b = params["a"], params["b"]
    p_at_1 = {
        name: np.mean([chosen[i].candidates[int(np.argmax(zl))].appropriate for i, zl in enumerate(logits)])
        for (name, chosen), logits in zip(lists.items(), per_list.values(), strict=True)
    }
    mean_p = {n: float(np.mean(1 / (1 + np.exp(-(a * z[n] + b))))) for n in lists}
    print(
        run,
        "P@1",
        {n: round(float(v), 3) for n, v in p_at_1.items()},
        "mean p",
        {n: round(v, 3) for n, v in mean_p.items()},
    )
    out = {}
    for shift in SHIFTS:
        out[float(shift)] = {n: ece(1 / (1 + np.exp(-(a * z[n] + b + shift))), y[n]) for n in lists}
    return {"a": a, "b": b}, out


def main(runs: list[Path]) -> None:
    lists = {
        name: held_out(read_lists(pointwise.DATA / file), split, n, 0)
        for name, (file, split, n) in pointwise.SETS.items()
    }
    results = {run: curves(run, lists) for run in runs}
    base = results[runs[0]][1][0.0]
    print("base:", {n: round(e, 3) for n, e in base.items()})
    for run, (params, by_shift) in results.items():
        rises = {s: max(e[n] - base[n] for n in e) for s, e in by_shift.items()}
        best = min(rises, key=rises.get)
        print(f"{run}  map a {params['a']:.3f} b {params['b']:+.3f}")
        for label, s in (("SUGAR map", 0.0), (f"best shift {best:+.2f}", best)):
            row = "  ".join(f"{n} {e:.3f}" for n, e in by_shift[s].items())
            print(f"  {label:18} worst rise {rises[s]:+.3f}  {row}")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
