"""One recorder of backend calls' metrics, for every batching path.

The gateway's batcher (:mod:`.backend_calls`) and the direct path to a remote backend
(:mod:`.direct`) both record through :class:`CallRecorder`, so a request counts the same
candidates and sequences whichever path scores it. A *sequence* is what the runtime computes (a
pair, or a shared-prefix sequence); a *candidate* is what a client sent (a logit each).
"""

from __future__ import annotations

from collections.abc import Sequence

from dialogue_ranker.serving.list_encoding import EncodedList, ListBatch
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.tokenization import Batch, EncodedPair

#: The deprecated ``*_pairs*`` aliases' ``role`` label: the ranker is the only model a bundle serves.
ALIAS_ROLE = "ranker"


class CallRecorder:
    """Records one served model's backend calls, queue, failures and drops."""

    def __init__(self, metrics: Metrics, *, model: str, backend: str) -> None:
        self.metrics = metrics
        self.model = model
        self.backend = backend

    def batch(self, sequences: Sequence[EncodedPair | EncodedList]) -> None:
        """A batch about to run: one the gateway's batcher formed, or a call to a remote backend."""
        m, model = self.metrics, self.model
        m.batch_sequences.labels(model).observe(len(sequences))
        m.batch_candidates.labels(model).observe(sum(sequence.outputs for sequence in sequences))
        m.batch_pairs.labels(model, ALIAS_ROLE).observe(len(sequences))

    def call(
        self, sequences: Sequence[EncodedPair | EncodedList], batch: Batch | ListBatch, seconds: float
    ) -> None:
        """A backend call that returned: its time, sequences, candidates and padding."""
        m, model = self.metrics, self.model
        candidates = sum(sequence.outputs for sequence in sequences)
        padded = batch.shape[0] * batch.shape[1]
        m.inference_duration.labels(self.backend, model).observe(seconds)
        m.computed_sequences.labels(model).inc(len(sequences))
        m.computed_candidates.labels(model).inc(candidates)
        m.batch_tokens.labels(model).observe(padded)
        m.padding_ratio.labels(model).observe(1.0 - batch.real_tokens / max(padded, 1))
        m.computed_pairs.labels(model, ALIAS_ROLE).inc(candidates)

    def call_failed(self) -> None:
        """A backend call that failed (an isolation retry's too)."""
        self.metrics.batch_failures.labels(self.model).inc()

    def failed(self, sequences: int) -> None:
        """Sequences whose request gets the backend's error."""
        self.metrics.failed_sequences.labels(self.model).inc(sequences)
        self.metrics.failed_pairs.labels(self.model, ALIAS_ROLE).inc(sequences)

    def dropped(self, reason: str, sequences: int = 1) -> None:
        """Queued sequences never computed: ``reason`` is ``cancelled`` or ``expired``."""
        self.metrics.dropped_sequences.labels(self.model, reason).inc(sequences)
        self.metrics.dropped_pairs.labels(self.model, ALIAS_ROLE, reason).inc(sequences)

    def waiting(self, sequences: int) -> None:
        """Sequences waiting for a batch (or in flight to a remote backend) now."""
        self.metrics.queue_sequences.labels(self.model).set(sequences)
        self.metrics.queue_pairs.labels(self.model, ALIAS_ROLE).set(sequences)

    def breaker(self, is_open: bool) -> None:
        """Whether the backend's circuit breaker is open now."""
        self.metrics.breaker_open.labels(self.model).set(int(is_open))

    def waited(self, seconds: float) -> None:
        """How long a sequence waited for its batch to start."""
        self.metrics.queue_wait.labels(self.model).observe(seconds)
