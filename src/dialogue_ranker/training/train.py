"""Train the shared-prefix ranker on a weighted mix of ranking-data files, then calibrate it.

    ranker train --data runs/data/sugar.jsonl:3 --data runs/data/topical-chat.jsonl:0.1 \
        --out runs/ranker

Every file is in the ranking-data format (:mod:`dialogue_ranker.data.ranking_data`); a user's own logs train
a bundle with the same command. ``FILE:WEIGHT`` sets how many passes over the file's training
lists one epoch makes (0.1: a fresh 10% sample each epoch; 3: three passes; default 1). Lists
are split by group with :func:`dialogue_ranker.evaluation.domains.group_split`, the same split the evaluation
CLI uses: training reads the train part, early stopping and calibration read the dev part, the
test part is never read.

Loss per list: ListNet over the candidates' gains plus a pointwise BCE on "appropriate" (see
the 1.1.0 per-pair ranker's listwise loss). Situations are shuffled in training so the model does
not learn their order; in half the lists that mark relevant situations (``--thinned``) half the
others are dropped. After each epoch the dev lists are scored; the epoch with the best mean
dev nDCG@3 over the files is kept. Calibration (Platt) and the abstention threshold are fitted
on the pooled dev lists of every file.

The run directory gets ``ranker/`` (encoder, head, tokenizer), ``calibration.json``,
``config.json`` and ``metrics.json``; ``ranker export --run`` makes the model directory.

``--init RUN`` starts from a finished run's ranker instead of the backbone: a second stage on
another mix (what ``make model`` does: the shipped model's first stage learns same-conversation
negatives, its second on-topic statements and other conversations' turns; README "Training").
The run records the first stage (``config.json``: ``init``) and keeps its backbone as the
backbone, so ``dialogue_ranker.training.interpolate`` still averages toward the untrained model.
``--init-bundle DIR`` starts from a shipped model directory instead: its graph's weights,
dequantized (:func:`training.recover.dequantized_ranker`).

``--teacher RUN:WEIGHT`` (repeatable) distils the output ensemble of finished runs into this one:
their weighted logits are soft targets beside the labels, on the same sequences, per view
(:mod:`training.distill`; ``--distill-weight`` sets the mix). ``--max-seconds`` ends training early
on a lent machine whose lease runs out; the run records the steps it took, and ``--stop-at N``
with the same ``--max-steps`` replays it.

Every ``--checkpoint-every`` steps (default 100) the run's whole state is saved under
``<out>/checkpoints/`` (atomically, the last two kept; :mod:`training.checkpoint`); after a kill,
the same command with ``--resume`` continues from the newest checkpoint and ends with the weights
an uninterrupted run ends with. A finished run removes its checkpoints.

``--layout pair`` trains the same encoder and head as a per-pair cross-encoder instead (each
candidate in a sequence of its own with the context, full attention) on the same lists, splits,
loss and dev metrics: the comparison the shared-prefix design is judged by. Such a run is not
exported.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from dialogue_ranker.data.ranking_data import DataError, RankingList, exit_on_data_error
from dialogue_ranker.evaluation import calibration as calibrate
from dialogue_ranker.serving.calibration import sigmoid
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.training import checkpoint
from dialogue_ranker.training.attention_dropout import set_attention_dropout
from dialogue_ranker.training.backbone import (
    backbone_dir,
    backbone_label,
    device,
    device_label,
    seed_everything,
)
from dialogue_ranker.training.dev_scoring import (
    calibrated_report,
    dev_logits,
    fit_calibration,
    write_calibration,
)
from dialogue_ranker.training.distill import Ensemble
from dialogue_ranker.training.freezing import freeze
from dialogue_ranker.training.low_rank import add_adapters
from dialogue_ranker.training.recover import dequantized_ranker
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker
from dialogue_ranker.training.train_args import build_parser, encoding_of, first_stage, split_shares
from dialogue_ranker.training.train_lists import load_splits
from dialogue_ranker.training.train_loop import Stopped, TrainingOutcome, train_epochs

#: Exit status of a run ended by --stop-after-steps (EX_TEMPFAIL: try again, with --resume).
STOPPED_STATUS = 75


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``ranker train``'s arguments (:mod:`training.train_args`), with this module's docstring as help."""
    parser = build_parser(__doc__)
    args = parser.parse_args(argv)
    if args.replan and args.max_seconds is None:
        parser.error("--replan fits the schedule to --max-seconds: give --max-seconds too")
    if args.max_steps == 0 and args.init_bundle is None:  # the recipe schema refuses it the same way
        parser.error("--max-steps 0 reads a bundle back as a run: it needs --init-bundle")
    try:
        args.distill_on, args.distill_shares = split_shares(args.distill_on, args.distill_weight)
    except ValueError as e:
        parser.error(str(e))
    if args.distill_shares and args.distill_replaces_labels:
        parser.error("--distill-replaces-labels is --distill-on NAME:1 for each name: give one or the other")
    named = [name for name, _ in args.pointwise_on]
    if len(set(named)) < len(named):
        parser.error(f"--pointwise-on: {sorted(n for n in named if named.count(n) > 1)[0]} is named twice")
    return args


def load_start(
    start: Path, args: argparse.Namespace, *, pair: bool
) -> tuple[ListEncoder, SharedPrefixRanker]:
    """The encoder and the model to train, from the backbone or (``--init``) the first stage's ranker."""
    # Training lists are one sequence each, however long: the chunk budgets are lifted. The pair
    # layout puts each candidate in a sequence of its own.
    encoder = ListEncoder.from_file(
        start,
        max_prefix_tokens=args.max_prefix_tokens,
        max_candidate_tokens=args.max_candidate_tokens,
        max_chunk_tokens=1 << 16,
        max_chunk_candidates=1 if pair else 1 << 10,
    )
    if args.init_bundle:
        model, moved = dequantized_ranker(start, head=args.head)
        print(f"--init-bundle {start}: dequantized ({moved})", flush=True)
        return encoder, model.to(device())
    model = SharedPrefixRanker.load(start, full_attention=pair, head=args.head).to(device())
    return encoder, model


def check_file_names(args: argparse.Namespace) -> None:
    """``--train-candidates-on``, ``--select-on``, ``--distill-on`` and ``--pointwise-on`` name files.

    ``--train-candidates-on`` also needs ``--train-candidates``, and ``--distill-on`` and ``--keep-top`` a
    ``--teacher``.
    """
    if args.train_candidates_on and not args.train_candidates:
        raise DataError(
            "--train-candidates-on chooses which lists --train-candidates cuts: give --train-candidates"
        )
    if args.distill_on and not args.teacher:
        raise DataError("--distill-on chooses where --teacher distils: give a --teacher")
    if args.keep_top and not args.teacher:
        raise DataError("--keep-top keeps the teachers' top candidates: give a --teacher")
    named = (
        ("--train-candidates-on", args.train_candidates_on),
        ("--select-on", args.select_on),
        ("--distill-on", args.distill_on),
        ("--pointwise-on", [name for name, _ in getattr(args, "pointwise_on", [])]),
    )
    for flag, names in named:
        unknown = sorted(set(names) - {s.name for s in args.data})
        if unknown:
            raise DataError(f"{flag} {unknown[0]}: no --data file has that name")


def load_teachers(args: argparse.Namespace, *, pair: bool) -> Ensemble | None:
    """``--teacher``'s runs as one output ensemble (None without ``--teacher``).

    ``--distill-on``'s names were checked before the lists were read (:func:`check_file_names`).
    """
    if args.distill_replaces_labels and not args.distill_on:
        raise DataError("--distill-replaces-labels needs --distill-on: the lists the teachers teach alone")
    if not args.teacher:
        return None
    if pair:
        raise DataError("--teacher distils into the shared-prefix layout only")
    return Ensemble(args.teacher, encoding_of(args, pair), device())


def calibrate_on_dev(
    model: SharedPrefixRanker, encoder: ListEncoder, dev: dict[str, list[RankingList]], out: Path
) -> tuple[dict[str, dict], dict[str, Any]]:
    """Calibration and the abstention threshold on the pooled dev lists of every file.

    Draws the run's reliability diagram; returns the calibrated dev metrics and the fitted maps.
    """
    logits = dev_logits(model, encoder, dev)
    fitted = fit_calibration(dev, logits, keep_identity=True)
    maps, flat, outcomes = fitted["maps"], fitted["logits"], fitted["outcomes"]
    calibrate.reliability_diagram(
        {
            "uncalibrated": (sigmoid(flat), outcomes),
            "platt (dev fit)": (maps["platt"](flat), outcomes),
        },
        out / "reliability_dev.png",
        title="Ranker calibration, pooled dev lists",
    )
    return calibrated_report(dev, logits, fitted), fitted


def run_config(
    args: argparse.Namespace,
    *,
    precision: str,
    init: dict[str, Any] | None,
    teachers: Ensemble | None,
    outcome: TrainingOutcome,
) -> dict[str, Any]:
    """The run's ``config.json``: its arguments and what they resolved to."""
    return {
        **vars(args),
        "training_precision": precision,
        "device": device_label(),
        "data": [{"file": str(s.path), "name": s.name, "weight": s.weight} for s in args.data],
        "backbone": init["backbone"] if init else backbone_label(args.backbone),
        "init": {"run": args.init or args.init_bundle, "config": init} if init else None,
        "teacher": teachers.configs if teachers else None,
        # What the schedule planned and what ran (they differ when --max-seconds or --stop-at ended it).
        "planned_steps": outcome.planned_steps,
        "schedule_steps": outcome.schedule_steps,
        "steps_taken": outcome.steps,
        "stopped_by": outcome.stopped_by,
        "encoding": encoding_of(args, args.layout == "pair"),
    }


def check_resumable(out: Path, *, resume: bool) -> None:
    """Refuse to resume a finished run, or to start over where an unfinished run left checkpoints."""
    if resume and (out / "config.json").is_file():
        raise DataError(f"--resume: {out} is a finished run (it has config.json); nothing to continue")
    if not resume and checkpoint.checkpoints(out):
        raise DataError(
            f"{out} holds checkpoints of an unfinished run: --resume continues it; remove the folder "
            "to start over"
        )


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    started = time.time()
    out = Path(args.out)
    check_resumable(out, resume=args.resume)
    out.mkdir(parents=True, exist_ok=True)
    init = first_stage(args)
    # A second stage starts from the first stage's weights and tokenizer (no packaged backbone needed).
    if args.init_bundle:  # the bundle's tokenizer.json sits in the model directory itself
        start = Path(args.init_bundle)
    else:
        start = Path(args.init) / "ranker" if init else Path(args.backbone or backbone_dir())
    check_file_names(args)
    train, dev = load_splits(args)
    print("lists:", {n: {"train": len(train[n]), "dev": len(dev[n])} for n in train}, flush=True)
    pair = args.layout == "pair"
    encoder, model = load_start(start, args, pair=pair)
    if args.attention_dropout is not None:
        blocks = set_attention_dropout(model, args.attention_dropout)
        print(f"--attention-dropout {args.attention_dropout:g}: set in {blocks} attention blocks", flush=True)
    if args.freeze_layers:
        frozen = freeze(model, args.freeze_layers)
        print(f"--freeze-layers {args.freeze_layers}: {frozen:,} weights kept as they start", flush=True)
    adapters = add_adapters(model, args.lora_rank, frozen_layers=args.freeze_layers)
    if adapters:
        layers = f"layers {adapters.layers[0]} to {adapters.layers[-1]}"
        print(f"--lora-rank {args.lora_rank}: {adapters.weights:,} adapter weights on {layers}", flush=True)
    teachers = load_teachers(args, pair=pair)
    try:
        outcome = train_epochs(
            model,
            encoder,
            args,
            (train, dev),
            teachers=teachers,
            precision=args.precision,
            started=started,
            out=out,
        )
    except checkpoint.CheckpointError as e:
        raise DataError(str(e)) from None
    except Stopped as e:
        kept = checkpoint.checkpoints(out)
        print(f"{e}; --resume continues from {kept[-1] if kept else 'the start'}", flush=True)
        raise SystemExit(STOPPED_STATUS) from None
    if adapters:  # the best epoch's adapters, folded in: what is saved, calibrated and exported is plain
        adapters.merge()
    calibrated, fitted = calibrate_on_dev(model, encoder, dev, out)
    model.save(out / "ranker", start / "tokenizer.json")
    write_calibration(out / "calibration.json", fitted)
    config = run_config(args, precision=outcome.precision, init=init, teachers=teachers, outcome=outcome)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    checkpoint.remove(out)  # the run is finished: its weights are in ranker/
    result = {
        "dev": calibrated,
        "dev_abstention_accuracy_pooled": fitted["abstention_accuracy"],
        "history": outcome.history,
        "steps": outcome.steps,
        "planned_steps": outcome.planned_steps,
        "schedule_steps": outcome.schedule_steps,
        "stopped_by": outcome.stopped_by,
        "seconds_per_step": outcome.seconds_per_step and round(outcome.seconds_per_step, 3),
        "training_precision": outcome.precision,
        "precision_seconds": outcome.precision_seconds,
        "train_seconds": round(time.time() - started, 1),
        "lists": {n: {"train": len(train[n]), "dev": len(dev[n])} for n in train},
    }
    (out / "metrics.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({"dev": calibrated, "train_seconds": result["train_seconds"]}, indent=2), flush=True)
    return result


if __name__ == "__main__":
    exit_on_data_error(main)
