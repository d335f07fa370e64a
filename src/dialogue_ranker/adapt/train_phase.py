"""The training phase: ``ranker train`` from the base bundle on the team's lists and the replay.

The run starts from the base bundle's weights (``--init-bundle``, dequantized) with its head, encoding
and last-turn view (the bundle's serving settings, so the run learns the logits the service will
combine); the export takes the prior's view from the same bundle. Its epochs are the plan's dev
checks (up to :data:`dialogue_ranker.adapt.budget.ROUNDS`): each file's weight is set so that an
epoch is its share of the planned steps, the team's lists and each replay file in the guard's
proportion, in whole batches; after each epoch the dev lists are scored and the best epoch kept, by
the team's dev nDCG@3 alone (``--select-on team``: the replay's dev lists are scored and reported,
the regression suite judges what was kept of them). The run stops after
:data:`~dialogue_ranker.adapt.budget.PATIENCE` epochs without a better score, at the planned steps,
or when its share of the budget is spent (``--max-seconds``, less the time its end takes).
Checkpoints every fifth of the steps let ``--resume`` continue a killed run (the command line is
recorded on the first start, so the resumed run is the same run).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from dialogue_ranker.adapt import budget
from dialogue_ranker.adapt.guard import Replay, train_flags
from dialogue_ranker.adapt.layout import Layout
from dialogue_ranker.adapt.state import State
from dialogue_ranker.training import checkpoint, train

BATCH_LISTS = 8
#: Checkpoints over the planned steps.
CHECKPOINTS = 5
#: The least training time a resumed or late run is given.
MIN_SECONDS = 30.0


def weights(prepared: dict[str, Any], limit: int | None) -> tuple[float, list[float]]:
    """The team file's and each replay file's ``--data`` weight: an epoch is one dev check's steps.

    A replay file's ``weight`` is its lists per list of the team's. Each file gives an epoch whole
    batches (``ranker train`` batches within a file): its share of the epoch's steps, rounded, the
    team's at least one.
    """
    plan = prepared["plan"]
    steps = plan["steps"] / plan["rounds"]
    replay = prepared["replay"]
    total = 1.0 + sum(r["weight"] for r in replay)

    def weight(share: float, lists: int, least: int = 0) -> float:
        batches = max(least, round(steps * share / total))
        return batches * BATCH_LISTS / max(1, min(lists, limit) if limit else lists)

    team = weight(1.0, prepared["split"]["counts"]["train"]["lists"], least=1)
    return team, [weight(r["weight"], r["train_lists"]) for r in replay]


def base_flags(args: argparse.Namespace, base: dict[str, Any], *, precision: str | None = None) -> list[str]:
    """``ranker train``'s flags that every run from the base shares, the step probes' too.

    The start, the base's head, encoding and last-turn view, the optimiser and the precision
    (``precision``: what the step probe resolved ``--precision`` to, else the flag as given).
    """
    return [
        "--init-bundle", base["path"],
        "--seed", str(args.seed),
        "--lr", f"{args.lr:g}",
        "--batch-lists", str(BATCH_LISTS),
        "--precision", precision or args.precision,
        "--head", base["head"],
        "--max-prefix-tokens", str(base["encoding"]["max_prefix_tokens"]),
        "--max-candidate-tokens", str(base["encoding"]["max_candidate_tokens"]),
        "--last-turn-weight", f"{base['views'].get('last_turn_weight', 0.0):g}",
        "--threads", str(args.threads),
        "--attention-dropout", f"{args.attention_dropout:g}",
        *(["--anchor-weight", f"{args.anchor_weight:g}"] if args.anchor_weight else []),
        *(["--freeze-layers", str(args.freeze_layers)] if args.freeze_layers else []),
        *(["--ema", f"{args.ema:g}"] if args.ema else []),
        *(["--lora-rank", str(args.lora_rank)] if args.lora_rank else []),
    ]  # fmt: skip


def team_flags(args: argparse.Namespace, team: Path) -> list[str]:
    """The team's lists are cut to ``--train-candidates``; the replay stays whole, as the suite scores it."""
    return ["--train-candidates", str(args.train_candidates), "--train-candidates-on", team.stem]


def guard_flags(
    args: argparse.Namespace, base: dict[str, Any], replay: list[Replay], *, team: bool = True
) -> list[str]:
    """The guard's teacher flags (none without replay or ``--team-teacher``), the replay probe's too.

    ``--keep-top`` goes with the teacher (without one, the guard is ``none`` and there is nothing to keep).

    ``team``: with ``--team-teacher``'s share of the team's lists; the replay's probe trains on the
    replay files alone, so it leaves it out.
    """
    share = args.team_teacher if team else 0.0
    flags = train_flags(args.guard if replay else "none", base["path"], replay, share)
    return [*flags, "--keep-top", f"{args.keep_top:g}"] if flags and args.keep_top else flags


def train_argv(args: argparse.Namespace, layout: Layout, prepared: dict[str, Any]) -> list[str]:
    """``ranker train``'s command line for this run (without ``--max-seconds`` and ``--resume``)."""
    base, plan = prepared["base"], prepared["plan"]
    team_weight, replay_weights = weights(prepared, args.limit)
    replay = [Replay(r["name"], Path(r["path"]), r["weight"], r["license"]) for r in prepared["replay"]]
    probe = prepared.get("step_probe") or {}
    argv = [
        *base_flags(args, base, precision=probe.get("precision")),
        *team_flags(args, layout.team),
        "--data",
        f"{layout.team}:{team_weight:.6g}",
    ]
    for r, w in zip(replay, replay_weights, strict=True):
        argv += ["--data", f"{r.path}:{w:.6g}"]
    argv += [
        "--out", str(layout.run),
        "--epochs", str(plan["rounds"]),
        "--max-steps", str(plan["steps"]),
        "--patience", str(budget.PATIENCE),
        "--dev-lists", str(plan["dev_lists"]),
        "--checkpoint-every", str(max(1, plan["steps"] // CHECKPOINTS)),
    ]  # fmt: skip
    if args.select_on == "team":
        argv += ["--select-on", layout.team.stem]
    if args.limit:
        argv += ["--limit", str(args.limit)]
    return argv + guard_flags(args, base, replay)


def time_flags(seconds: float) -> list[str]:
    """``ranker train``'s time limit for a phase of ``seconds``, and its schedule fitted to it.

    The last dev check, the run's calibration and its save come after the last step, so the limit
    is the phase less their share. The plan aims high (:data:`~dialogue_ranker.adapt.step_probe.
    PLAN_OVER_PROBE`); ``--replan`` cuts the schedule to the run's own rate after each epoch.
    """
    stepping = seconds * (1 - budget.TRAIN_END_SHARE)
    return ["--max-seconds", f"{max(MIN_SECONDS, stepping):.0f}", "--replan"]


def run_training(args: argparse.Namespace, layout: Layout, state: State, *, seconds: float) -> dict[str, Any]:
    """Train (or continue training) for at most ``seconds``; returns what the run recorded."""
    if not (layout.run / "config.json").is_file():  # else it finished before the state could say so
        argv = state.data.setdefault("train_argv", train_argv(args, layout, state.facts("prepare")))
        state.save()
        resume = ["--resume"] if checkpoint.checkpoints(layout.run) else []
        if resume:
            print(f"train: continuing from {checkpoint.checkpoints(layout.run)[-1]}", flush=True)
        print("ranker train " + " ".join(argv), flush=True)
        started = time.perf_counter()
        train.main([*argv, *time_flags(seconds), *resume])
        print(f"train: {time.perf_counter() - started:.0f} s", flush=True)
    metrics = json.loads((layout.run / "metrics.json").read_text())
    history = metrics["history"]
    best = max(history, key=lambda e: e["mean_ndcg_at_3"]) if history else None
    return {
        "steps": metrics["steps"],
        "planned_steps": metrics["planned_steps"],
        "schedule_steps": metrics.get("schedule_steps", metrics["planned_steps"]),
        "stopped_by": metrics.get("stopped_by", "schedule"),
        "train_seconds": metrics["train_seconds"],
        "seconds_per_step": metrics.get("seconds_per_step"),
        "best_epoch": best
        and {"epoch": best["epoch"], "step": best["step"], "mean_ndcg_at_3": best["mean_ndcg_at_3"]},
        "epochs": len(history),
        "lists": metrics["lists"],
    }
