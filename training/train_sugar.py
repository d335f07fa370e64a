"""Train the statement selector and the situated ranker on SUGAR, then calibrate both.

    python -m training.train_sugar --data ../shared/data/sugar/sugar.jsonl --out runs/sugar

The run directory gets ``config.json``, ``split.json`` (example ids per split; the test ids
are never read here), ``ranker/`` and ``selector/`` checkpoints, ``calibration.json`` (both
maps, the abstention threshold, the selector threshold), ``metrics.json`` and a reliability
diagram. ``python -m export`` turns the run into the model directory the service loads.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from service.calibration import Calibrator, sigmoid
from service.selection import choose_statements
from service.tokenization import PairEncoder
from training import calibrate, metrics
from training.backbone import backbone_dir, backbone_label, load_cross_encoder, seed_everything
from training.ranker import Augmentation, encode_lists, ranking_metrics, score_lists, train_ranker
from training.selector import (
    encode_selector_data,
    fit_relevance_calibration,
    precision_recall,
    selector_logits,
    train_selector,
)
from training.sugar import load_sugar, select, split_indices


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="SUGAR JSONL file")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument(
        "--backbone", default=None, help="backbone directory (default: the packaged all-MiniLM-L6-v2)"
    )
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--max-length", type=int, default=256, help="ranker pair length in tokens")
    p.add_argument("--selector-max-length", type=int, default=96)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--selector-epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=4e-5)
    p.add_argument("--selector-lr", type=float, default=4e-5)
    p.add_argument("--batch-examples", type=int, default=8, help="examples (lists of candidates) per step")
    p.add_argument("--selector-batch", type=int, default=64)
    p.add_argument("--tau", type=float, default=3.0, help="ListNet target temperature over the ratings")
    p.add_argument("--pointwise-weight", type=float, default=0.5)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--calibration", choices=("platt", "isotonic"), default="platt")
    p.add_argument(
        "--limit", type=int, default=None, help="use only the first N train/dev examples (smoke runs)"
    )
    p.add_argument("--max-steps", type=int, default=None, help="stop the ranker after N steps (smoke runs)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--crossfit-selections",
        action="store_true",
        help="train the ranker on out-of-fold selector output (two half-selectors) as well as noisy gold",
    )
    p.add_argument(
        "--selector-from",
        default=None,
        help="reuse the selector of an earlier run directory instead of training one (same split seed)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backbone = str(args.backbone or backbone_dir())

    examples = load_sugar(args.data)
    split = split_indices(examples, seed=args.seed)
    (out / "split.json").write_text(
        json.dumps({"data": str(Path(args.data).resolve()), "seed": args.seed, **split})
    )
    train, dev = select(examples, split["train"]), select(examples, split["dev"])
    if args.limit:
        train, dev = train[: args.limit], dev[: max(4, args.limit // 2)]
    print(f"examples: train {len(train)}, dev {len(dev)}, test {len(split['test'])} (test untouched)")

    ranker_enc = PairEncoder.from_file(backbone, max_length=args.max_length)
    selector_enc = PairEncoder.from_file(backbone, max_length=args.selector_max_length)

    # 1. Statement selector.
    if args.selector_from:
        sel_model = load_cross_encoder(Path(args.selector_from) / "selector")
    else:
        sel_model = fit_selector(args, backbone, selector_enc, train, seed=args.seed)
    dev_sel_logits = selector_logits(sel_model, selector_enc, dev, "u+S")
    sel_cal = fit_relevance_calibration(dev_sel_logits, dev)
    dev_relevance = [sel_cal(z) for z in dev_sel_logits]

    def selected(threshold: float) -> list[list[int]]:
        return [choose_statements(r, threshold=threshold, min_keep=1) for r in dev_relevance]

    grid = [round(t, 2) for t in np.arange(0.2, 0.81, 0.05)]
    f1_by_t = {t: precision_recall(selected(t), [e.gold for e in dev])["f1"] for t in grid}
    sel_threshold = max(grid, key=lambda t: (f1_by_t[t], -abs(t - 0.5)))
    print(f"selector: threshold {sel_threshold} (dev F1 {f1_by_t[sel_threshold]:.3f})")

    def statements(threshold: float) -> list[list[str]]:
        return [[e.statements[i] for i in idx] for e, idx in zip(dev, selected(threshold), strict=True)]

    selections = None
    if args.crossfit_selections:
        selections = crossfit_selections(args, backbone, selector_enc, train, sel_threshold)

    # 2. Ranker, early-stopped on dev nDCG@3 with the selector's statements (the serving path).
    aug = Augmentation()
    ranker, history = train_ranker(
        backbone,
        ranker_enc,
        train,
        dev,
        statements(sel_threshold),
        epochs=args.epochs,
        lr=args.lr,
        batch_examples=args.batch_examples,
        tau=args.tau,
        pointwise_weight=args.pointwise_weight,
        patience=args.patience,
        seed=args.seed,
        aug=aug,
        max_steps=args.max_steps,
        selections=selections,
    )

    # 3. Selector threshold end to end: the one that ranks dev best, F1-optimal on ties.
    end_to_end = {}
    for t in grid[::2]:
        scores = score_lists(ranker, ranker_enc, encode_lists(ranker_enc, dev, statements(t)))
        m = ranking_metrics(scores, dev)
        end_to_end[t] = m["precision_at_1"] + m["ndcg_at_3"]
    sel_threshold = max(end_to_end, key=lambda t: (end_to_end[t], f1_by_t[t]))
    selection_dev = precision_recall(selected(sel_threshold), [e.gold for e in dev])
    print(f"selector threshold end to end: {sel_threshold} {selection_dev}")

    # 4. Calibration and abstention threshold on dev, with the serving path's statements.
    dev_scores = score_lists(ranker, ranker_enc, encode_lists(ranker_enc, dev, statements(sel_threshold)))
    logits = np.concatenate(dev_scores)
    outcomes = np.asarray([int(y >= 1) for e in dev for y in e.labels])
    maps = {"isotonic": calibrate.fit("isotonic", logits, outcomes)}
    try:
        maps["platt"] = calibrate.fit("platt", logits, outcomes)
    except ValueError as e:
        # Only an undertrained ranker (a smoke run) gets here; export re-fits on the shipped graphs
        # and refuses a model whose logits do not order the classes.
        print(f"WARNING: {e}; the run keeps the identity map")
        maps["platt"] = Calibrator.identity()
    calibrator = maps[args.calibration]
    probs = [calibrator(s) for s in dev_scores]
    threshold, abstain_acc = metrics.best_abstention_threshold(probs, [e.labels for e in dev])
    raw_probs = sigmoid(logits)
    cal_probs = np.concatenate(probs)
    calibrate.reliability_diagram(
        {"uncalibrated": (raw_probs, outcomes), f"{args.calibration} (dev fit)": (cal_probs, outcomes)},
        out / "reliability_dev.png",
        title="Ranker calibration, SUGAR dev split",
    )
    dev_metrics = {
        **ranking_metrics(dev_scores, dev),
        "ece_before": metrics.expected_calibration_error(raw_probs, outcomes),
        "ece_after": metrics.expected_calibration_error(cal_probs, outcomes),
        "abstention_accuracy": abstain_acc,
        "selection": selection_dev,
    }

    # 5. Save the run.
    for name, model in (("ranker", ranker), ("selector", sel_model)):
        model.save_pretrained(out / name)
        shutil.copy(Path(backbone) / "tokenizer.json", out / name / "tokenizer.json")
    calibration = {
        "method": args.calibration,
        "maps": {m: c.to_dict() for m, c in maps.items()},
        "threshold": threshold,
        "selector": {
            "calibration": sel_cal.to_dict(),
            "threshold": sel_threshold,
            "min_keep": 1,
            "max_length": args.selector_max_length,
        },
    }
    (out / "calibration.json").write_text(json.dumps(calibration, indent=2))
    result = {
        "dev": dev_metrics,
        "history": history,
        "selector_f1_by_threshold": f1_by_t,
        "selector_end_to_end_by_threshold": end_to_end,
        "train_seconds": round(time.time() - started, 1),
        "examples": {"train": len(train), "dev": len(dev), "test": len(split["test"])},
    }
    (out / "metrics.json").write_text(json.dumps(result, indent=2))
    (out / "config.json").write_text(
        json.dumps(
            {**vars(args), "backbone": backbone_label(args.backbone), "augmentation": asdict(aug)}, indent=2
        )
    )
    print(json.dumps({"dev": dev_metrics, "train_seconds": result["train_seconds"]}, indent=2))
    return result


def fit_selector(args, backbone: str, encoder: PairEncoder, examples, *, seed: int):
    """A statement selector trained on ``examples`` with the run's selector settings."""
    return train_selector(
        backbone,
        encoder,
        encode_selector_data(encoder, examples),
        epochs=args.selector_epochs,
        lr=args.selector_lr,
        batch_size=args.selector_batch,
        seed=seed,
    )


def crossfit_selections(
    args, backbone: str, encoder: PairEncoder, train, threshold: float
) -> dict[int, list[str]]:
    """Statements an out-of-fold selector keeps for each training example, most relevant first.

    Two selectors, each trained on half of the training split, select for the other half, so the
    ranker trains on the kind of mistakes the shipped selector makes on unseen requests.
    """
    folds = [train[0::2], train[1::2]]
    selections: dict[int, list[str]] = {}
    for k, fold in enumerate(folds):
        other = folds[1 - k]
        model = fit_selector(args, backbone, encoder, other, seed=args.seed + k + 1)
        logits = selector_logits(model, encoder, fold, "u+S")
        cal = fit_relevance_calibration(logits, fold)
        for e, z in zip(fold, logits, strict=True):
            kept = choose_statements(cal(z), threshold=threshold, min_keep=1)
            selections[e.index] = [e.statements[i] for i in kept]
    quality = precision_recall(
        [[e.statements.index(s) for s in selections[e.index]] for e in train], [e.gold for e in train]
    )
    print(f"cross-fitted selections on train: {quality}")
    return selections


if __name__ == "__main__":
    main()
