r"""A second Platt map for requests without statements (2026-12-07-calibration-keyed-on-statements.md).

    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-07-keyed-map.py \
        runs/model-2.10.0 runs/keyed.json

Scores the shipped bundle with OpenVINO f32 (as ``--backend auto`` serves 2.10.0 on an AVX2 CPU) on
the release suite's list files: dev samples to fit on (shippable sets only), test samples to read.
The keyed map is fitted on the dev lists that carry no statement; lists with statements keep the
bundle's map. DailyDialog++'s own fit is printed for insight, never used.
"""

import json
import sys
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import read_lists
from dialogue_ranker.evaluation.calibration import fit_platt
from dialogue_ranker.evaluation.domains import held_out
from dialogue_ranker.evaluation.metrics import expected_calibration_error as ece
from dialogue_ranker.evaluation.release_suite import Scoring

DATA = Path("runs/dialogue-minilm-l6-2.11.0/data")
FIT = {"sugar": "sugar.jsonl", "topical-chat": "topical-chat.jsonl", "persona-chat": "persona-chat.jsonl",
       "taskmaster": "taskmaster.jsonl"}  # fmt: skip
TEST = {"sugar": ("sugar.jsonl", "test"), "topical-chat": ("topical-chat.jsonl", "test"),
        "dailydialog-pp": ("dailydialog-pp.jsonl", "all"),
        "persona-chat": ("persona-chat.jsonl", "test")}  # fmt: skip


def scored(scorer, file: str, split: str) -> list[dict]:
    lists = held_out(read_lists(DATA / file), split, 600 if split != "dev" else 400, 0)
    return [
        {"statements": bool(x.situations), "z": z.tolist(), "y": [int(c.appropriate) for c in x.candidates]}
        for x, z in zip(lists, scorer.logits(lists), strict=True)
    ]


def pooled(rows: list[dict], statements: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    kept = [r for r in rows if statements is None or r["statements"] == statements]
    return np.array([z for r in kept for z in r["z"]]), np.array([y for r in kept for y in r["y"]])


def main(bundle_dir: Path, out: Path) -> None:
    scoring = Scoring(backend="openvino", precision="f32")
    bundle = scoring.bundle(bundle_dir)
    if out.exists():
        sets = json.loads(out.read_text())
    else:
        scorer = scoring.scorer(bundle)
        sets = {f"dev {k}": scored(scorer, f, "dev") for k, f in FIT.items()}
        sets |= {f"test {k}": scored(scorer, f, s) for k, (f, s) in TEST.items()}
        out.write_text(json.dumps(sets))
    one = bundle.calibration
    fit_rows = [r for k, rows in sets.items() if k.startswith("dev") for r in rows]
    keyed = fit_platt(*pooled(fit_rows, statements=False))
    print(f"bundle map {one.to_dict()}; without statements {keyed.to_dict()}")
    print("| test set | lists (bare) | appropriate | ECE, one map | ECE, keyed | bare lists: one / keyed |")
    for name in [k for k in sets if k.startswith("test")]:
        rows = sets[name]
        z, y = pooled(rows)
        keyed_p = np.concatenate([(one if r["statements"] else keyed)(np.array(r["z"])) for r in rows])
        zn, yn = pooled(rows, statements=False)
        plain = f"{ece(one(zn), yn):.3f} / {ece(keyed(zn), yn):.3f}" if len(yn) else "-"
        bare = sum(not r["statements"] for r in rows)
        cells = [name[5:], f"{len(rows)} ({bare})", f"{y.mean():.3f}", f"{ece(one(z), y):.3f}"]
        print("| " + " | ".join([*cells, f"{ece(keyed_p, y):.3f}", plain]) + " |")
    z, y = pooled(sets["test dailydialog-pp"])
    own = fit_platt(z, y)
    print(f"DailyDialog++'s own fit (insight only): {own.to_dict()}, ECE {ece(own(z), y):.3f}")
    print(f"DailyDialog++'s mean probability under the bundle's map: {one(z).mean():.3f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
