"""``ranker train --replan``: the schedule cut, after each epoch, to the steps the run's own rate fits.

A run with ``--max-seconds`` plans its schedule (the learning rate's decay over ``--max-steps``)
before its first step, from an estimate of a step's time. Where the estimate is short, the time
limit stops the run with the learning rate not yet decayed; where it is long, the schedule ends with
time left. A few probe steps are a noisy estimate: three ``ranker adapt`` runs on one host took
0.87x to 1.35x their probes' rate (docs/research/2026-11-28-adapt-anchor-and-replay-probe.md).

With ``--replan`` the planner may aim high: after each epoch's dev check the loop measures its own
seconds a step and a dev check's seconds, and shortens the schedule to the most steps whose steps
and remaining dev checks fit in the seconds ``--max-seconds`` leaves (never lengthens it: the
epochs' batches are drawn before the first step). The shortened length is the schedule object's
own field, so a checkpoint keeps it and ``--resume`` continues on it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence


def fitted_total(
    *,
    step: int,
    total: int,
    epoch_ends: Sequence[int],
    seconds_left: float,
    seconds_per_step: float,
    seconds_per_check: float,
) -> int:
    """The largest schedule length in ``[step, total]`` whose rest fits in ``seconds_left``.

    The rest of a length ``t`` is its ``t - step`` steps and a dev check at each epoch end strictly
    between ``step`` and ``t`` (the check after the last step is the run's end, which
    ``--max-seconds`` leaves out, as the caller's budget does).
    """

    def cost(length: int) -> float:
        checks = sum(1 for end in epoch_ends if step < end < length)
        return (length - step) * seconds_per_step + checks * seconds_per_check

    # cost() grows with the length, so the lengths that fit are a prefix of the range (``step``'s,
    # of cost 0, always among them).
    fits = bisect.bisect_right(range(step, total + 1), max(0.0, seconds_left), key=cost)
    return step + fits - 1
