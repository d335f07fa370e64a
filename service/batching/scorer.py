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

    async def score(self, pairs: Sequence[EncodedPair]) -> np.ndarray:
        """Logits (float32, one per pair, in order).

        Raises:
            NotReady, Overloaded, BackendError, BackendUnavailable, BackendTimeout.
        """
        ...
