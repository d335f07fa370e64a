"""``ranker train --ema DECAY``: the dev checks score, and the run keeps, a moving average of the weights.

A short fine-tune's last iterate carries the noise of its last few batches: in ``ranker adapt``'s
runs on one team's lists, the same settings with another seed moved a regression set by 0.03 to
0.04 on the same lists (docs/research/2026-12-02-adapt-views-on-the-team.md), more than the
guard's 0.02. An exponential moving average of the weights (Polyak averaging) keeps the
trajectory's direction and averages the noise out. After each optimiser step the average moves
``1 - DECAY`` of the way to the weights; with decay ``d`` it spans about ``1 / (1 - d)`` steps.

torch's own :class:`~torch.optim.swa_utils.AveragedModel` with its EMA function does the averaging
(one fused lerp over the weights a step); this module only decides when there is one. Frozen
weights never move, so their average is their start.
"""

from __future__ import annotations

from typing import TypeVar, cast

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

M = TypeVar("M", bound=torch.nn.Module)


def averaged(model: torch.nn.Module, decay: float) -> AveragedModel | None:
    """A moving average of ``model``'s weights at ``decay`` (0: none; the run keeps its last iterate).

    ``decay`` is ``--ema`` as parsed (``train_args.ema_decay`` refuses one outside [0, 1)).
    """
    if decay == 0.0:
        return None
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))


def scored(model: M, average: AveragedModel | None) -> M:
    """The weights a dev check scores and the best epoch keeps: the average where there is one.

    The average's module is a deep copy of ``model``, so it is of the same class.
    """
    return model if average is None else cast(M, average.module)
