"""What the ranker needs from a batching path: sequences in, a logit per candidate out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from dialogue_ranker.serving.list_encoding import EncodedList
from dialogue_ranker.serving.tokenization import EncodedPair


class Scorer(Protocol):
    """:class:`~serving.batching.Batcher` (gateway batching) or :class:`~serving.batching.DirectScorer`."""

    async def start(self, *, warm_up: bool = False) -> None:
        """Start accepting sequences (after a warm-up call where the path has one)."""

    async def close(self) -> None:
        """Stop; sequences still waiting fail with NotReady."""

    async def score(
        self, sequences: Sequence[EncodedPair | EncodedList], *, deadline: float | None = None
    ) -> np.ndarray:
        """Logits (float32, one per candidate the sequences hold, in order).

        ``deadline`` is a ``time.perf_counter()`` value.

        Raises:
            NotReady, Overloaded, BackendError, BackendUnavailable, BackendTimeout.
        """
        ...

    def estimated_seconds(self, candidates: int) -> float | None:
        """Backend seconds for ``candidates`` typical candidates' logits (None: not known)."""
        ...

    def available(self) -> bool:
        """False while the path refuses work on its own (an open circuit breaker)."""
        ...
