"""The batcher: groups queued pairs into backend calls and routes each logit to its waiter.

A batch closes when it holds ``max_pairs`` pairs, ``max_tokens`` tokens, or ``max_wait_s``
after its oldest pair arrived. Inside a batch pairs are sorted by length (less padding) and,
when ``sub_batch_pairs`` is set, run as several backend calls, each padded to a multiple of
``pad_to_multiple``. Padding and the backend call run on an executor thread. Exactly one logit
goes back per pair; when a batch fails, every waiter of that batch gets the same error, and the
worker logs, counts and goes on with the next batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

import numpy as np

from service.backends.base import Backend
from service.batching.queue import PairQueue, WorkItem
from service.errors import BackendError, NotReady, RankerError
from service.metrics import Metrics
from service.settings import BatchingSettings
from service.tokenization import Batch, EncodedPair

logger = logging.getLogger(__name__)

#: Pads pairs into a batch, optionally to a given length (``PairEncoder.pad``).
PadFn = Callable[..., Batch]


def _round_up(length: int, multiple: int) -> int:
    return -(-length // multiple) * multiple


class Batcher:
    """One worker task feeding one backend from one bounded queue."""

    def __init__(
        self,
        *,
        backend: Backend,
        pad: PadFn,
        settings: BatchingSettings,
        executor: Executor,
        metrics: Metrics,
        model: str = "ranker",
        max_length: int | None = None,
    ) -> None:
        self.backend = backend
        self.pad = pad
        self.settings = settings
        self.executor = executor
        self.metrics = metrics
        self.model = model
        # Bucket padding never goes past the model's own length limit.
        self.max_length = max_length
        self.queue = PairQueue(max_pairs=settings.queue_max_pairs)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the worker task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"batcher-{self.model}")

    async def close(self) -> None:
        """Stop the worker and fail every waiting pair with NotReady."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.queue.fail_all(NotReady("service is shutting down"))

    async def score(self, pairs: Sequence[EncodedPair]) -> np.ndarray:
        """Logits (float32, one per pair, in order) once their batches have run.

        Raises:
            NotReady: the batcher is not running.
            Overloaded: the queue cannot take the pairs.
            BackendError, BackendUnavailable: the batch holding one of the pairs failed.
        """
        if self._task is None or self._task.done():
            raise NotReady(f"{self.model} batcher is not running")
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        loop = asyncio.get_running_loop()
        items = [WorkItem(pair, loop.create_future()) for pair in pairs]
        self.queue.put_all(items)
        self.metrics.queue_pairs.labels(self.model).set(len(self.queue))
        # Cancelling this gather (client gone, timeout) cancels the futures: the worker drops them.
        logits = await asyncio.gather(*(item.future for item in items))
        return np.asarray(logits, dtype=np.float32)

    async def _run(self) -> None:
        while True:
            try:
                items = await self._next_batch()
                if items:
                    await self._execute(items)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not kill the worker and hang every waiter
                logger.exception("batcher worker error model=%s", self.model)

    def _is_full(self) -> bool:
        return len(self.queue) >= self.settings.max_pairs or self.queue.tokens >= self.settings.max_tokens

    async def _next_batch(self) -> list[WorkItem]:
        await self.queue.wait_for_items()
        oldest = self.queue.oldest_enqueued_at()
        if oldest is None:
            return []
        # Waiting for batch-mates pays only when the backend runs pairs together; a model run
        # one pair per call gains nothing from it, so its batches close at once.
        max_wait_s = 0.0 if self.settings.sub_batch_pairs == 1 else self.settings.max_wait_s
        deadline = oldest + max_wait_s
        while not self._is_full():
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            await self.queue.wait_for_items(remaining)
        items = self.queue.take(max_pairs=self.settings.max_pairs, max_tokens=self.settings.max_tokens)
        self.metrics.queue_pairs.labels(self.model).set(len(self.queue))
        return items

    async def _execute(self, items: list[WorkItem]) -> None:
        started = time.perf_counter()
        for item in items:
            self.metrics.queue_wait.labels(self.model).observe(started - item.enqueued_at)
        pairs = [item.pair for item in items]
        loop = asyncio.get_running_loop()
        try:
            logits = await loop.run_in_executor(self.executor, self._infer, pairs)
        except Exception as e:
            error = (
                e if isinstance(e, RankerError) else BackendError(f"{self.model} backend failed on a batch")
            )
            logger.error(
                "batch failed model=%s backend=%s pairs=%d error=%s",
                self.model,
                self.backend.name,
                len(pairs),
                type(e).__name__,
                exc_info=e,
            )
            self.metrics.batch_failures.labels(self.model).inc()
            for item in items:
                if not item.future.done():
                    item.future.set_exception(error)
            return
        for item, logit in zip(items, logits, strict=True):
            if not item.future.done():
                item.future.set_result(float(logit))

    def _infer(self, pairs: list[EncodedPair]) -> np.ndarray:
        """Sort, split, pad and run; executor thread. Returns logits in the order of ``pairs``."""
        started = time.perf_counter()
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i]))
        step = self.settings.sub_batch_pairs or len(pairs)
        logits = np.empty(len(pairs), dtype=np.float32)
        padded_tokens = real_tokens = 0
        for start in range(0, len(order), step):
            chunk = order[start : start + step]
            batch = self.pad([pairs[i] for i in chunk], pad_to=self._pad_length(pairs, chunk))
            out = np.asarray(self.backend.infer(batch), dtype=np.float32).reshape(-1)
            if out.shape[0] != len(chunk):
                raise BackendError(
                    f"{self.model} backend returned {out.shape[0]} logits for {len(chunk)} pairs"
                )
            logits[chunk] = out
            padded_tokens += batch.shape[0] * batch.shape[1]
            real_tokens += batch.real_tokens
        m = self.metrics
        m.inference_duration.labels(self.backend.name, self.model).observe(time.perf_counter() - started)
        m.batch_pairs.labels(self.model).observe(len(pairs))
        m.batch_tokens.labels(self.model).observe(padded_tokens)
        m.padding_ratio.labels(self.model).observe(1.0 - real_tokens / max(padded_tokens, 1))
        return logits

    def _pad_length(self, pairs: list[EncodedPair], chunk: list[int]) -> int | None:
        multiple = self.settings.pad_to_multiple
        if multiple <= 1:
            return None
        longest = max(len(pairs[i]) for i in chunk)
        bucket = _round_up(longest, multiple)
        if self.max_length is not None:
            bucket = min(bucket, max(self.max_length, longest))
        return bucket
