r"""List-level features for the calibration map (2026-12-07-calibration-keyed-on-statements.md).

    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-07-list-features.py \
        runs/keyed.json sugar,topical-chat

Reads the logits ``2026-12-07-keyed-map.py`` wrote and fits a logistic map on each candidate's logit
and features of its list (the gap to the list's best logit, the list's mean and spread, its size) on
the dev samples named, by scikit-learn as the export fits. Within a list only the logit and its gap
move, so a map whose two coefficients sum above zero (every fit in the note) keeps the ranking.
Prints the test sets' ECE under each.
"""

import json
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from dialogue_ranker.evaluation.metrics import expected_calibration_error as ece

KINDS = ["logit", "logit+gap", "logit+mean", "logit+gap+spread", "logit+gap+mean+size"]


def features(rows: list[dict], kind: str) -> tuple[np.ndarray, np.ndarray]:
    columns, outcomes = [], []
    for r in rows:
        z = np.array(r["z"])
        by_list = {"gap": z - z.max(), "mean": z.mean(), "spread": z.std(), "size": np.log(len(z))}
        names = kind.split("+")[1:]
        columns.append(np.stack([z, *(np.broadcast_to(by_list[n], z.shape) for n in names)], 1))
        outcomes += r["y"]
    return np.concatenate(columns), np.array(outcomes)


def main(scores: Path, pool: list[str]) -> None:
    sets = json.loads(scores.read_text())
    fit_rows = [r for k, rows in sets.items() if k.startswith("dev") and k[4:] in pool for r in rows]
    tests = [k for k in sets if k.startswith("test")]
    print("| features | coefficients | " + " | ".join(k[5:] for k in tests) + " |")
    for kind in KINDS:
        fitted = LogisticRegression(C=1e4, max_iter=1000).fit(*features(fit_rows, kind))
        cells = [
            f"{ece(fitted.predict_proba(x)[:, 1], y):.3f}"
            for x, y in (features(sets[k], kind) for k in tests)
        ]
        coefficients = f"{np.round(fitted.coef_[0], 2).tolist()} {fitted.intercept_[0]:+.2f}"
        print(f"| {kind} | {coefficients} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2].split(","))
