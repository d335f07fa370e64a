"""Step 2 of a ranking request: a logit per candidate, from the logit cache or the backend.

In the order the code runs them: the context's views (the full context, and the last turn alone
when the bundle weighs it) -> the logit cache (which candidates' logits are kept) -> admission (the
logits still to compute, at the measured rate, must fit before the deadline, else 429) -> encoding
the missing candidates into sequences (off the event loop) -> the batching path (the gateway's
batcher, or straight to a remote backend), which records every backend call's metrics in one place
(:mod:`dialogue_ranker.serving.batching.call_metrics`) -> the views' logits combined.

A *candidate* is what a client sent; a *sequence* is what a runtime computes: with a shared-prefix
bundle one sequence holds many candidates, with a per-pair bundle one. It knows nothing of HTTP
nor of how the logits are read (:mod:`.reading`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
from opentelemetry import trace

from dialogue_ranker.serving import context_views, tracing
from dialogue_ranker.serving.batching import Scorer
from dialogue_ranker.serving.batching.admission import Backlog, admit
from dialogue_ranker.serving.batching.backend_calls import Encoded
from dialogue_ranker.serving.context_views import ViewWeights
from dialogue_ranker.serving.encoding import OffLoopEncoder
from dialogue_ranker.serving.errors import BackendTimeout
from dialogue_ranker.serving.logit_cache import Kept, LogitCache
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.ranking.steps import Logits
from dialogue_ranker.serving.tokenization import Turn

#: Each view's candidates: their cache key and what the cache keeps under it (None: to compute).
Known = list[list[tuple[bytes, Kept | None]]]


def misses(known: Known) -> int:
    """How many logits of a request the cache does not hold."""
    return sum(kept is None for entries in known for _, kept in entries)


class LogitScorer:
    """Context views, logit cache, admission, encoding and batching for one served model."""

    def __init__(
        self,
        *,
        encoder: OffLoopEncoder,
        batcher: Scorer,
        views: ViewWeights,
        cache_entries: int,
        metrics: Metrics,
        model: str,
        admission_margin: float = 1.0,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.encoder = encoder
        self.batcher = batcher
        #: Each context view's weight (:mod:`dialogue_ranker.serving.context_views`).
        self.views = views
        self.cache = LogitCache(cache_entries)
        self.metrics = metrics
        self.model = model
        self.admission_margin = admission_margin
        self.backlog = Backlog()
        self.tracer = tracer or trace.NoOpTracer()

    async def score(
        self,
        turns: Sequence[Turn],
        statements: Sequence[str],
        texts: list[str],
        *,
        max_candidate_tokens: int | None,
        deadline: float,
        timeout_s: float,
    ) -> Logits:
        """The logit of each of ``texts`` given the turns and statements (float32, in order).

        Raises:
            Overloaded: the logits still to compute would not be ready before ``deadline``, or a
                queue is full.
            BackendTimeout: they did not come back within ``timeout_s``.
            BackendError, BackendUnavailable, NotReady: the batching path failed.
        """
        views = context_views.views(turns, self.views)
        known = self._cached(views, statements, texts, max_candidate_tokens)
        work_s = self.batcher.estimated_seconds(misses(known)) or 0.0
        admit(
            wait_s=self.backlog.seconds + work_s,
            remaining_s=deadline - time.perf_counter(),
            margin=self.admission_margin,
            what="ranking",
        )
        try:
            async with asyncio.timeout(timeout_s):
                with self.backlog.hold(work_s):
                    self.metrics.backlog.labels(self.model).set(self.backlog.seconds)
                    sequences = await self._encode_missing(
                        views, known, statements, texts, max_candidate_tokens
                    )
                    computed = await self._computed(sequences, deadline)
        except TimeoutError:
            raise BackendTimeout(f"no scores within {timeout_s:g} s") from None
        finally:
            self.metrics.backlog.labels(self.model).set(self.backlog.seconds)
        kept = self._fill(known, computed, [n for sequence in sequences for n in sequence.output_tokens()])
        logits = context_views.combine(
            np.asarray([k.logit for k in kept], dtype=np.float32), len(views), self.views
        )
        # The full-context view comes first: its sequences are the request's input as the client sent it.
        return Logits(
            logits,
            input_tokens=sum(k.tokens for k in kept[: len(texts)]),
            computed_tokens=sum(len(sequence) for sequence in sequences),
        )

    def _cached(
        self,
        views: list[Sequence[Turn]],
        statements: Sequence[str],
        texts: list[str],
        max_candidate_tokens: int | None,
    ) -> Known:
        """Each view's candidates: their cache key and what is kept under it (None: to compute)."""
        out = []
        for turns in views:
            prefix = self.cache.prefix_key(turns, statements, max_candidate_tokens)
            keys = [self.cache.key(prefix, text) for text in texts]
            out.append([(key, self.cache.get(key)) for key in keys])
        return out

    async def _encode_missing(
        self,
        views: list[Sequence[Turn]],
        known: Known,
        statements: Sequence[str],
        texts: list[str],
        max_candidate_tokens: int | None,
    ) -> list[Encoded]:
        """The sequences of every candidate whose logit is not kept, each view's after the other's."""
        with self.tracer.start_as_current_span("encode sequences") as span:
            sequences: list[Encoded] = []
            for turns, entries in zip(views, known, strict=True):
                missing = [text for text, (_, kept) in zip(texts, entries, strict=True) if kept is None]
                if missing:
                    sequences += await self.encoder.encode(turns, statements, missing, max_candidate_tokens)
            span.set_attributes(
                {
                    tracing.SEQUENCES: len(sequences),
                    tracing.CANDIDATES: sum(s.outputs for s in sequences),
                    tracing.TOKENS: sum(len(s) for s in sequences),
                }
            )
        return sequences

    async def _computed(self, sequences: list[Encoded], deadline: float) -> np.ndarray:
        """A logit per candidate the sequences hold, from the batching path (none to compute: empty)."""
        return await self.batcher.score(sequences, deadline=deadline) if sequences else np.empty(0)

    def _fill(self, known: Known, computed: np.ndarray, tokens: list[int]) -> list[Kept]:
        """Every view's candidates, one view after another: kept ones, and computed ones (now kept too).

        ``computed`` and ``tokens`` hold a logit and its token count per missing candidate, in order.
        """
        fresh = zip(computed, tokens, strict=True)
        out = []
        for key, kept in (entry for entries in known for entry in entries):
            if kept is None:
                logit, count = next(fresh)
                kept = Kept(float(logit), count)
                self.cache.put(key, kept)
            out.append(kept)
        missed = misses(known)
        self.metrics.logit_cache.labels(self.model, "hit").inc(len(out) - missed)
        self.metrics.logit_cache.labels(self.model, "miss").inc(missed)
        self.metrics.logit_cache_entries.labels(self.model).set(len(self.cache))
        return out
