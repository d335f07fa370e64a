"""The backend protocol: a padded batch of pairs in, one logit per pair out.

A backend knows nothing of HTTP, requests or batching policy. Its calls may block: the batcher
runs them on an executor thread, never on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from service.errors import BackendUnavailable
from service.tokenization import Batch

if TYPE_CHECKING:
    from service.model_bundle import OnnxModelSpec
    from service.settings import Settings


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

    def infer(self, batch: Batch) -> np.ndarray:
        """One float32 logit per pair of ``batch``, shape (pairs,); blocking.

        Raises:
            BackendError: the backend failed on this batch.
            BackendUnavailable: the backend is not started or cannot be reached.
        """


def build_backend(settings: Settings, spec: OnnxModelSpec) -> Backend:
    """The backend named by ``settings.backend`` for one ONNX graph of the bundle.

    Raises:
        BackendUnavailable: the named backend is not available in this build.
    """
    if settings.backend == "onnx":
        from service.backends.onnx import OnnxBackend

        return OnnxBackend(
            spec,
            intra_op_threads=settings.onnx.intra_op_threads,
            inter_op_threads=settings.onnx.inter_op_threads,
        )
    if settings.backend == "fake":
        from service.backends.fake import FakeBackend

        return FakeBackend(
            latency_s=settings.fake.latency_s, fail_every_n_batches=settings.fake.fail_every_n_batches
        )
    raise BackendUnavailable(f"backend {settings.backend!r} is not implemented yet; use onnx or fake")
