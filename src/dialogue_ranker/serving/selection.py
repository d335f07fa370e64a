"""Statement selection: keep the situational statements relevant to the context.

The bundle's selector model scores each (context, statement) pair, with the statement as
segment B. Statements whose calibrated relevance reaches the selector's threshold are kept (at
least ``min_keep``, the best-scored), most relevant first: the ranker's pair encoder drops
statements from the end of the list when a pair is too long, so the order decides what survives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dialogue_ranker.serving.batching import Scorer
from dialogue_ranker.serving.encoding import OffLoopEncoder
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.model_bundle import SelectorSpec
from dialogue_ranker.serving.tokenization import Turn


def choose_statements(relevance: np.ndarray, *, threshold: float, min_keep: int) -> list[int]:
    """Indices of the statements to keep, most relevant first (ties keep the given order)."""
    order = sorted(range(len(relevance)), key=lambda i: -float(relevance[i]))
    keep = max(sum(1 for i in order if relevance[i] >= threshold), min(min_keep, len(order)))
    return order[:keep]


class StatementSelector:
    """Scores statements with the selector model through its own batcher and backend."""

    def __init__(
        self, spec: SelectorSpec, *, encoder: OffLoopEncoder, batcher: Scorer, metrics: Metrics
    ) -> None:
        self.spec = spec
        self.encoder = encoder
        self.batcher = batcher
        self.metrics = metrics

    async def select(
        self, turns: Sequence[Turn], statements: Sequence[str], *, deadline: float | None = None
    ) -> list[int]:
        """Original indices of the kept statements, most relevant first.

        Raises:
            Overloaded, BackendError, BackendUnavailable, BackendTimeout: from the selector's batcher.
        """
        if not statements:
            return []
        pairs = await self.encoder.encode(turns, [], statements)
        relevance = self.spec.calibration(await self.batcher.score(pairs, deadline=deadline))
        kept = choose_statements(relevance, threshold=self.spec.threshold, min_keep=self.spec.min_keep)
        self.metrics.statements.labels(self.encoder.model, "given").inc(len(statements))
        self.metrics.statements.labels(self.encoder.model, "kept").inc(len(kept))
        return kept
