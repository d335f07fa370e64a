"""The Triton backend: one model on a remote NVIDIA Triton Inference Server, over async gRPC.

Tensors travel as binary int64 (gRPC raw contents, no JSON). Every call carries a client
timeout. Readiness is the server's and the model's ready state. tritonclient's errors are
translated here, once, into the service's errors:

- the server cannot be reached (refused, reset) or the model is not loaded: :class:`BackendUnavailable`
  (503);
- no answer within ``timeout_s``: :class:`BackendTimeout` (504);
- Triton's queue policy refused the request (queue full, queue timeout): :class:`Overloaded` (429);
- anything else the server reports: :class:`BackendError` (502).

Triton's dynamic batcher does the batching, so the gateway sends each request's pairs at once
(:class:`~dialogue_ranker.serving.batching.DirectScorer`), padded to ``length_buckets``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.grpc.aio import InferenceServerClient
from tritonclient.utils import InferenceServerException

from dialogue_ranker.serving.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    Overloaded,
    RankerError,
)
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.tokenization import Batch

logger = logging.getLogger(__name__)

#: Messages of Triton's queue-policy rejections (sent with gRPC status UNAVAILABLE).
_QUEUE_REJECTIONS = ("maximum queue size", "timeout expired")

#: gRPC channel options. After Triton restarts, the channel must reconnect within about a second,
#: not after gRPC's default backoff (which grows to two minutes while the server is down).
_MAX_MESSAGE_BYTES = 2**31 - 1
_CHANNEL_ARGS = [
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 5_000),
]


def translate_error(
    error: InferenceServerException, *, model: str, url: str, timeout_s: float
) -> RankerError:
    """The service error for a tritonclient error (its message never carries Triton's text)."""
    status = str(error.status() or "")
    message = str(error.message() or "").lower()
    if status.endswith("DEADLINE_EXCEEDED"):
        return BackendTimeout(f"triton model {model!r} did not answer within {timeout_s:g} s")
    if any(text in message for text in _QUEUE_REJECTIONS):
        return Overloaded(f"triton model {model!r} refused the request: its queue is full")
    if status.endswith(("UNAVAILABLE", "NOT_FOUND")):  # down, or the model is not loaded (yet)
        return BackendUnavailable(f"triton at {url} is unreachable or model {model!r} is not ready")
    return BackendError(f"triton model {model!r} failed on a batch ({status or 'unknown status'})")


class TritonBackend:
    """Runs one model of the bundle on a Triton server (the bundle's ranker)."""

    name = "triton"

    def __init__(
        self,
        *,
        url: str,
        model_name: str,
        input_names: Sequence[str],
        output_name: str,
        timeout_s: float,
        health_timeout_s: float,
        length_buckets: tuple[int, ...] = (),
        max_batch_pairs: int = 64,
    ) -> None:
        self.url = url
        self.model_name = model_name
        self.input_names = tuple(input_names)
        self.output_name = output_name
        self.timeout_s = timeout_s
        self.health_timeout_s = health_timeout_s
        self.length_buckets = length_buckets
        self.max_batch_pairs = max_batch_pairs
        self._client: InferenceServerClient | None = None

    async def start(self) -> None:
        """Open the gRPC channel; a Triton that is not ready yet only makes ``/readyz`` 503."""
        self._client = InferenceServerClient(self.url, channel_args=_CHANNEL_ARGS)
        if await self.health():
            logger.info("triton ready url=%s model=%s", self.url, self.model_name)
        else:
            logger.warning("triton not ready yet url=%s model=%s", self.url, self.model_name)

    async def close(self) -> None:
        """Close the channel."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def health(self) -> bool:
        """True when the server and the model are both ready."""
        client = self._client
        if client is None:
            return False
        try:
            return bool(
                await client.is_server_ready(client_timeout=self.health_timeout_s)
                and await client.is_model_ready(self.model_name, client_timeout=self.health_timeout_s)
            )
        except InferenceServerException as e:
            logger.debug("triton probe failed url=%s status=%s", self.url, e.status())
            return False

    async def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        """Logits for the batch, float32 of shape (pairs,); see the module for the errors."""
        client = self._client
        if client is None:
            raise BackendUnavailable("triton backend is not started")
        inputs = []
        for name, array in batch.as_feeds(self.input_names).items():
            tensor = InferInput(name, list(array.shape), "INT64")
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        try:
            result = await client.infer(
                self.model_name,
                inputs,
                outputs=[InferRequestedOutput(self.output_name)],
                client_timeout=self.timeout_s,
            )
        except InferenceServerException as e:
            # Triton's own words go to the log only (they name shapes and paths, never request text).
            logger.warning(
                "triton call failed model=%s status=%s reason=%s", self.model_name, e.status(), e.message()
            )
            raise translate_error(e, model=self.model_name, url=self.url, timeout_s=self.timeout_s) from e
        logits = result.as_numpy(self.output_name)
        if logits is None or logits.shape[0] != batch.shape[0]:
            raise BackendError(f"triton model {self.model_name!r} returned no logit per pair")
        return batch.readout(logits)
