"""The first phase: the team's lists read and split, the replay chosen, the budget planned.

Writes ``data/team.jsonl`` (every list: ``ranker train`` splits it by the same group hash),
``data/team-dev.jsonl`` and ``data/team-test.jsonl`` (seeded samples of the dev and test parts,
sized to the budget), and records what the later phases need: the base bundle, the lists' sources,
the split's counts, the replay files, the suite's absent sets, the step probe's rate and the plan.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from dialogue_ranker.adapt import budget
from dialogue_ranker.adapt.guard import TEAM, Replay, default_replay, distills
from dialogue_ranker.adapt.inputs import team_lists
from dialogue_ranker.adapt.layout import Layout
from dialogue_ranker.adapt.regression import lists_files, load_present
from dialogue_ranker.adapt.split import RULE, split_team
from dialogue_ranker.adapt.step_probe import seconds_per_step
from dialogue_ranker.adapt.train_phase import base_flags, guard_flags, team_flags
from dialogue_ranker.data.feedback_logs import lists_digest
from dialogue_ranker.data.ranking_data import RankingList, write_lists
from dialogue_ranker.evaluation.domains import ListScorer, group_split, held_out
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.training.shared_prefix import bundle_run_config

#: Team lists the rate probe scores with the base bundle (after one warm-up list).
PROBE_LISTS = 8


def base_facts(model: Path) -> dict[str, Any]:
    """The base bundle as the lineage and the training need it: id, digest, views, head, encoding."""
    bundle = load_bundle(model)
    config = bundle_run_config(model, "--model")
    return {
        "path": str(model),
        "name": bundle.name,
        "version": bundle.version,
        "id": bundle.model_id,
        "precision": bundle.ranker.precision,
        "sha256": lists_digest(model),
        "views": bundle.views.to_dict() if bundle.views.adds_views else {},
        "head": config.get("head", "cosine"),
        "encoding": config["encoding"],
    }


def probe_seconds_per_list(model: Path, lists: list[RankingList], *, threads: int) -> float:
    """Seconds the base bundle takes to score one of ``lists`` as the service does (every view)."""
    scorer = ListScorer(load_bundle(model), threads=threads)
    scorer.logits(lists[:1])  # the session's first call pays for its set-up
    sample = lists[1 : 1 + PROBE_LISTS] or lists[:1]
    started = time.perf_counter()
    scorer.logits(sample)
    return (time.perf_counter() - started) / len(sample)


def train_part_count(path: Path) -> int:
    """Lists in the train part of a file's group split (read by group alone: a replay file is large)."""
    with path.open(encoding="utf-8") as lines:
        return sum(1 for line in lines if line.strip() and group_split(json.loads(line)["group"]) == "train")


def chosen_replay(args: argparse.Namespace) -> tuple[list[Replay], list[str]]:
    """The replay files (``--replay``, else the suite's present files), and notes on those left out."""
    if args.guard == "none":
        return [], []
    if args.replay:
        return list(args.replay), []
    return default_replay(lists_files(args.regression_suite, args.suite_root))


def prepare(args: argparse.Namespace, layout: Layout, *, seconds_left: float) -> dict[str, Any]:
    """Read, split, sample and plan; returns the facts the later phases read."""
    started = time.perf_counter()
    lists, sources = team_lists(args.lists)
    split = split_team(lists)
    counts = split.counts()
    print(f"team lists: {len(lists)} ({RULE}): {json.dumps(counts)}", flush=True)
    replay, notes = chosen_replay(args)
    for note in notes:
        print(f"replay: {note}", flush=True)
    if args.guard != "none" and not replay:
        print(f"WARNING: --guard {args.guard} has no replay file: see the notes above", flush=True)
    _, absent = load_present(args.regression_suite, args.suite_root, args.limit)
    for name in absent:
        print(f"regression suite: {name} is absent and will not be scored", flush=True)
    layout.data.mkdir(parents=True, exist_ok=True)
    write_lists(layout.team, lists)
    rate = probe_seconds_per_list(args.model, split.dev, threads=args.threads)
    base = base_facts(args.model)
    teacher = distills(args.guard) and bool(replay)
    step = None
    if args.max_steps is None:  # the steps are planned from a few measured ones
        flags = base_flags(args, base)
        step = seconds_per_step(
            [*flags, *team_flags(args, layout.team)],
            layout.team,
            layout.probe,
            replay=[(r.path, r.weight) for r in replay],
            replay_flags=[*flags, *guard_flags(args, base, replay, team=False)],
        )
        print(f"step probe: {json.dumps(step)}", flush=True)
    spent = time.perf_counter() - started
    plan = budget.plan(
        seconds_left - spent,
        seconds_per_list=rate,
        files=1 + len(replay),
        teacher=teacher,
        max_steps=args.max_steps,
        seconds_per_step=step["seconds_per_step"] if step else None,
    )
    if args.limit:  # a smoke run scores at most --limit lists of each part
        plan = budget.Plan(**{**plan.__dict__, **limited(plan, args.limit)})
    write_lists(layout.team_dev, held_out(split.dev, "all", plan.calibrate_lists, args.seed))
    write_lists(layout.team_test, held_out(split.test, "all", plan.test_lists, args.seed))
    print(f"plan ({rate:.3f} s a list scored): {json.dumps(plan.to_dict())}", flush=True)
    needed = sum(plan.seconds.values())
    if needed > 1.05 * (seconds_left - spent):
        print(
            f"WARNING: the budget is tight on this machine: the plan needs about {needed / 60:.0f} minutes "
            "(the export's and the evaluation's fixed work, and a quarter of the budget to train); give "
            "--minutes more, or read the overrun in the report's time table",
            flush=True,
        )
    return {
        "base": base,
        "step_probe": step,
        "sources": [s.to_dict() for s in sources],
        "team": {"file": layout.team.name, "sha256": lists_digest(layout.team), "name": TEAM},
        "split": {"rule": RULE, "counts": counts},
        "replay": [
            {**r.to_dict(), "path": str(r.path), "train_lists": train_part_count(r.path)} for r in replay
        ],
        "replay_notes": notes,
        "suite_absent": absent,
        "plan": plan.to_dict(),
    }


def limited(plan: budget.Plan, limit: int) -> dict[str, int]:
    """The plan's list counts cut to ``limit``."""
    names = ("dev_lists", "export_dev_lists", "calibrate_lists", "test_lists")
    return {name: min(getattr(plan, name), limit) for name in names}
