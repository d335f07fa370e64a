"""An output ensemble: several shared-prefix rankers in one graph, their token logits weighted.

A weight soup (``dialogue_ranker.training.interpolate``) averages two runs' weights: one encoder pass, but the
runs' different strengths partly cancel. This keeps both encoders and averages what they say:
``(1 - w) x run A + w x run B`` per token logit, so per candidate logit (a candidate's logit is
the mean of its token logits) and per view (the last-turn view is a weighted mean too). It
costs a second encoder pass over the same inputs; ``python -m experiments.output_ensemble``
measured it against the soup (README, Training). The graph's inputs and output are the single
ranker's, so the service, calibration and export treat it as one ranker.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from dialogue_ranker.training.shared_prefix import INPUT_NAMES, SharedPrefixRanker


class EnsembleRanker(torch.nn.Module):
    """The weighted sum of several rankers' token logits (the weights sum to 1)."""

    input_names = INPUT_NAMES

    def __init__(self, rankers: Sequence[SharedPrefixRanker], weights: Sequence[float]) -> None:
        super().__init__()
        if len(rankers) != len(weights) or len(rankers) < 2:
            raise ValueError("an ensemble needs two or more rankers, one weight each")
        if abs(sum(weights) - 1) > 1e-6 or min(weights) < 0:
            raise ValueError(f"ensemble weights must be non-negative and sum to 1, got {list(weights)}")
        self.rankers = torch.nn.ModuleList(rankers)
        # Python floats: traced as constants, not a weights tensor to gather from.
        self.weights = [float(w) for w in weights]

    @classmethod
    def load(cls, runs: Sequence[str | Path], weights: Sequence[float]) -> EnsembleRanker:
        """The rankers of training run directories (``runs/x`` holds ``runs/x/ranker``)."""
        return cls([SharedPrefixRanker.load(Path(r) / "ranker") for r in runs], weights)

    def forward(self, input_ids, token_type_ids, position_ids, segment_ids):  # noqa: D102
        logits = [r(input_ids, token_type_ids, position_ids, segment_ids) for r in self.rankers]
        return sum(w * z for w, z in zip(self.weights, logits, strict=True))
