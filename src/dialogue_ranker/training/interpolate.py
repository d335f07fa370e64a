"""Interpolate a fine-tuned run's weights back toward the backbone's (WiSE-FT), then re-calibrate.

    ranker interpolate --run runs/ranker --alpha 0.6 --out runs/ranker-mixed \
        --lists dailydialog-pp=runs/data/dailydialog-pp.jsonl

Fine-tuning on a few thousand lists of two domains wears away what all-MiniLM-L6-v2 knew about
replies in general: the fresh cosine head ranks DailyDialog++ dev replies well, and the further
training goes the less it does. A weighted average of the two sets of weights, ``(1 - alpha) x
fresh + alpha x fine-tuned``, keeps much of each (Wortsman et al., "Robust fine-tuning of zero-shot
models", CVPR 2022, report the same for image classifiers); it costs no training, only scoring.

The fresh model is the backbone with a fresh cosine head whose bias is the run's (the bias was
centred at the start of training and hardly moves). Only cosine-head runs can be interpolated: a
fresh linear head ranks at random, so there is nothing to move toward.

Every ``--alphas`` value is scored on the run's dev lists and on each ``--lists`` file (all of
it: use files no model trained on, such as DailyDialog++ dev, whose licence allows evaluation and
model selection). ``--alpha`` picks the one written to ``--out``, a run directory like
``dialogue_ranker.training.train``'s (calibration and threshold re-fitted on the dev lists), which ``python -m
dialogue_ranker.export --run`` takes.

``--with RUN:WEIGHT`` (repeatable) blends other fine-tuned runs of the same backbone and encoding
into the fine-tuned side first (a "model soup", Wortsman et al., ICML 2022): ``--run A --with
B:0.3 --alpha 0.9`` is ``0.1 x fresh + 0.9 x (0.7 x A + 0.3 x B)``. It combines runs trained on
different data without training again; the dev lists of every run are scored and calibrated on.

``--toward-bundle BUNDLE`` interpolates toward a bundle's weights (dequantized, as ``ranker train
--init-bundle`` starts from them) instead of the fresh model: for a fine-tune of a shipped bundle
(``ranker adapt``'s run), the line from the bundle it began at to where it ended. Any head then
interpolates, since the start ranks as the bundle does.

``--merge ties --density D`` blends them by TIES-merging instead (Yadav et al., NeurIPS 2023, with
``peft``'s implementation): each run's change from the fresh model keeps its largest ``D`` share
of entries per weight matrix, each entry takes the sign that the runs' kept changes sum to, and
the runs that agree with it are averaged (with even shares, a change only one run makes keeps its
full size, where the plain average halves it). Vectors (biases, LayerNorm, the head's scale) are
averaged as by default: pruning a handful of entries by magnitude means little.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import torch

from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error, read_lists
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.training.backbone import backbone_dir, device
from dialogue_ranker.training.dev_scoring import (
    calibrated_report,
    dev_logits,
    dev_report,
    fit_calibration,
    run_dev_lists,
    write_calibration,
)
from dialogue_ranker.training.recover import dequantized_ranker
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker, run_encoder

#: Any torch module: a ranker, or the banks' sentence encoder (``training.dual_encoder``).
Model = TypeVar("Model", bound=torch.nn.Module)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="a training.train run directory (cosine head)")
    p.add_argument("--alpha", type=float, default=None, help="weight of the fine-tuned model to write")
    p.add_argument("--alphas", default="", help="comma-separated weights to score side by side")
    p.add_argument("--out", default=None, help="run directory to write (with --alpha)")
    p.add_argument("--lists", action="append", default=[], help="NAME=FILE scored in full for each alpha")
    p.add_argument(
        "--with",
        dest="blend",
        action="append",
        default=[],
        metavar="RUN:WEIGHT",
        help="another fine-tuned run blended into the fine-tuned side with this weight (repeatable)",
    )
    p.add_argument(
        "--merge",
        choices=("average", "ties"),
        default="average",
        help="how --with runs are blended: their weighted average, or TIES-merging",
    )
    p.add_argument("--density", type=float, default=0.2, help="ties: share of each run's changes kept")
    p.add_argument(
        "--toward-bundle",
        type=Path,
        default=None,
        metavar="BUNDLE",
        help="interpolate toward this bundle's dequantized weights (a fine-tune's start), not the fresh "
        "model",
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = p.parse_args(argv)
    if not 0.0 < args.density <= 1.0:
        p.error(f"--density must be in (0, 1], got {args.density}")
    if args.merge == "ties" and not args.blend:
        p.error("--merge ties needs at least one --with run")
    try:
        args.blend = parse_blend(args.blend)
    except ValueError as exc:
        p.error(str(exc))
    if (args.alpha is None) != (args.out is None):
        p.error("--alpha and --out go together")
    for value in [args.alpha, *parse_alphas(args.alphas)]:
        if value is not None and not 0.0 <= value <= 1.0:
            p.error(f"alpha must be in [0, 1], got {value}")
    return args


def parse_alphas(text: str) -> list[float]:
    return [float(a) for a in text.split(",") if a.strip()]


def parse_blend(items: list[str]) -> list[tuple[Path, float]]:
    """``RUN:WEIGHT`` items; the weights are shares of the fine-tuned side, so they sum below 1."""
    blend = []
    for item in items:
        path, sep, weight = item.rpartition(":")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if not sep or not path or not 0.0 < value < 1.0:
            raise ValueError(f"--with takes RUN:WEIGHT with 0 < WEIGHT < 1, got {item!r}")
        blend.append((Path(path), value))
    if sum(w for _, w in blend) >= 1.0:
        raise ValueError("--with weights must sum below 1 (the rest is --run's share)")
    return blend


def run_backbone(config: dict) -> Path:
    """The backbone a run started from (the packaged one is recorded by label, not by path)."""
    recorded = config.get("backbone") or ""
    return Path(recorded) if recorded and Path(recorded).exists() else backbone_dir()


def interpolated(fresh: Model, tuned: Model, alpha: float) -> Model:
    """A copy of ``tuned`` with every weight at ``(1 - alpha) x fresh + alpha x tuned``."""
    return weighted_average([(tuned, alpha), (fresh, 1.0 - alpha)])


def weighted_average(models: list[tuple[Model, float]]) -> Model:
    """A copy of the first model with every floating-point weight at the weighted sum of the models'."""
    first = models[0][0]
    states = [(m.state_dict(), w) for m, w in models]
    model = copy.deepcopy(first)  # same encoder class, head and attention layout as the run
    mixed = {}
    for name, value in states[0][0].items():
        if value.is_floating_point():
            mixed[name] = sum(w * state[name] for state, w in states)
        else:
            mixed[name] = value.clone()
    model.load_state_dict(mixed)
    return model.eval()


def ties_merged(
    fresh: SharedPrefixRanker, models: list[tuple[SharedPrefixRanker, float]], density: float
) -> SharedPrefixRanker:
    """The models' weighted average, with each matrix instead fresh plus their changes TIES-merged.

    A share ``w`` of ``n`` runs weighs its change ``w x n`` (even shares: 1 each), so where only
    one run's change survives the sign election it is taken whole.
    """
    from peft.utils.merge_utils import ties

    base = fresh.state_dict()
    states = [m.state_dict() for m, _ in models]
    weights = torch.tensor([w * len(models) for _, w in models])
    model = weighted_average(models)  # vectors and integer buffers stay as averaged
    mixed = model.state_dict()
    for name, value in mixed.items():
        if value.is_floating_point() and value.dim() >= 2:
            changes = [state[name] - base[name] for state in states]
            mixed[name] = base[name] + ties(changes, weights, density)
    model.load_state_dict(mixed)
    return model.eval()


def load_tuned(run: Path, *, any_head: bool = False) -> SharedPrefixRanker:
    tuned = SharedPrefixRanker.load(run / "ranker").eval()
    if tuned.head_kind != "cosine" and not any_head:
        raise SystemExit(f"{run}: a {tuned.head_kind} head has no fresh model to interpolate toward")
    return tuned


def start_of(bundle: Path | None, config: dict, tuned: SharedPrefixRanker) -> SharedPrefixRanker:
    """Alpha 0: ``bundle``'s dequantized weights, or the fresh model with the run's head bias."""
    if bundle is not None:
        return dequantized_ranker(bundle, head=tuned.head_kind)[0].eval()
    fresh = SharedPrefixRanker.load(run_backbone(config), head="cosine").eval()
    fresh.head.bias.data.copy_(tuned.head.bias.data)
    return fresh


def blended(
    run: Path,
    config: dict,
    tuned: SharedPrefixRanker,
    blend: list[tuple[Path, float]],
    merge: Callable[[list[tuple[SharedPrefixRanker, float]]], SharedPrefixRanker] = weighted_average,
):
    """The fine-tuned side with ``--with`` runs blended in by ``merge``, and every run's dev lists.

    Also the ``--with`` runs' configurations, in ``blend``'s order, read once.
    """
    dev = run_dev_lists(config)
    parts, members = [(tuned, 1.0 - sum(w for _, w in blend))], []
    for other, weight in blend:
        other_config = json.loads((other / "config.json").read_text())
        for key in ("encoding", "backbone"):
            if other_config.get(key) != config.get(key):
                raise SystemExit(f"{other}: its {key} differs from {run}'s; only runs of one backbone blend")
        parts.append((load_tuned(other), weight))
        members.append(other_config)
        dev.update({k: v for k, v in run_dev_lists(other_config).items() if k not in dev})
    return (merge(parts) if blend else tuned), dev, members


def score_lists(model: SharedPrefixRanker, encoder: ListEncoder, lists: dict[str, list[RankingList]]) -> dict:
    """Uncalibrated metrics per file (AUCs and ranks do not depend on calibration)."""
    return dev_report(lists, dev_logits(model, encoder, lists))


def alpha_table(
    fresh: SharedPrefixRanker,
    tuned: SharedPrefixRanker,
    encoder: ListEncoder,
    lists: tuple[dict[str, list[RankingList]], dict[str, list[RankingList]]],
    alphas: list[float],
) -> dict[float, dict]:
    """Uncalibrated metrics per alpha: the dev lists per file (``dev NAME``), then the ``--lists`` files."""
    dev, extra = lists
    table = {}
    for alpha in sorted(set(alphas)):
        model = interpolated(fresh, tuned, alpha).to(device())
        table[alpha] = {
            **{f"dev {k}": v for k, v in score_lists(model, encoder, dev).items()},
            **score_lists(model, encoder, extra),
        }
        print(json.dumps({"alpha": alpha, **table[alpha]}), flush=True)
    return table


def write_interpolated(
    args: argparse.Namespace,
    run: Path,
    config: dict,
    models: tuple[SharedPrefixRanker, SharedPrefixRanker],
    encoder: ListEncoder,
    dev: dict[str, list[RankingList]],
    member_configs: list[dict],
    result: dict,
) -> None:
    """``--out``: the weights at ``--alpha`` as a run, calibration and threshold re-fitted on the dev lists.

    ``models``: the fresh and the fine-tuned (blended) ranker. Adds the calibrated dev metrics and
    the interpolation to ``result``, which the run's ``metrics.json`` gets beside the run's own.
    """
    fresh, tuned = models
    out = Path(args.out)
    # Scored where the lists' tensors go (a GPU when there is one).
    model = interpolated(fresh, tuned, args.alpha).to(device())
    logits = dev_logits(model, encoder, dev)
    fitted = fit_calibration(dev, logits)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "ranker", run / "ranker" / "tokenizer.json")
    write_calibration(out / "calibration.json", fitted)
    config = {
        **config,
        "out": str(out),
        "interpolation": {
            "from_run": str(run),
            "alpha": args.alpha,
            "toward": str(args.toward_bundle) if args.toward_bundle else "fresh",
            "merge": args.merge,
            **({"density": args.density} if args.merge == "ties" else {}),
            # Each member's own configuration, so the export's model card can list its stages.
            "with": [
                {"run": str(p), "weight": w, "config": c}
                for (p, w), c in zip(args.blend, member_configs, strict=True)
            ],
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    calibrated = calibrated_report(dev, logits, fitted)
    metrics = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").exists() else {}
    result.update({"dev": calibrated, "interpolation": config["interpolation"]})
    (out / "metrics.json").write_text(json.dumps({**metrics, **result}, indent=2))
    print(json.dumps({"dev": calibrated}, indent=2))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    run = Path(args.run)
    config = json.loads((run / "config.json").read_text())
    tuned = load_tuned(run, any_head=args.toward_bundle is not None)
    fresh = start_of(args.toward_bundle, config, tuned)
    encoder = run_encoder(run, config)
    merge = partial(ties_merged, fresh, density=args.density) if args.merge == "ties" else weighted_average
    tuned, dev, member_configs = blended(run, config, tuned, args.blend, merge)
    extra = {}
    for item in args.lists:
        name, _, path = item.partition("=")
        extra[name] = read_lists(path)

    table = alpha_table(fresh, tuned, encoder, (dev, extra), parse_alphas(args.alphas))
    if table:
        print(markdown(table))
    result: dict = {"alphas": {str(a): v for a, v in table.items()}}
    if args.alpha is not None:
        write_interpolated(args, run, config, (fresh, tuned), encoder, dev, member_configs, result)
    return result


def markdown(table: dict[float, dict]) -> str:
    """Alpha x (file, metric) for the metrics that the file has."""
    keys = ("precision_at_1", "ndcg_at_3", "r1_of_10", "auc_adversarial", "auc_random")
    first = next(iter(table.values()))
    columns = [(name, k) for name, m in first.items() for k in keys if m.get(k) is not None]
    head = "| alpha | " + " | ".join(f"{name} {k}" for name, k in columns) + " |"
    rows = [head, "|" + " --- |" * (len(columns) + 1)]
    for alpha, m in table.items():
        rows.append(f"| {alpha:g} | " + " | ".join(f"{m[name][k]:.3f}" for name, k in columns) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    exit_on_data_error(main)
