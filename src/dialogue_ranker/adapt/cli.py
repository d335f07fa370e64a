r"""``ranker adapt``: your labelled lists to a fine-tuned, exported, calibrated bundle, with a report.

    ranker adapt --lists my-lists.jsonl --minutes 30 --out runs/mine
    ranker serve --model runs/mine/bundle

Six phases, each recorded in ``OUT/adapt.json`` when done, so a killed command continues with
``--resume`` (the same flags) from the first unfinished one, training from its newest checkpoint:

1. **prepare**: read ``--lists`` (ranking-data files, or a directory of the service's request
   logs and feedback), split them by group (a stable hash: 70% train, 15% dev, 15% test; too few
   groups is refused), choose the replay files, probe the scoring rate and a few training steps, and
   plan the budget;
2. **train**: ``ranker train --init-bundle`` from the base, with its head, encoding and last-turn
   view, on the team's train part and the guard's replay; dev checked after each epoch (up to
   five), stopped at the planned steps, after two checks without a better dev score, or when its
   share is spent;
3. **export**: ``ranker export``: the graph that holds dev P@1 within 0.01 of fp32 ships (the
   base's int8 where it holds, fp32 where it does not), with the base's context views, their
   weights chosen on the team's dev part from a small grid (``--views base``: the base's as they are);
4. **calibrate**: each runtime's map and threshold fitted on the team's dev part (``ranker
   calibrate``'s functions); the bundle is ``OUT/bundle``;
5. **evaluate**: the base and adapted bundles on the team's test part and the regression suite
   (``--regression-suite``: what the base knew), each metric with its paired bootstrap interval;
6. **report**: ``OUT/report.md`` and ``OUT/report.png``; the bundle's lineage in its metadata and card.

``--minutes`` covers all six: training gets 70% of what preparing leaves, the export 11%, the
calibration 4%, the evaluation 15%, training's steps sized from a few measured ones (the step
probe) and the other phases' work from a measured scoring rate (:mod:`dialogue_ranker.adapt.budget`).
The forgetting guard (``--guard``, default ``both``) replays the base's own training lists and has
the base teach them (:mod:`dialogue_ranker.adapt.guard`), so that no ranking metric of the
regression suite drops by more than 0.02; the report says whether
it held.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from dialogue_ranker.adapt import lineage
from dialogue_ranker.adapt.args import PHASES, STOPPED_STATUS, parse_args
from dialogue_ranker.adapt.calibrate_phase import run_calibration
from dialogue_ranker.adapt.compare import run_comparison
from dialogue_ranker.adapt.export_phase import run_export
from dialogue_ranker.adapt.figure import draw
from dialogue_ranker.adapt.layout import Layout
from dialogue_ranker.adapt.prepare import prepare
from dialogue_ranker.adapt.progress import Progress
from dialogue_ranker.adapt.report import render
from dialogue_ranker.adapt.state import State
from dialogue_ranker.adapt.train_phase import run_training
from dialogue_ranker.data.ranking_data import DataError


class Adaptation:
    """One run of the command: its flags, paths, state and clock."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.layout = Layout(args.out)
        self.state = State.open(args.out, vars(args), resume=args.resume)
        self.state.data.setdefault("budget_s", args.minutes * 60)
        self.started = time.perf_counter()
        self.spent_before = self.state.spent()

    def seconds_left(self) -> float:
        """The budget left: the finished phases' seconds and this process's are spent."""
        return self.state.data["budget_s"] - self.spent_before - (time.perf_counter() - self.started)

    def phase_seconds(self, phase: str) -> float:
        """What ``phase`` may take: its planned share, or less where earlier phases overran."""
        plan = self.state.facts("prepare")["plan"]["seconds"]
        later = sum(plan[p] for p in PHASES[PHASES.index(phase) + 1 :] if p in plan)
        return min(plan[phase], self.seconds_left() - later) if phase == "train" else plan[phase]

    def run_phase(self, phase: str) -> dict[str, Any]:
        """Run one phase; returns its facts."""
        a, layout = self.args, self.layout
        base = a.model
        steps: dict[str, Callable[[], dict[str, Any]]] = {
            "prepare": lambda: prepare(a, layout, seconds_left=self.seconds_left()),
            "train": lambda: run_training(a, layout, self.state, seconds=self.phase_seconds("train")),
            "export": lambda: run_export(a, layout, self.state.facts("prepare")),
            "calibrate": lambda: run_calibration(a, layout),
            "evaluate": lambda: run_comparison(
                a, layout, base, self.state.facts("prepare"), self.seconds_left
            ),
            "report": self.write_report,
        }
        return steps[phase]()

    def write_report(self) -> dict[str, Any]:
        """The lineage into the bundle, then ``report.md`` and ``report.png``."""
        adapted_by = lineage.lineage(self.args.guard, self.state.data["phases"], self.args.team_teacher)
        lineage.record(self.layout.bundle, adapted_by)
        comparison = json.loads(self.layout.comparison.read_text())
        exported = self.state.facts("export")
        text = render(self.state.data, comparison, adapted_by, out=str(self.args.out))
        self.layout.report_md.write_text(text)
        draw(comparison, self.layout.report_png, base=adapted_by["base"]["id"],
             adapted=f"{exported['name']}@{exported['version']}")  # fmt: skip
        return {"report": str(self.layout.report_md), "guard": comparison["guard"]}

    def run(self) -> dict[str, Any]:
        """Every unfinished phase in order; exits with status 75 after ``--stop-after``'s phase."""
        progress = Progress(self.state.data["budget_s"], self.spent_before)
        try:
            for number, phase in enumerate(PHASES, start=1):
                if self.state.done(phase):
                    progress.say(
                        f"adapt: {phase} finished before ({self.state.facts(phase)['seconds']:.0f} s)"
                    )
                    continue
                progress.start(phase, number, len(PHASES))
                facts = self.run_phase(phase)
                self.state.finish(phase, progress.finish(), facts)
                if self.args.stop_after == phase and phase != PHASES[-1]:
                    progress.say(f"--stop-after {phase}: stopping as a kill would; --resume continues")
                    raise SystemExit(STOPPED_STATUS)
        finally:
            progress.close()
        return self.state.data


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run (or ``--resume``) the adaptation; returns the state file's contents.

    Exits 2 naming the file, flag or field on bad lists or flags, 75 after ``--stop-after``.
    """
    try:
        return adapt(argv)
    except DataError as e:  # the lists' file, line and field, or the flag: not a traceback
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def adapt(argv: list[str] | None) -> dict[str, Any]:
    """:func:`main` without the handling of :class:`DataError`."""
    args = parse_args(argv, __doc__)
    adaptation = Adaptation(args)
    data = adaptation.run()
    guard = data["phases"]["report"]["guard"]
    verdict = {True: "held", False: "BROKEN: " + ", ".join(guard["broken"]), None: "not checked"}[
        guard["held"]
    ]
    print(f"wrote {adaptation.layout.bundle} and {adaptation.layout.report_md}; forgetting guard {verdict}")
    print(f"serve it: ranker serve --model {adaptation.layout.bundle}")
    return data


if __name__ == "__main__":
    main()
