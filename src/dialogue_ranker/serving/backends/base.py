"""The backend protocol: a padded batch of pairs in, one logit per pair out.

A backend knows nothing of HTTP, requests or batching policy. Two kinds exist:

- :class:`Backend` (``onnx``, ``openvino``, ``fake``): blocking calls; the batcher groups pairs
  from concurrent requests and runs the calls on an executor thread, never on the event loop.
- :class:`RemoteBackend` (``triton``): a server with a dynamic batcher of its own; its calls are
  coroutines awaited on the event loop, and the gateway does not batch for it (no double queueing
  delay: see :class:`~dialogue_ranker.serving.batching.DirectScorer`).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import numpy as np
from typing_extensions import TypeIs

from dialogue_ranker.serving.errors import BackendUnavailable
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.model_bundle import OnnxModelSpec
from dialogue_ranker.serving.tokenization import Batch

#: A one-pair probe for the health checks: small ids are inside any vocabulary.
_PROBE_IDS = np.array([[1, 5, 2, 6, 2]], dtype=np.int64)


@runtime_checkable
class Backend(Protocol):
    """What the batcher needs from an inference backend."""

    #: Short, fixed name used as a metric label (``onnx``, ``fake``...).
    name: str

    def start(self) -> None:
        """Load the model; blocking. Raises BackendUnavailable when it cannot."""

    def close(self) -> None:
        """Release the model."""

    def health(self) -> bool:
        """True when the backend answers a tiny inference; blocking."""

    def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        """One float32 logit per pair of ``batch``, shape (pairs,); blocking.

        Raises:
            BackendError: the backend failed on this batch.
            BackendUnavailable: the backend is not started or cannot be reached.
        """


class RemoteBackend(Protocol):
    """A backend behind a server that batches requests itself; every call is a coroutine."""

    name: str
    #: Most pairs in one call (the server model's max batch size).
    max_batch_pairs: int
    #: Lengths a call is padded to, so equal shapes meet in the server's batcher (empty: none).
    length_buckets: tuple[int, ...]

    async def start(self) -> None:
        """Connect; a server that is not ready yet is reported by ``health``, not raised."""

    async def close(self) -> None:
        """Close the connection."""

    async def health(self) -> bool:
        """True when the server and its model report ready."""

    async def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        """One float32 logit per pair of ``batch``, shape (pairs,).

        Raises:
            BackendError: the server failed on this batch.
            BackendUnavailable: the server cannot be reached or its model is not ready.
            BackendTimeout: no answer within the backend's timeout.
            Overloaded: the server's queue refused the batch.
        """


AnyBackend = Backend | RemoteBackend


def is_remote(backend: AnyBackend) -> TypeIs[RemoteBackend]:
    """True for a :class:`RemoteBackend` (its ``infer`` is a coroutine function)."""
    return inspect.iscoroutinefunction(backend.infer)


def probe_batch(input_names: Sequence[str]) -> Batch | ListBatch:
    """One short pair (or a 3-token prefix and one candidate for a shared-prefix graph)."""
    if "segment_ids" in input_names:
        segments = np.array([[0, 0, 0, 1, 1]], dtype=np.int64)
        positions = np.array([[0, 1, 2, 3, 4]], dtype=np.int64)
        # With the similarity term: the same five tokens as two blocks (turn, candidate).
        similarity = None
        if "similarity_segment_ids" in input_names:
            similarity = (_PROBE_IDS, np.array([[0, 1, 2, 0, 1]], dtype=np.int64), segments)
        return ListBatch(_PROBE_IDS, segments.clip(0, 1), positions, segments, 5, similarity)
    ones = np.ones_like(_PROBE_IDS)
    return Batch(_PROBE_IDS, ones, np.zeros_like(_PROBE_IDS), real_tokens=int(ones.sum()))


def require_inputs(spec: OnnxModelSpec, graph_inputs: Collection[str]) -> None:
    """Check that the loaded graph takes every input the bundle names.

    Raises:
        BackendUnavailable: some are missing (the bundle and its graph do not belong together).
    """
    missing = set(spec.input_names) - set(graph_inputs)
    if missing:
        raise BackendUnavailable(f"{spec.path.name} lacks inputs {sorted(missing)}")


class CallsInFlight:
    """Counts an in-process backend's calls, so that one starting alone can take every CPU.

    A call that starts while no other runs may use a session (or compilation) with the whole CPU
    quota: a lone request then takes the time of every thread, not of its one-thread share. Under
    load calls overlap and each keeps its share, so the CPUs are never asked for more threads than
    they have for longer than one call.
    """

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @contextmanager
    def call(self) -> Iterator[bool]:
        """Count one call for its duration; yields whether it started alone."""
        with self._lock:
            alone = self._count == 0
            self._count += 1
        try:
            yield alone
        finally:
            with self._lock:
                self._count -= 1
