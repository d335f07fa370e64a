"""No gateway batching: each request's sequences go to a remote backend at once.

A remote backend (Triton) batches requests in its own queue, so a second queue here would only
add its wait to every request. Instead, each request's sequences are grouped by length bucket (the
smallest of the backend's ``length_buckets`` that holds the sequence), each group is padded to its
bucket and sent as calls of at most ``max_batch_pairs`` sequences, all concurrently. Equal buckets
make equal shapes, and only equal shapes are merged by Triton's dynamic batcher.

Admission stays here: sequences in flight are bounded by ``max_in_flight_pairs`` (429 beyond it).
Exactly one logit comes back per candidate; when a call fails the whole request gets that call's
error, logged and counted once.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Sequence

import numpy as np
from opentelemetry import trace

from dialogue_ranker.serving import tracing
from dialogue_ranker.serving.backends.base import RemoteBackend
from dialogue_ranker.serving.batching.backend_calls import Encoded, PadFn
from dialogue_ranker.serving.batching.call_metrics import CallRecorder
from dialogue_ranker.serving.errors import BackendError, BackendTimeout, NotReady, Overloaded, RankerError
from dialogue_ranker.serving.metrics import Metrics

logger = logging.getLogger(__name__)


def bucket_length(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds ``length`` (``length`` itself past the last or with none)."""
    index = bisect.bisect_left(buckets, length)
    return buckets[index] if index < len(buckets) else length


class DirectScorer:
    """Sends sequences to a remote backend per request: no queue, no wait."""

    def __init__(
        self,
        *,
        backend: RemoteBackend,
        pad: PadFn,
        metrics: Metrics,
        max_in_flight_pairs: int,
        model: str = "default",
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.backend = backend
        self.pad = pad
        self.recorder = CallRecorder(metrics, model=model, backend=backend.name)
        self.max_in_flight_pairs = max_in_flight_pairs
        self.model = model
        self.in_flight = 0
        self._running = False
        self.tracer = tracer or trace.NoOpTracer()

    async def start(self, *, warm_up: bool = False) -> None:
        """Accept work (no warm-up: the remote server warms its own models)."""
        self._running = True

    async def close(self) -> None:
        """Refuse new work (calls in flight finish or fail on their own)."""
        self._running = False

    def estimated_seconds(self, candidates: int) -> float | None:
        """Not known: the work is the remote server's (its queue timeout bounds the wait)."""
        return None

    def available(self) -> bool:
        """Always: the remote server's readiness is probed by the backend's ``health``."""
        return True

    async def score(self, sequences: Sequence[Encoded], *, deadline: float | None = None) -> np.ndarray:
        """Logits (float32, one per candidate the sequences hold, in order).

        Raises:
            NotReady: the scorer is closed.
            BackendTimeout: ``deadline`` (``time.perf_counter()``) has already passed.
            Overloaded: too many sequences in flight, or the backend's queue is full.
            BackendError, BackendUnavailable, BackendTimeout: a backend call failed.
        """
        if not self._running:
            raise NotReady(f"{self.model} scorer is not running")
        if not sequences:
            return np.zeros(0, dtype=np.float32)
        if deadline is not None and time.perf_counter() >= deadline:
            raise BackendTimeout(f"{self.model}: the request's deadline passed before it was sent")
        if self.in_flight + len(sequences) > self.max_in_flight_pairs:
            raise Overloaded(
                f"{self.in_flight} sequences in flight, {len(sequences)} more would pass "
                f"{self.max_in_flight_pairs}"
            )
        self.in_flight += len(sequences)
        self.recorder.waiting(self.in_flight)
        try:
            calls = self._calls(sequences)
            results = await asyncio.gather(*(self._call(sequences, chunk, length) for chunk, length in calls))
        finally:
            self.in_flight -= len(sequences)
            self.recorder.waiting(self.in_flight)
        # A shared-prefix sequence yields a logit per candidate: split each call's output by item.
        per_item: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(sequences)
        for (chunk, _), out in zip(calls, results, strict=True):
            ends = np.cumsum([sequences[i].outputs for i in chunk])
            for index, part in zip(chunk, np.split(out, ends[:-1]), strict=True):
                per_item[index] = part
        return np.concatenate(per_item).astype(np.float32, copy=False)

    def _calls(self, sequences: Sequence[Encoded]) -> list[tuple[list[int], int]]:
        """(sequence indices, padded length) of each backend call."""
        buckets = self.backend.length_buckets
        groups: dict[int, list[int]] = {}
        if buckets:
            for index, sequence in enumerate(sequences):
                groups.setdefault(bucket_length(len(sequence), buckets), []).append(index)
        else:  # no buckets: one group, padded to its longest sequence
            groups[max(len(p) for p in sequences)] = list(range(len(sequences)))
        step = self.backend.max_batch_pairs
        return [
            (indices[start : start + step], length)
            for length, indices in sorted(groups.items())
            for start in range(0, len(indices), step)
        ]

    async def _call(self, sequences: Sequence[Encoded], chunk: list[int], length: int) -> np.ndarray:
        # Padding a request's sequences is a few small numpy fills: cheaper here than a thread hop.
        sequences = [sequences[i] for i in chunk]
        batch = self.pad(sequences, pad_to=length)
        started = time.perf_counter()
        attributes: dict[str, str | int] = {
            tracing.BACKEND: self.backend.name,
            tracing.SEQUENCES: len(chunk),
            tracing.CANDIDATES: sum(sequence.outputs for sequence in sequences),
            tracing.TOKENS: batch.real_tokens,
            tracing.PADDED_TOKENS: batch.shape[0] * batch.shape[1],
        }
        try:
            with self.tracer.start_as_current_span("backend call", attributes=attributes):
                out = np.asarray(await self.backend.infer(batch), dtype=np.float32).reshape(-1)
            candidates = sum(sequence.outputs for sequence in sequences)
            if out.shape[0] != candidates:
                raise BackendError(
                    f"ranker backend returned {out.shape[0]} logits for {candidates} candidates"
                )
        except Exception as e:
            expected = isinstance(e, RankerError)
            # A translated backend error is logged by type; anything else with its traceback.
            logger.error(
                "backend call failed model=%s backend=%s sequences=%d error=%s",
                self.model,
                self.backend.name,
                len(chunk),
                type(e).__name__,
                exc_info=not expected,
            )
            self.recorder.call_failed()
            self.recorder.failed(len(chunk))
            if expected:
                raise
            raise BackendError("ranker backend failed on a batch") from e
        self.recorder.batch(sequences)  # Triton batches on its side: each call is the gateway's batch
        self.recorder.call(sequences, batch, time.perf_counter() - started)
        return out
