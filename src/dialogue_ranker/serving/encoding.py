"""Encoding a request's candidates into sequences off the event loop, timed for the tokenization metric."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import Executor

from dialogue_ranker.serving.list_encoding import EncodedList
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.model_bundle import AnyEncoder
from dialogue_ranker.serving.tokenization import EncodedPair, Turn


class OffLoopEncoder:
    """Runs :meth:`PairEncoder.encode_request` on an executor thread."""

    def __init__(
        self,
        encoder: AnyEncoder,
        *,
        executor: Executor,
        metrics: Metrics,
        backend: str,
        model: str,
    ) -> None:
        self.encoder = encoder
        self.executor = executor
        self.metrics = metrics
        self.backend = backend
        self.model = model

    @property
    def max_length(self) -> int:
        """The encoder's sequence length limit."""
        return self.encoder.max_length

    async def encode(
        self,
        turns: Sequence[Turn],
        statements: Sequence[str],
        candidates: Sequence[str],
        max_candidate_tokens: int | None = None,
    ) -> list[EncodedPair] | list[EncodedList]:
        """One pair per candidate (or the request's shared-prefix sequences), encoded on the executor."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        sequences: list[EncodedPair] | list[EncodedList] = await loop.run_in_executor(
            self.executor, self.encoder.encode_request, turns, statements, candidates, max_candidate_tokens
        )
        elapsed = time.perf_counter() - started
        self.metrics.tokenization_duration.labels(self.backend, self.model).observe(elapsed)
        return sequences
