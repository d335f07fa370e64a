"""The embedded backend: an ONNX Runtime ``InferenceSession`` on CPU, in process."""

from __future__ import annotations

import logging

import numpy as np
import onnxruntime as ort

from dialogue_ranker.serving.backends.base import CallsInFlight, probe_batch, require_inputs
from dialogue_ranker.serving.errors import BackendError, BackendUnavailable
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.model_bundle import OnnxModelSpec
from dialogue_ranker.serving.tokenization import Batch

logger = logging.getLogger(__name__)


class OnnxBackend:
    """Runs one ONNX graph of the bundle with ONNX Runtime's CPU provider."""

    name = "onnx"

    def __init__(
        self,
        spec: OnnxModelSpec,
        *,
        intra_op_threads: int = 0,
        inter_op_threads: int = 1,
        solo_threads: int | None = None,
    ) -> None:
        self.spec = spec
        #: ONNX Runtime computes at the graph's own precision (int8 weights and activations: ``int8``).
        self.precision = spec.precision
        self.intra_op_threads = intra_op_threads
        self.inter_op_threads = inter_op_threads
        # A call that starts alone runs on a session with every CPU of the quota (CallsInFlight).
        self.solo_threads = solo_threads if solo_threads and solo_threads > intra_op_threads else None
        self._session: ort.InferenceSession | None = None
        self._solo_session: ort.InferenceSession | None = None
        self._calls = CallsInFlight()

    def start(self) -> None:
        """Create the session(s). Raises BackendUnavailable when the graph does not load."""
        session = self._load(self.intra_op_threads)
        require_inputs(self.spec, [i.name for i in session.get_inputs()])
        self._solo_session = None if self.solo_threads is None else self._load(self.solo_threads)
        if self._solo_session is not None:
            # The batcher's warm-up calls run alone, on the solo session: pay this one's first call.
            session.run([self.spec.output_name], self._probe().as_feeds(self.spec.input_names))
        self._session = session
        logger.info(
            "onnx session loaded file=%s threads=%d solo_threads=%s",
            self.spec.path.name, self.intra_op_threads, self.solo_threads,
        )  # fmt: skip

    def _load(self, threads: int) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = self.inter_op_threads
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            return ort.InferenceSession(
                str(self.spec.path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise BackendUnavailable(f"cannot load {self.spec.path.name}: {e}") from e

    def close(self) -> None:
        """Drop the session(s)."""
        self._session = self._solo_session = None

    def _probe(self) -> Batch | ListBatch:
        return probe_batch(self.spec.input_names)

    def health(self) -> bool:
        """Run a one-pair probe."""
        if self._session is None:
            return False
        try:
            return self.infer(self._probe()).shape == (1,)
        except (BackendError, BackendUnavailable):
            return False

    def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        """Logits for the batch, float32, one per pair (or per candidate of a shared-prefix batch)."""
        session = self._session
        if session is None:
            raise BackendUnavailable("onnx session is not started")
        with self._calls.call() as alone:
            if alone and self._solo_session is not None:
                session = self._solo_session
            try:
                (logits,) = session.run([self.spec.output_name], batch.as_feeds(self.spec.input_names))
            except Exception as e:  # onnxruntime raises its own untyped errors
                raise BackendError(f"onnx runtime failed on a batch of shape {batch.shape}") from e
        return batch.readout(logits)
