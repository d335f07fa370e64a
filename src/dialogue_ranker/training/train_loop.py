"""``ranker train``'s loop: epochs of optimiser steps, each scored on the dev lists, the best kept.

The run stops at ``--max-steps`` (the schedule's length), ``--stop-at`` (a step of that schedule),
``--max-seconds`` (a lent machine's lease) or, with ``--patience N``, after N epochs in a row without
a better dev score; the epoch with the best mean dev nDCG@3 over the files is loaded back into the
model. Every ``--checkpoint-every`` steps the loop's whole state goes to a checkpoint
(:mod:`training.checkpoint`); ``--resume`` continues from the newest one, on the same batches, so a
run killed at any point ends as it would have without the kill.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.training import checkpoint, precision_probe, replan
from dialogue_ranker.training.anchor import Anchor
from dialogue_ranker.training.backbone import autocast, device, make_optimizer, optimizer_step
from dialogue_ranker.training.dev_scoring import dev_logits, dev_report
from dialogue_ranker.training.distill import Ensemble
from dialogue_ranker.training.list_loss import loss_of
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker, score_requests
from dialogue_ranker.training.train_lists import encode, epoch_batches
from dialogue_ranker.training.weight_average import averaged, scored


@dataclass(frozen=True)
class TrainingOutcome:
    """What the loop ran: the dev scores after each epoch, the steps taken and planned, what ended it."""

    history: list[dict[str, Any]]
    steps: int
    planned_steps: int
    #: ``schedule`` (every planned step), ``max-seconds``, ``patience`` or ``stop-at``.
    stopped_by: str = "schedule"
    #: Wall-clock seconds an optimiser step took in this process, dev checks left out, and the
    #: process's first step too where it took more than one (that step pays for kernels' set-up).
    seconds_per_step: float | None = None
    #: The schedule's length at the end: ``planned_steps``, or less where ``--replan`` shortened it.
    schedule_steps: int | None = None
    #: ``fp32`` or ``bf16``: what ``--precision`` resolved to (``auto`` is measured on some CPUs).
    precision: str = "fp32"
    #: Each precision's timed pass where ``auto`` measured them (seconds), else empty.
    precision_seconds: dict[str, float] = field(default_factory=dict)


def centre_bias(model: SharedPrefixRanker, encoder: ListEncoder, lists: list[RankingList]) -> float:
    """Set the head's bias so that the fresh model's mean logit on ``lists`` is the base rate's.

    The cosine head's logits start around scale x 0.5, not 0; the bias learns at the encoder's
    learning rate, far too slowly to move that, and until it did the pointwise loss would push
    every cosine down, wearing away the geometry the head is there to keep. On a second stage
    (``--init``) it re-centres the first stage's head on the new mix's base rate. Returns the shift.
    """
    with torch.no_grad():
        logits = score_requests(model, encoder, [encode(encoder, x) for x in lists], device())
        flat = np.concatenate([np.asarray(z) for z in logits])
        base = np.clip(np.mean([c.appropriate for x in lists for c in x.candidates]), 0.02, 0.98)
        shift = float(np.log(base / (1 - base)) - flat.mean())
        model.head.bias += shift
    return shift


def train_epochs(
    model: SharedPrefixRanker,
    encoder: ListEncoder,
    args: argparse.Namespace,
    splits: tuple[dict[str, list[RankingList]], dict[str, list[RankingList]]],
    *,
    teachers: Ensemble | None,
    precision: str,
    started: float,
    out: Path | None = None,
) -> TrainingOutcome:
    """Train ``model`` on the train lists; leaves it with the weights of its best epoch on dev.

    ``precision``: ``--precision`` as given (``auto`` is resolved here, timed where the CPU flags
    bf16: :mod:`dialogue_ranker.training.precision_probe`). ``started`` is the run's start
    (``time.time()``), which ``--max-seconds`` counts from. With
    ``out``, a checkpoint goes to ``out/checkpoints/`` every ``--checkpoint-every`` steps, and
    ``--resume`` continues from the newest one. Raises :class:`Stopped` at ``--stop-after-steps``.
    """
    train, dev = splits
    rng = random.Random(args.seed)
    # The epochs' batches are drawn first, from the seed alone: a resumed run draws the same ones.
    epochs = [epoch_batches(args, train, rng) for _ in range(args.epochs)]
    total = sum(len(e) for e in epochs)
    if args.max_steps is not None:
        total = min(total, args.max_steps)
    resuming = bool(getattr(args, "resume", False) and out is not None and checkpoint.checkpoints(out))
    # A resumed run's weights already hold the shift; a run of no step (--max-steps 0, a bundle read
    # back as a run) keeps the weights it started from, bias included, as --keep-head-bias asks.
    keep = getattr(args, "keep_head_bias", False)
    if args.head == "cosine" and not resuming and total > 0 and not keep:
        first = [x for batch in epochs[0][:8] for x in batch]
        print(f"cosine head: bias shifted by {centre_bias(model, encoder, first):.3f}", flush=True)
    payload, path = checkpoint.load_latest(out, args) if resuming and out is not None else ({}, None)
    # A resumed run keeps the precision its first start chose (an older checkpoint: choose again).
    timed: dict[str, float] = {}
    if payload.get("precision"):
        precision = payload["precision"]
    else:
        first_batch = epochs[0][0] if epochs and epochs[0] else []
        precision, timed = chosen_precision(model, encoder, args, first_batch, teachers, precision)
    print(f"training precision: {precision}" + (f" (timed passes, s: {timed})" if timed else ""), flush=True)
    optimizer, schedule = make_optimizer(model, lr=args.lr, total_steps=total)
    planned = total
    # Captured before a checkpoint is restored: the start is the run's, not the checkpoint's.
    anchor = Anchor(model, args.anchor_weight) if getattr(args, "anchor_weight", 0.0) else None
    average = averaged(model, getattr(args, "ema", 0.0))
    loop = checkpoint.LoopState()
    if resuming:
        loop = checkpoint.restore(
            payload, model=model, optimizer=optimizer, schedule=schedule, loop_rng=rng, average=average
        )
        total = schedule.lr_lambdas[0].total  # a --replan before the checkpoint shortened it
        print(f"--resume: continuing from {path} (step {loop.step} of {total})", flush=True)
    epoch_ends = list(itertools.accumulate(len(e) for e in epochs))
    # --stop-at ends the run early; the schedule still spans every planned step.
    end = total if args.stop_at is None else min(total, args.stop_at)
    every = getattr(args, "checkpoint_every", 0) or 0
    stop_after = getattr(args, "stop_after_steps", None)
    bar = tqdm(total=total, initial=loop.step, desc="ranker", unit="step", mininterval=30)
    out_of_time = stalled = False
    first_step, stepping, set_up = loop.step, 0.0, 0.0
    while loop.epoch < len(epochs):
        batches = epochs[loop.epoch]
        model.train()
        while loop.batch < len(batches) and loop.step < end:
            if out_of_seconds(args, started, loop.step, total):
                out_of_time = True
                break
            step_started = time.perf_counter()
            with autocast(precision):
                loss = loss_of(model, encoder, batches[loop.batch], args, rng, teachers)
            lr = optimizer.param_groups[0]["lr"]
            optimizer_step(model, optimizer, schedule, loss)
            if anchor is not None:
                anchor.pull(model, lr)
            if average is not None:
                average.update_parameters(model)
            stepping += time.perf_counter() - step_started
            if loop.step == first_step:
                set_up = stepping
            loop.step += 1
            loop.batch += 1
            bar.update(1)
            bar.set_postfix(epoch=loop.epoch + 1, loss=f"{loss.item():.3f}", refresh=False)
            if out is not None and every and loop.step % every == 0 and loop.step < end:
                checkpoint.save(
                    out,
                    args=args,
                    model=model,
                    optimizer=optimizer,
                    schedule=schedule,
                    loop=loop,
                    loop_rng=rng,
                    precision=precision,
                    average=average,
                )
            if stop_after is not None and loop.step >= stop_after and loop.step < end:
                bar.close()
                raise Stopped(loop.step)
        check_started = time.perf_counter()
        loop.history.append(
            dev_entry(
                scored(model, average),
                encoder,
                dev,
                epoch=loop.epoch + 1,
                step=loop.step,
                select_on=getattr(args, "select_on", None),
            )
        )
        taken = loop.step - first_step
        if getattr(args, "replan", False) and args.max_seconds and taken > 1 and loop.step < end:
            fitted = replan.fitted_total(
                step=loop.step,
                total=total,
                epoch_ends=epoch_ends,
                seconds_left=args.max_seconds - (time.time() - started),
                seconds_per_step=(stepping - set_up) / (taken - 1),
                seconds_per_check=time.perf_counter() - check_started,
            )
            if fitted < total:
                tqdm.write(f"--replan: the schedule ends at step {fitted}, not {total} (this run's own rate)")
                total = schedule.lr_lambdas[0].total = fitted
                end, bar.total = min(end, fitted), fitted
        if loop.history[-1]["mean_ndcg_at_3"] > loop.best_score:
            loop.best_score = loop.history[-1]["mean_ndcg_at_3"]
            best = scored(model, average).state_dict()
            loop.best_state = {k: v.detach().clone() for k, v in best.items()}
        loop.epoch, loop.batch = loop.epoch + 1, 0
        stalled = loop.epoch < len(epochs) and loop.step < end and out_of_patience(args, loop.history)
        if loop.step >= end or out_of_time or stalled:
            break
    bar.close()
    if loop.best_state is not None:
        model.load_state_dict(loop.best_state)
    stopped_by = "max-seconds" if out_of_time else "patience" if stalled else "schedule"
    if stopped_by == "schedule" and end < total:
        stopped_by = "stop-at"
    taken = loop.step - first_step
    rate = (stepping - set_up) / (taken - 1) if taken > 1 else stepping / taken if taken else None
    return TrainingOutcome(loop.history, loop.step, planned, stopped_by, rate, total, precision, timed)


def chosen_precision(
    model: SharedPrefixRanker,
    encoder: ListEncoder,
    args: argparse.Namespace,
    first_batch: list[RankingList],
    teachers: Ensemble | None,
    choice: str,
) -> tuple[str, dict[str, float]]:
    """``--precision`` resolved: ``auto`` times a few of the first batch's lists where the CPU flags bf16."""
    choices = precision_probe.options(choice)
    lists = first_batch[: precision_probe.LISTS]
    if len(choices) == 1 or not lists:  # nothing to weigh, or nothing to time it on: fp32 comes first
        return choices[0], {}
    model.train()

    def loss(rng: random.Random) -> torch.Tensor:
        return loss_of(model, encoder, lists, args, rng, teachers)

    return precision_probe.faster(model, loss, choices)


class Stopped(RuntimeError):
    """``--stop-after-steps`` ended the run as a kill would: nothing after the last checkpoint is kept."""

    def __init__(self, step: int) -> None:
        super().__init__(f"--stop-after-steps: stopped after step {step}, as a kill would")
        self.step = step


def out_of_seconds(args: argparse.Namespace, started: float, step: int, total: int) -> bool:
    """Whether ``--max-seconds`` has run out (and say so, with the steps taken)."""
    if args.max_seconds is None or time.time() - started <= args.max_seconds:
        return False
    tqdm.write(f"--max-seconds {args.max_seconds:g}: stopping after {step} of {total} steps")
    return True


def out_of_patience(args: argparse.Namespace, history: list[dict[str, Any]]) -> bool:
    """Whether ``--patience N`` epochs in a row have passed without a better dev score (and say so).

    Read from the dev history alone, so a resumed run decides as an uninterrupted one would.
    """
    patience = getattr(args, "patience", None)
    if not patience or not history:
        return False
    scores = [entry["mean_ndcg_at_3"] for entry in history]
    since_best = len(scores) - 1 - scores.index(max(scores))
    if since_best < patience:
        return False
    tqdm.write(f"--patience {patience}: no better dev score in {since_best} epochs; stopping")
    return True


def dev_entry(
    model: SharedPrefixRanker,
    encoder: ListEncoder,
    dev: dict[str, list[RankingList]],
    *,
    epoch: int,
    step: int,
    select_on: list[str] | None = None,
) -> dict[str, Any]:
    """The dev metrics after an epoch: per file, and the mean nDCG@3 the best epoch is chosen by.

    ``select_on``: the dev files that mean is taken over (``--select-on``; default every one).
    """
    report = dev_report(dev, dev_logits(model, encoder, dev))
    chosen = [r for name, r in report.items() if not select_on or name in select_on]
    score = float(np.mean([r["ndcg_at_3"] for r in chosen]))
    entry = {"epoch": epoch, "step": step, "dev": report, "mean_ndcg_at_3": score}
    tqdm.write(f"dev after epoch {epoch}: {json.dumps(entry)}")
    return entry
