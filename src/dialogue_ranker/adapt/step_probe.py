"""How long a training step of the team's lists takes on this host, measured by taking a few.

The plan's steps used to come from a scoring probe times a fixed ratio, and that ratio moves with
the precision, the lists' length and whatever else the host is running: on a shared 2-core EPYC it
planned 49 steps where 155 fitted (issue #59's note). Training a few steps is the measurement that
does not need a ratio: ``ranker train`` from the base bundle, with the real run's encoding, head,
views and precision, on a few of the team's train lists, its first step (kernels' set-up) left out
of the rate (``metrics.json``'s ``seconds_per_step``). The replay lists the guard has the base
teach cost a teacher's forward pass more (:data:`TEACHER_EXTRA`).

The probe's run goes to ``OUT/probe`` and is deleted after; it costs its loading and
:data:`PROBE_STEPS` steps, about 30 s on 2 cores.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from pathlib import Path

from dialogue_ranker.training import train

#: Steps the probe takes; the first is left out of the rate.
PROBE_STEPS = 4
#: Lists per step (``ranker adapt`` trains with 8, as the shipped stages do).
BATCH_LISTS = 8
#: A taught step's cost over a plain one: the teacher's forward pass against a student's forward and
#: backward (about three forwards).
TEACHER_EXTRA = 1 / 3


def probe_argv(base_flags: list[str], team: Path, out: Path) -> list[str]:
    """``ranker train``'s command line for the probe: the run's own flags on a few team lists."""
    return [
        *base_flags,
        "--data", f"{team}:1",
        "--limit", str(BATCH_LISTS * PROBE_STEPS),
        "--max-steps", str(PROBE_STEPS),
        "--epochs", "1",
        "--dev-lists", "2",
        "--checkpoint-every", "0",
        "--out", str(out),
    ]  # fmt: skip


def seconds_per_step(
    base_flags: list[str], team: Path, out: Path, *, taught_share: float
) -> dict[str, float]:
    """The measured step's rate, the rate the run will see, and the probe's whole time.

    ``taught_share``: the run's share of steps the base teaches (:data:`TEACHER_EXTRA` more each).
    """
    if out.exists():  # a probe a kill interrupted
        shutil.rmtree(out)
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the run's dev report: not the user's business
        train.main(probe_argv(base_flags, team, out))
    took = time.perf_counter() - started
    measured = float(json.loads((out / "metrics.json").read_text())["seconds_per_step"])
    shutil.rmtree(out)
    return {
        "measured_seconds_per_step": round(measured, 3),
        "seconds_per_step": round(measured * (1 + TEACHER_EXTRA * taught_share), 3),
        "probe_seconds": round(took, 1),
    }
