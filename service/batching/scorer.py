"""What the ranker and the statement selector need from a batching path: pairs in, logits out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from service.tokenization import EncodedPair


class Scorer(Protocol):
    """:class:`~service.batching.Batcher` (gateway batching) or :class:`~service.batching.DirectScorer`."""

    async def start(self) -> None:
        """Start accepting pairs."""

    async def close(self) -> None:
        """Stop; pairs still waiting fail with NotReady."""

    async def score(self, pairs: Sequence[EncodedPair], *, deadline: float | None = None) -> np.ndarray:
        """Logits (float32, one per pair, in order); ``deadline`` is a ``time.perf_counter()`` value.

        Raises:
            NotReady, Overloaded, BackendError, BackendUnavailable, BackendTimeout.
        """
        ...

    def estimated_wait_s(self, *, pairs: int = 0, tokens: int = 0) -> float | None:
        """Seconds until that much more work would be done (None: not known)."""
        ...

    def available(self) -> bool:
        """False while the path refuses work on its own (an open circuit breaker)."""
        ...
