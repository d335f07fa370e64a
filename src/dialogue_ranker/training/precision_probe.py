"""``--precision auto`` on a CPU that flags bf16: time a training step both ways and keep the faster.

A CPU flag says bf16 runs natively, not that it runs faster than fp32. On a Zen 4 EPYC (AVX-512
BF16, no AMX) a persona step took 4.35 s in bf16 against 7.2 s in fp32
(docs/research/2026-11-27-adapt-step-probe-bf16.md); on an Intel Xeon (family 6, model 207) that
flags AVX-512 BF16 but exposes no AMX, the same step took 6.0 s in bf16 and 4.0 to 4.7 s in fp32
(docs/research/2026-12-01-precision-by-measurement.md). So where the flag is there, ``auto`` forward
and backward passes a few of the run's own first lists in each precision and keeps the faster.
A GPU keeps the flag's answer (bf16 where supported: it is always the faster there).

The passes leave no trace: gradients are cleared, the torch generators are restored, and the
loss's cuts draw from a generator of their own, so a run's steps are those of the same run given
the chosen precision explicitly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import torch

from dialogue_ranker.training.backbone import autocast, training_precision

#: Lists a timed pass takes from the first batch (half a batch of 8: a pass costs a few seconds).
LISTS = 4
#: Timed passes per precision, after one warm-up each (the first pass pays for kernels' set-up);
#: the fastest counts.
REPEATS = 2


def options(choice: str) -> tuple[str, ...]:
    """The precisions ``choice`` leaves open: one, or ``fp32`` and ``bf16`` to be timed."""
    resolved = training_precision(choice)
    if choice == "auto" and resolved == "bf16" and not torch.cuda.is_available():
        return ("fp32", "bf16")
    return (resolved,)


def faster(
    model: torch.nn.Module, loss: Callable[[random.Random], torch.Tensor], choices: tuple[str, ...]
) -> tuple[str, dict[str, float]]:
    """The faster of ``choices`` for ``loss`` (forward and backward), and each one's best seconds.

    ``loss(rng)`` computes the loss of the same few lists each call. With one choice nothing runs.
    """
    if len(choices) == 1:
        return choices[0], {}
    best = {precision: float("inf") for precision in choices}
    with torch.random.fork_rng(devices=[]):
        for repeat in range(1 + REPEATS):
            for precision in choices:
                started = time.perf_counter()
                with autocast(precision):
                    value = loss(random.Random(0))
                value.backward()
                model.zero_grad(set_to_none=True)
                if repeat:  # the first round warms each precision's kernels up
                    best[precision] = min(best[precision], time.perf_counter() - started)
    # Chosen on the seconds it reports, so that the record explains the choice (a tie keeps fp32).
    reported = {p: round(s, 3) for p, s in best.items()}
    return min(reported, key=lambda p: reported[p]), reported
