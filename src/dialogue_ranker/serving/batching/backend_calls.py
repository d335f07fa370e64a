"""A batch's backend calls: padded on the batcher's call threads, failures narrowed to the sequences at fault.

Each call pads its sequences (to a multiple of ``pad_to_multiple``, capped by the model's length),
runs on one of the batcher's own call threads, updates the measured speed and resolves its sequences'
futures as soon as it returns. Sequences whose request was cancelled or whose deadline passed are
dropped before each call. A call that fails with :class:`BackendError` (or an unexpected
exception) is retried in halves down to single sequences, and a single sequence once more, so only the
sequences that fail alone, twice, fail; :class:`BackendUnavailable` and :class:`BackendTimeout` are
not retried: they say the backend, not a sequence, is the problem.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from opentelemetry import trace

from dialogue_ranker.serving import tracing
from dialogue_ranker.serving.backends.base import Backend
from dialogue_ranker.serving.batching.admission import ServiceRate
from dialogue_ranker.serving.batching.call_metrics import CallRecorder
from dialogue_ranker.serving.batching.queue import WorkItem, drop_reason
from dialogue_ranker.serving.errors import BackendError, BackendTimeout, BackendUnavailable, RankerError
from dialogue_ranker.serving.list_encoding import EncodedList, ListBatch
from dialogue_ranker.serving.settings import BatchingSettings
from dialogue_ranker.serving.tokenization import Batch, EncodedPair

#: Pads sequences (pairs or shared-prefix sequences) into a batch, optionally to a given length.
PadFn = Callable[..., Batch | ListBatch]
#: What the batcher queues: a pair (one logit) or a shared-prefix sequence (a logit per candidate).
Encoded = EncodedPair | EncodedList


def round_up(length: int, multiple: int) -> int:
    """``length`` rounded up to a multiple of ``multiple``."""
    return -(-length // multiple) * multiple


@dataclass
class CallOutcome:
    """What happened to the sequences of one batch."""

    succeeded: int = 0
    failed: int = 0
    failed_calls: int = 0
    error: BaseException | None = None


class BackendCalls:
    """Runs a batcher's backend calls: one backend, its call threads, its speed and its metrics."""

    def __init__(
        self,
        *,
        backend: Backend,
        pad: PadFn,
        executor: ThreadPoolExecutor,
        settings: BatchingSettings,
        rate: ServiceRate,
        recorder: CallRecorder,
        tracer: trace.Tracer,
        max_length: int | None,
    ) -> None:
        self.backend = backend
        self.pad = pad
        self.executor = executor
        self.settings = settings
        self.rate = rate
        self.recorder = recorder
        self.tracer = tracer
        # Bucket padding never goes past the model's own length limit.
        self.max_length = max_length

    def live(self, chunk: list[WorkItem]) -> list[WorkItem]:
        """The sequences of ``chunk`` still wanted; the others are dropped and counted by reason."""
        now = time.perf_counter()
        live = []
        for item in chunk:
            reason = drop_reason(item, now)
            if reason is None:
                live.append(item)
            else:
                self.recorder.dropped(reason)
        return live

    async def run_isolated(self, chunk: list[WorkItem], outcome: CallOutcome, *, retry: bool = False) -> None:
        """Run one backend call; on a sequence-level failure, retry each half on its own.

        A lone sequence that fails is tried once more (a transient fault passes; a poison sequence fails
        twice and only its request gets the error).
        """
        live = self.live(chunk)
        if not live:
            return
        loop = asyncio.get_running_loop()
        now_ns = time.time_ns()
        for item in live:
            item.started_ns = item.started_ns or now_ns
        span = self._call_span(live)
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                logits = await loop.run_in_executor(
                    self.executor, self.infer, [item.sequence for item in live]
                )
        except Exception as e:
            span.set_status(trace.StatusCode.ERROR, type(e).__name__)
            span.end()
            await self._call_failed(live, e, outcome, retry=retry)
            return
        span.end()
        outcome.succeeded += len(live)
        ends = np.cumsum([item.sequence.outputs for item in live])
        for item, item_logits in zip(live, np.split(logits, ends[:-1]), strict=True):
            if not item.future.done():
                item.future.set_result(item_logits)

    def _call_span(self, live: list[WorkItem]) -> trace.Span:
        """The call's span, linked to the span of every request it serves."""
        # SpanContext is not hashable: one link per request span, keyed by its ids.
        links = {
            (c.trace_id, c.span_id): c for item in live if (c := item.context) is not None and c.is_valid
        }
        return self.tracer.start_span(
            "backend call",
            links=[trace.Link(context) for context in links.values()],
            attributes={
                tracing.BACKEND: self.backend.name,
                tracing.SEQUENCES: len(live),
                tracing.CANDIDATES: sum(item.sequence.outputs for item in live),
                tracing.TOKENS: sum(len(item.sequence) for item in live),
            },
        )

    async def _call_failed(
        self, live: list[WorkItem], e: Exception, outcome: CallOutcome, *, retry: bool
    ) -> None:
        """Count a failed call, then retry its halves (or its lone sequence once) or fail its sequences."""
        outcome.failed_calls += 1
        outcome.error = outcome.error or e
        self.recorder.call_failed()
        if not isinstance(e, BackendUnavailable | BackendTimeout):
            if len(live) > 1:
                middle = len(live) // 2
                await self.run_isolated(live[:middle], outcome)
                await self.run_isolated(live[middle:], outcome)
                return
            if not retry:
                await self.run_isolated(live, outcome, retry=True)
                return
        error = e if isinstance(e, RankerError) else BackendError("ranker backend failed")
        outcome.failed += len(live)
        self.recorder.failed(len(live))
        for item in live:
            if not item.future.done():
                item.future.set_exception(error)

    def infer(self, sequences: list[Encoded]) -> np.ndarray:
        """Pad and run one backend call; a call thread. Returns a logit per candidate, in order."""
        started = time.perf_counter()
        batch = self.pad(sequences, pad_to=self.pad_length(sequences))
        out = np.asarray(self.backend.infer(batch), dtype=np.float32).reshape(-1)
        candidates = sum(sequence.outputs for sequence in sequences)
        if out.shape[0] != candidates:
            raise BackendError(f"ranker backend returned {out.shape[0]} logits for {candidates} candidates")
        elapsed = time.perf_counter() - started
        self.rate.observe(candidates=candidates, seconds=elapsed)
        self.recorder.call(sequences, batch, elapsed)
        return out

    def pad_length(self, sequences: list[Encoded]) -> int | None:
        """The longest of ``sequences`` rounded up to ``pad_to_multiple``, within the model's length."""
        multiple = self.settings.pad_to_multiple
        if multiple <= 1:
            return None
        longest = max(len(sequence) for sequence in sequences)
        bucket = round_up(longest, multiple)
        if self.max_length is not None:
            bucket = min(bucket, max(self.max_length, longest))
        return bucket
