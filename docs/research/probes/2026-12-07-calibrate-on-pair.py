r"""The frontier probe with the map fitted on more than SUGAR's dev lists (2026-12-07).

    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-07-calibrate-on-pair.py \
        runs/probe-pointwise/start runs/probe-interp/pt-soup-23-24 ...

As 2026-12-07-interpolate-s24.py (the same dev lists, 600 of Topical-Chat), with each run's Platt
map fitted three ways: on SUGAR's dev lists (``ranker export --calibrate-on sugar``, as shipped), on
SUGAR's and Topical-Chat's pooled (``--calibrate-on sugar,topical-chat``: Topical-Chat's 6,000
candidates outweigh SUGAR's), and on the five shippable sets with each set's candidates weighted
to an equal share (no export option does this yet). DailyDialog++ is read, never fitted on. Prints
each set's ECE at each map and the worst rise over the first run at its SUGAR map.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location(
    "frontier", Path(__file__).with_name("2026-12-07-multi-right-frontier.py")
)
frontier = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(frontier)
SHIPPABLE = ("sugar", "topical-chat", "sgd", "persona-chat", "taskmaster")
FITS = {
    "SUGAR map": (("sugar",), False),
    "SUGAR+TC map": (("sugar", "topical-chat"), False),
    "balanced map": (SHIPPABLE, True),
}


def platt(z: dict, y: dict, sets: tuple, balanced: bool):
    """Platt's map on the sets' candidates pooled; ``balanced`` gives each set an equal share."""
    pooled_z, pooled_y = np.concatenate([z[s] for s in sets]), np.concatenate([y[s] for s in sets])
    weight = None
    if balanced:
        weight = np.concatenate([np.full(len(z[s]), 1 / len(z[s])) for s in sets])
        weight *= len(weight)
    return frontier.fit_platt(pooled_z, pooled_y, weight)


def eces(run: Path, lists: dict) -> dict:
    scorer = frontier.RunScorer(run, last_turn_weight=0.5)
    z = {name: np.concatenate(scorer.logits(chosen)) for name, chosen in lists.items()}
    y = {name: np.concatenate([[int(c.appropriate) for c in x.candidates] for x in chosen])
         for name, chosen in lists.items()}  # fmt: skip
    out = {}
    for label, (sets, balanced) in FITS.items():
        calibrator = platt(z, y, sets, balanced)
        out[label] = (calibrator.params, {n: frontier.ece(calibrator(z[n]), y[n]) for n in lists})
    return out


def main(runs: list[Path]) -> None:
    frontier.pointwise.SETS["topical-chat"] = ("topical-chat.jsonl", "dev", 600)
    lists = {
        name: frontier.held_out(frontier.read_lists(frontier.pointwise.DATA / file), split, n, 0)
        for name, (file, split, n) in frontier.pointwise.SETS.items()
    }
    results = {run: eces(run, lists) for run in runs}
    base = results[runs[0]]["SUGAR map"][1]
    for run, by_fit in results.items():
        print(run)
        for label, (p, e) in by_fit.items():
            rise = max(e[n] - base[n] for n in e)
            row = "  ".join(f"{n} {v:.3f}" for n, v in e.items())
            print(f"  {label:13} a {p['a']:.3f} b {p['b']:+.3f}  worst rise {rise:+.3f}  {row}")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
