"""The backend protocol: a padded batch of pairs in, one logit per pair out.

A backend knows nothing of HTTP, requests or batching policy. Two kinds exist:

- :class:`Backend` (``onnx``, ``fake``): blocking calls; the batcher groups pairs from concurrent
  requests and runs the calls on an executor thread, never on the event loop.
- :class:`RemoteBackend` (``triton``): a server with a dynamic batcher of its own; its calls are
  coroutines awaited on the event loop, and the gateway does not batch for it (no double queueing
  delay: see :class:`~dialogue_ranker.serving.batching.DirectScorer`).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from typing_extensions import TypeIs

from dialogue_ranker.serving.cpu import available_cpus, intra_op_threads
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.tokenization import Batch

if TYPE_CHECKING:
    from dialogue_ranker.serving.model_bundle import OnnxModelSpec
    from dialogue_ranker.serving.settings import Settings


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


def build_backend(settings: Settings, spec: OnnxModelSpec) -> AnyBackend:
    """The backend named by ``settings.backend`` for one ONNX graph of the bundle."""
    if settings.backend == "onnx":
        from dialogue_ranker.serving.backends.onnx import OnnxBackend

        return OnnxBackend(
            spec,
            intra_op_threads=settings.onnx.intra_op_threads or intra_op_threads(settings.batching.workers),
            inter_op_threads=settings.onnx.inter_op_threads,
            solo_threads=settings.onnx.solo_threads or available_cpus(),
        )
    if settings.backend == "fake":
        from dialogue_ranker.serving.backends.fake import FakeBackend, poison_ids

        fake = settings.fake
        return FakeBackend(
            latency_s=fake.latency_s,
            fail_every_n_batches=fake.fail_every_n_batches,
            fail_on_ids=poison_ids(fake.fail_on_text, spec.tokenizer_path) if fake.fail_on_text else (),
        )
    from dialogue_ranker.serving.backends.triton import TritonBackend

    triton = settings.triton
    return TritonBackend(
        url=triton.url,
        model_name=triton.selector_model if spec.role == "selector" else triton.ranker_model,
        input_names=spec.input_names,
        output_name=spec.output_name,
        timeout_s=triton.timeout_s,
        health_timeout_s=triton.health_timeout_s,
        length_buckets=_buckets_within(triton.length_buckets, spec.max_length),
        max_batch_pairs=triton.max_batch_pairs,
    )


def _buckets_within(buckets: list[int], max_length: int) -> tuple[int, ...]:
    # Pairs never pass the model's length limit, so it is the last bucket. A shared-prefix sequence
    # holding several candidates can: it is sent at its own length (scored right, batched less).
    if not buckets:
        return ()
    return (*(b for b in buckets if b < max_length), max_length)
