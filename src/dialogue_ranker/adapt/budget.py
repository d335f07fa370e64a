"""How ``ranker adapt`` spends its ``--minutes``: a share per phase, and each phase's work sized to it.

``--minutes`` covers the whole command. Preparing (reading, splitting, a rate probe) takes what it
takes, a few seconds; the rest is shared out:

| phase | share | what is sized to fit it |
| --- | --- | --- |
| train | 50% | the planned steps (:data:`STEP_COST_LISTS`), dev lists per file; ``--max-seconds`` stops it |
| export | 20% | the dev lists per file its graphs are checked on |
| calibrate | 10% | the team's dev lists each runtime's map is fitted on |
| evaluate | 20% | the team's test lists both bundles are compared on (the suite's sets are fixed) |

Sizes come from one measurement: the rate probe scores a few of the team's lists with the base
bundle (three views, ONNX Runtime's int8 graph), and every other cost is a multiple of it, measured
on a shared 2-core AMD EPYC (see the constants). A phase that ends early leaves its time to the
next; a phase that overruns is reported, not stopped (only training has a hard stop).
"""

from __future__ import annotations

from dataclasses import dataclass

SHARES = {"train": 0.50, "export": 0.20, "calibrate": 0.10, "evaluate": 0.20}
#: A training step of 8 lists (forward and backward in PyTorch, fp32, the last-turn view too) costs as
#: much as scoring this many lists with the int8 graph: 8 to 13 s a step of persona lists against 0.19
#: to 0.27 s a list on the shared 2 cores. The base as teacher adds a forward pass.
STEP_COST_LISTS = 45.0
TEACHER_STEP_COST_LISTS = 15.0
#: Loading the base, its teacher and the replay files (Topical-Chat's 44,747 lists are read whole)
#: before the first step, then the run's own calibration, in scored lists: about 50 s.
TRAIN_START_COST_LISTS = 200.0
#: Scoring a dev list in PyTorch with one view, in lists scored by the int8 graph with three views.
DEV_LIST_COST = 0.5
#: Dev checks in training (epochs of the planned steps) and how many may pass without a better score.
ROUNDS = 5
PATIENCE = 2
#: Share of the training time its dev checks may take.
DEV_SHARE = 0.10
#: Graphs the export builds and scores (fp32 and the base's int8) and the share of its time that
#: scoring their dev lists may take (the rest: building and quantizing, timing, each candidate scored
#: alone, the views, samples: about 5 minutes on the busy 2 cores).
EXPORT_GRAPHS = 2
EXPORT_SCORING_SHARE = 0.3
#: Calibrating: ONNX Runtime's int8 graph once, OpenVINO f32 and bf16 at about 0.4 of it each.
CALIBRATE_COST = 1.8
#: Evaluating: both bundles score each team test list; half the phase is the regression suite's.
EVALUATE_TEAM_SHARE = 0.5
MIN_LISTS, MAX_LISTS = 20, 2000
MIN_STEPS = 1


@dataclass(frozen=True)
class Plan:
    """Each phase's seconds and the work sized to them."""

    seconds: dict[str, float]
    seconds_per_list: float
    steps: int
    dev_lists: int
    export_dev_lists: int
    calibrate_lists: int
    test_lists: int

    def to_dict(self) -> dict:
        """The plan as recorded in the state file and the report."""
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def clamp(value: float, low: int, high: int) -> int:
    """``value`` rounded down into ``[low, high]``."""
    return max(low, min(high, int(value)))


def plan(
    seconds: float,
    *,
    seconds_per_list: float,
    files: int,
    teacher: bool,
    batch_lists: int = 8,
    max_steps: int | None = None,
) -> Plan:
    """The plan for ``seconds`` (what is left after preparing) at the probe's ``seconds_per_list``.

    ``files``: the training files (the team's and the replay files); ``max_steps`` overrides the
    planned steps (smoke runs).
    """
    share = {phase: seconds * part for phase, part in SHARES.items()}
    per_list = max(seconds_per_list, 1e-3)
    step_s = per_list * (STEP_COST_LISTS + (TEACHER_STEP_COST_LISTS if teacher else 0)) * batch_lists / 8
    stepping = share["train"] * (1 - DEV_SHARE) - TRAIN_START_COST_LISTS * per_list
    dev_lists = clamp(share["train"] * DEV_SHARE / (ROUNDS * files * DEV_LIST_COST * per_list), 10, 400)
    export_dev = share["export"] * EXPORT_SCORING_SHARE / (EXPORT_GRAPHS * files * DEV_LIST_COST * per_list)
    return Plan(
        seconds=share,
        seconds_per_list=per_list,
        steps=max_steps or max(MIN_STEPS, int(stepping / step_s)),
        dev_lists=dev_lists,
        export_dev_lists=clamp(export_dev, dev_lists, 400),
        calibrate_lists=clamp(share["calibrate"] / (CALIBRATE_COST * per_list), MIN_LISTS, MAX_LISTS),
        test_lists=clamp(share["evaluate"] * EVALUATE_TEAM_SHARE / (2 * per_list), MIN_LISTS, MAX_LISTS),
    )
