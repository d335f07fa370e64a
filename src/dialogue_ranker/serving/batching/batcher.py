"""The batcher: groups queued sequences into backend calls and routes each logit to its waiter.

A batch closes when it holds ``max_pairs`` sequences, ``max_tokens`` tokens, or ``max_wait_s``
after its oldest sequence arrived. Inside a batch sequences are sorted by length (less padding) and,
when ``sub_batch_pairs`` is set, run as several backend calls, each padded to a multiple of
``pad_to_multiple``. Padding and each backend call run on the batcher's own call threads, one per
worker, so backend calls never wait behind tokenization on the shared executor (nor it behind them).

What keeps it honest under load and faults:

- **A measured speed**: every call updates the backend's seconds per candidate, from which the
  ranker admits requests by time (:mod:`.admission`); sequences carry their request's deadline.
- **Results as soon as ready**: each backend call's sequences resolve when that call returns, so a
  short request never waits for the rest of a long batch.
- **Dead sequences never run**: before every call, sequences whose request was cancelled (client gone,
  timeout) or whose deadline passed are dropped and counted.
- **Poison-sequence isolation** (:mod:`.backend_calls`): a call that fails with :class:`BackendError`
  (or an unexpected exception) is retried in halves down to single sequences, and a single sequence once
  more, so only the sequences that fail alone, twice, fail.
  :class:`BackendUnavailable` and :class:`BackendTimeout` are not retried: they say the backend,
  not a sequence, is the problem.
- **Circuit breaker** (:mod:`.breaker`): a backend whose batches keep failing wholly is cut off
  with fast 503s until it recovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from opentelemetry import trace

from dialogue_ranker.serving import tracing
from dialogue_ranker.serving.backends.base import Backend
from dialogue_ranker.serving.batching.admission import ServiceRate
from dialogue_ranker.serving.batching.backend_calls import BackendCalls, CallOutcome, Encoded, PadFn
from dialogue_ranker.serving.batching.breaker import BreakerState, CircuitBreaker
from dialogue_ranker.serving.batching.call_metrics import CallRecorder
from dialogue_ranker.serving.batching.failures import FailureLog
from dialogue_ranker.serving.batching.queue import SequenceQueue, WorkItem
from dialogue_ranker.serving.cpu import batch_workers
from dialogue_ranker.serving.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    NotReady,
    Overloaded,
    RankerError,
)
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import BatchingSettings, BreakerSettings
from dialogue_ranker.serving.tokenization import EncodedPair

logger = logging.getLogger(__name__)

#: The warm-up sequence: about a SUGAR ranking pair's length (capped by the model's), of an ordinary id.
#: Its speed is only the first estimate: real calls replace it within a few batches.
WARM_UP_TOKENS = 128
WARM_UP_TOKEN_ID = 1000


class Batcher:
    """One worker task feeding one backend from one bounded queue."""

    def __init__(
        self,
        *,
        backend: Backend,
        pad: PadFn,
        settings: BatchingSettings,
        metrics: Metrics,
        model: str = "default",
        max_length: int | None = None,
        breaker: BreakerSettings | None = None,
        tracer: trace.Tracer | None = None,
        warm_up_item: Encoded | None = None,
    ) -> None:
        self.backend = backend
        self.warm_up_item = warm_up_item
        self.pad = pad
        self.settings = settings
        self.workers = batch_workers(settings.workers)
        self.executor = ThreadPoolExecutor(self.workers, thread_name_prefix=f"{model}-call")
        self.recorder = CallRecorder(metrics, model=model, backend=backend.name)
        self.model = model
        # Bucket padding never goes past the model's own length limit.
        self.max_length = max_length
        self.queue = SequenceQueue(max_pairs=settings.queue_max_pairs)
        self.rate = ServiceRate()
        health = breaker or BreakerSettings()
        self.breaker = CircuitBreaker(
            failure_threshold=health.failure_threshold, cooldown_s=health.cooldown_s, name=model
        )
        self.failures = FailureLog(logger, model=model, traceback_interval_s=health.traceback_interval_s)
        # Batches being run (with the queue, what "busy" means before the speed is measured).
        self._running = 0
        self.tracer = tracer or trace.NoOpTracer()
        self._tasks: list[asyncio.Task[None]] = []
        self.calls = BackendCalls(
            backend=backend,
            pad=pad,
            executor=self.executor,
            settings=settings,
            rate=self.rate,
            recorder=self.recorder,
            tracer=self.tracer,
            max_length=max_length,
        )

    async def start(self, *, warm_up: bool = False) -> None:
        """Start the worker task; with ``warm_up``, first measure the backend on a synthetic sequence.

        The warm-up pays the backend's first-call costs before a client does, and gives admission
        a speed to work with from the first request instead of none.
        """
        if warm_up:
            await self._warm_up()
        if not self._tasks:
            # Each worker takes the next batch when its call returns: ``workers`` calls at once.
            self._tasks = [
                asyncio.create_task(self._run(), name=f"batcher-{self.model}-{n}")
                for n in range(self.workers)
            ]

    async def _warm_up(self) -> None:
        item = self.warm_up_item
        if item is None:
            length = min(self.max_length or WARM_UP_TOKENS, WARM_UP_TOKENS)
            ids = [WARM_UP_TOKEN_ID] * length
            item = EncodedPair(input_ids=ids, token_type_ids=[0] * length, turns_kept=1, statements_kept=0)
        batch = self.pad([item])
        loop = asyncio.get_running_loop()
        for _ in range(2):  # the first call is the cold one: only the second is measured
            started = time.perf_counter()
            try:
                await loop.run_in_executor(self.executor, self.backend.infer, batch)
            except Exception as e:  # the first real batch will say what is wrong, and count it
                logger.warning("warm-up call failed model=%s error=%s", self.model, type(e).__name__)
                return
        self.rate.observe(candidates=item.outputs, seconds=time.perf_counter() - started)

    async def close(self) -> None:
        """Stop the worker and fail every waiting sequence with NotReady."""
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self.queue.fail_all(NotReady("service is shutting down"))
        self.executor.shutdown(wait=False, cancel_futures=True)

    def available(self) -> bool:
        """False while the circuit breaker is open (``/readyz`` reports 503)."""
        return self.breaker.state is not BreakerState.OPEN

    def estimated_seconds(self, candidates: int) -> float | None:
        """Backend seconds for ``candidates`` typical logits (None until the backend has been measured)."""
        return self.rate.seconds_for(candidates)

    async def score(self, sequences: Sequence[Encoded], *, deadline: float | None = None) -> np.ndarray:
        """Logits (float32, one per output, in order) once their backend calls have run.

        Args:
            sequences: the request's sequences: pairs (a logit each) or shared-prefix sequences (a logit
                per candidate).
            deadline: ``time.perf_counter()`` value by which the request must be answered.

        Raises:
            NotReady: the batcher is not running.
            Overloaded: the queue is full (or the backend is busy and not measured yet).
            BackendUnavailable: the circuit breaker is open, or the backend is down.
            BackendTimeout: the deadline passed while the sequences waited.
            BackendError: one of the sequences failed in the backend, even alone.
        """
        if not self._tasks or any(task.done() for task in self._tasks):
            raise NotReady(f"{self.model} batcher is not running")
        if not sequences:
            return np.zeros(0, dtype=np.float32)
        self.breaker.check()
        busy = len(self.queue) > 0 or self._running > 0
        if (
            self.rate.seconds_per_candidate is None
            and busy
            and len(self.queue) + len(sequences) > self.settings.max_pairs
        ):
            # Until one call has been measured no wait can be estimated: hold about one batch.
            raise Overloaded(f"{self.model}: backend speed not measured yet and a batch is waiting")
        if deadline is not None and deadline <= time.perf_counter():
            raise BackendTimeout(f"{self.model}: the request's deadline passed before it was queued")
        loop = asyncio.get_running_loop()
        context = trace.get_current_span().get_span_context()
        items = [
            WorkItem(sequence, loop.create_future(), deadline=deadline, context=context)
            for sequence in sequences
        ]
        self.queue.put_all(items)
        self._observe_queue()
        attributes: dict[str, str | int] = {
            tracing.SEQUENCES: len(sequences),
            tracing.CANDIDATES: sum(sequence.outputs for sequence in sequences),
            tracing.TOKENS: sum(len(sequence) for sequence in sequences),
        }
        with self.tracer.start_as_current_span("score", attributes=attributes):
            try:
                # Cancelling this gather (client gone, timeout) cancels the futures: the worker drops them.
                logits = await asyncio.gather(*(item.future for item in items))
            except RankerError:
                for item in items:  # the request has failed: its other sequences need not run
                    item.future.cancel()
                raise
            self._trace_queue_wait(items, attributes)
        return np.concatenate(logits).astype(np.float32, copy=False)

    def _trace_queue_wait(self, items: list[WorkItem], attributes: dict[str, str | int]) -> None:
        """A span from the request's sequences entering the queue to its first backend call."""
        started = [item.started_ns for item in items if item.started_ns is not None]
        if started:
            span = self.tracer.start_span(
                "queue wait", start_time=items[0].enqueued_ns, attributes=attributes
            )
            span.end(end_time=min(started))

    async def _run(self) -> None:
        while True:
            items: list[WorkItem] = []
            try:
                items = await self._next_batch()
                if items:
                    await self._execute(items)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not kill the worker, nor leave its batch waiting
                logger.exception("batcher worker error model=%s", self.model)
                error = BackendError(f"{self.model} batch could not be run")
                for item in items:
                    if not item.future.done():
                        item.future.set_exception(error)

    def _is_full(self) -> bool:
        return len(self.queue) >= self.settings.max_pairs or self.queue.tokens >= self.settings.max_tokens

    async def _next_batch(self) -> list[WorkItem]:
        await self.queue.wait_for_items()
        oldest = self.queue.oldest_enqueued_at()
        if oldest is None:
            return []
        # Waiting for batch-mates pays only when the backend runs sequences together; a model run
        # one sequence per call gains nothing from it, so its batches close at once.
        max_wait_s = 0.0 if self.settings.sub_batch_pairs == 1 else self.settings.max_wait_s
        deadline = oldest + max_wait_s
        while not self._is_full():
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            await self.queue.wait_for_items(remaining)
        items = self.queue.take(
            max_pairs=self.settings.max_pairs,
            max_tokens=self.settings.max_tokens,
            on_drop=self.recorder.dropped,
        )
        self._observe_queue()
        return items

    def _observe_queue(self) -> None:
        self.recorder.waiting(len(self.queue))

    async def _execute(self, items: list[WorkItem]) -> None:
        started = time.perf_counter()
        for item in items:
            self.recorder.waited(started - item.enqueued_at)
        if self.breaker.state is BreakerState.OPEN:
            error = BackendUnavailable(f"{self.model} backend keeps failing; circuit breaker open")
            for item in items:
                if not item.future.done():
                    item.future.set_exception(error)
            return
        self.recorder.batch([item.sequence for item in items])
        items = sorted(items, key=lambda item: len(item.sequence))
        step = self.settings.sub_batch_pairs or len(items)
        chunks = [items[start : start + step] for start in range(0, len(items), step)]
        self._running += 1
        outcome = CallOutcome()
        try:
            for chunk in chunks:
                await self.calls.run_isolated(chunk, outcome)
        finally:
            self._running -= 1
        if outcome.succeeded or outcome.failed:
            self.breaker.record(failed=outcome.succeeded == 0)
            self.recorder.breaker(not self.available())
        if outcome.error is not None:
            self.failures.batch_failed(
                outcome.error,
                backend=self.backend.name,
                sequences=len(items),
                failed_pairs=outcome.failed,
                failed_calls=outcome.failed_calls,
            )
