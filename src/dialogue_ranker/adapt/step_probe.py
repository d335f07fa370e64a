"""How long a training step of the run's lists takes on this host, measured by taking a few.

The plan's steps used to come from a scoring probe times a fixed ratio, and that ratio moves with
the precision, the lists' length and whatever else the host is running: on a shared 2-core EPYC it
planned 49 steps where 155 fitted (issue #59's note). Training a few steps is the measurement that
does not need a ratio: ``ranker train`` from the base bundle, with the real run's encoding, head,
views and precision, its first step (kernels' set-up) left out of the rate (``metrics.json``'s
``seconds_per_step``). Two probes, since the run's steps are of two kinds:

- the team's lists, cut to ``--train-candidates`` (:data:`PROBE_STEPS` steps);
- the replay's lists, whole and, where the guard distills, taught by the base (a batch from each
  replay file, at least :data:`PROBE_STEPS` in all). Planned at the team's rate and a guessed third
  more for the teacher, the fifth persona run planned 2.82 s a step, took 3.10 s and ran out of
  time 23 steps short (docs/research/2026-11-28-adapt-lr-and-selection.md).

The run's rate is the two weighted by the replay's share of the lists, times
:data:`PLAN_OVER_PROBE`. The probes' runs go to
``OUT/probe`` and are deleted after; they cost their loading and steps, under a minute on 2 cores.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from dialogue_ranker.training import train

#: Steps the team's probe takes; the first is left out of the rate.
PROBE_STEPS = 4
#: Lists per step (``ranker adapt`` trains with 8, as the shipped stages do).
BATCH_LISTS = 8
#: The rate the schedule is planned at, as a multiple of the probes'. A run's steps took 0.87x to
#: 1.35x its probes' rate in three persona runs on one host (the sixth to the eighth:
#: docs/research/2026-11-28-adapt-anchor-and-replay-probe.md): no fixed factor fits, so the plan
#: aims high (more steps than the probes say fit) and the run's ``ranker train --replan`` shortens
#: the schedule from its own rate after each epoch. Below 0.85x the schedule ends with time left.
PLAN_OVER_PROBE = 0.85


def probe_argv(flags: list[str], data: Sequence[Path], batches: int, out: Path) -> list[str]:
    """``ranker train``'s command line for a probe: the run's flags, ``batches`` batches of each file."""
    return [
        *flags,
        *[arg for path in data for arg in ("--data", f"{path}:1")],
        "--limit", str(BATCH_LISTS * batches),
        "--max-steps", str(batches * len(data)),
        "--epochs", "1",
        "--dev-lists", "2",
        "--checkpoint-every", "0",
        "--out", str(out),
    ]  # fmt: skip


def timed(argv: list[str], out: Path) -> dict:
    """Run one probe; its ``metrics.json`` (``seconds_per_step``: the first step left out)."""
    if out.exists():  # a probe a kill interrupted
        shutil.rmtree(out)
    with contextlib.redirect_stdout(io.StringIO()):  # the run's dev report: not the user's business
        train.main(argv)
    metrics = json.loads((out / "metrics.json").read_text())
    shutil.rmtree(out)
    return metrics


def with_precision(flags: list[str], precision: str) -> list[str]:
    """``flags`` with ``--precision`` set to ``precision`` (the team's probe chose it)."""
    kept = [f for i, f in enumerate(flags) if "--precision" not in (f, flags[i - 1] if i else None)]
    return [*kept, "--precision", precision]


def seconds_per_step(
    team_flags: list[str],
    team: Path,
    out: Path,
    *,
    replay: Sequence[tuple[Path, float]],
    replay_flags: list[str],
) -> dict:
    """Each probe's measured rate, the rate the run will see, the precision, and the probes' time.

    The team's probe resolves ``--precision`` (``auto`` times fp32 against bf16 where the CPU flags
    bf16: :mod:`dialogue_ranker.training.precision_probe`); the replay's probe and the run are
    given what it chose, so that they time nothing again.

    ``team_flags``: the run's flags for the team's lists; ``replay``: each replay file and its lists
    per list of the team's (none: the team's probe alone); ``replay_flags``: the run's flags for them
    (the guard's teacher).
    """
    started = time.perf_counter()
    metrics = timed(probe_argv(team_flags, [team], PROBE_STEPS, out), out)
    team_rate, precision = float(metrics["seconds_per_step"]), metrics["training_precision"]
    facts: dict = {"measured_seconds_per_step": round(team_rate, 3), "precision": precision}
    if metrics.get("precision_seconds"):
        facts["precision_seconds"] = metrics["precision_seconds"]
    share = sum(weight for _, weight in replay)
    rate = team_rate
    if replay:
        batches = math.ceil(PROBE_STEPS / len(replay))
        files = [path for path, _ in replay]
        replay_argv = probe_argv(with_precision(replay_flags, precision), files, batches, out)
        replay_rate = float(timed(replay_argv, out)["seconds_per_step"])
        facts["replay_seconds_per_step"] = round(replay_rate, 3)
        rate = (team_rate + share * replay_rate) / (1 + share)
    return {
        **facts,
        "seconds_per_step": round(rate * PLAN_OVER_PROBE, 3),
        "probe_seconds": round(time.perf_counter() - started, 1),
    }
