"""The OpenVINO backend: the bundle's ONNX graph compiled by OpenVINO for the CPU, in process.

OpenVINO reads the shipped graph as it is: its ONNX front end turns ONNX Runtime's ``MatMulNBits``
nodes into int8 weights with a decompression step, which its CPU plugin runs as int8 matrix
products over activations quantized per token in groups of 128, the weights' own blocks
(``DYNAMIC_QUANTIZATION_GROUP_SIZE``; per token, so a candidate's score never mixes with another
token's, let alone another request's). The rest of the graph (attention, layer norms, GELU) runs at
``INFERENCE_PRECISION_HINT``: bf16 where the CPU computes bf16 natively (AVX-512 BF16 or AMX),
fp32 elsewhere. No extra file, no conversion at load: compiling takes about 0.3 s.

Threads: ``streams`` OpenVINO streams of ``threads_per_stream`` threads (by default one stream per
CPU of the container's quota, one thread each) and a pool of infer requests, one per concurrent
batcher call, so that calls queue inside OpenVINO for the next free stream rather than crowd
the CPUs. Like the ONNX backend, a call that starts while no other runs uses a second compilation
with every CPU in one stream (``solo_threads``): a lone request is not held to one CPU.

``openvino`` is a serving dependency wherever OpenVINO publishes a wheel (Linux x86-64 and arm64,
Windows x86-64, macOS arm64: ``pyproject.toml``); elsewhere ``auto`` serves ONNX Runtime and says
why. The module imports it at :meth:`OpenVinoBackend.start`, never at import time.
"""

from __future__ import annotations

import logging
import queue
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dialogue_ranker.serving.backends import optional
from dialogue_ranker.serving.backends.base import CallsInFlight, probe_batch, require_inputs
from dialogue_ranker.serving.cpu import amx_bf16, native_bf16
from dialogue_ranker.serving.errors import BackendError, BackendUnavailable
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.model_bundle import OnnxModelSpec
from dialogue_ranker.serving.tokenization import Batch

logger = logging.getLogger(__name__)

#: What OpenVINO computes the graph's non-quantized parts in.
Precision = Literal["bf16", "f32"]
#: How the shipped graph's int8 weights are used: as int8 products (``int8``), or dequantized once at
#: load (OpenVINO's constant folding of the decompression step) and run at the precision (``fp32``).
Weights = Literal["int8", "fp32"]
#: Activations of the int8 products are quantized per token in groups of this many values: the
#: weights' blocks of 128 (MatMulNBits' own), 1.24x faster than OpenVINO's default of 32 on 2 Zen 5
#: cores at the same distance from fp32 (docs/research/2026-11-26-openvino-backend.md).
GROUP_SIZE = 128
#: Input shapes whose kernels the CPU plugin keeps per compilation (the setting's default; see it).
RUNTIME_CACHE_CAPACITY = 256
INSTALL_HINT = optional.RUNTIMES["openvino"].install_hint


def openvino_available() -> bool:
    """True when the ``openvino`` package is installed (platforms without its wheel go without)."""
    return optional.available("openvino")


def resolve_precision(setting: str, flags: frozenset[str] | None = None) -> Precision:
    """``auto``: bf16 where the CPU has native bf16 (AVX-512 BF16, AMX), else f32; or the setting."""
    if setting == "auto":
        return "bf16" if native_bf16(flags) else "f32"
    if setting not in ("bf16", "f32"):
        raise ValueError(f"unknown OpenVINO precision {setting!r}")
    return "bf16" if setting == "bf16" else "f32"


def resolve_weights(setting: str, precision: Precision, flags: frozenset[str] | None = None) -> Weights:
    """``auto``: fp32 weights for bf16 where the CPU has AMX, the int8 products elsewhere; or the setting.

    Measured on an Intel Xeon with AMX (2 cores, benchmarks/results/report-xeon-amx*.md): bf16
    products of the dequantized weights run on the AMX tiles at 1.2-1.4x OpenVINO's int8 ones,
    while in f32 the int8 products stay faster (1.5-1.9x). Without AMX the int8 form is as fast in
    bf16 and faster in f32, at a quarter of the memory (docs/research/2026-11-26-openvino-backend.md).
    """
    if setting == "auto":
        return "fp32" if precision == "bf16" and amx_bf16(flags) else "int8"
    if setting not in ("int8", "fp32"):
        raise ValueError(f"unknown OpenVINO weights {setting!r}")
    return "fp32" if setting == "fp32" else "int8"


def compile_graph(
    path: Path,
    *,
    precision: Precision,
    streams: int,
    threads: int,
    dynamic_quantization_group_size: int | None = GROUP_SIZE,
    weights: Weights = "int8",
    runtime_cache_capacity: int | None = RUNTIME_CACHE_CAPACITY,
) -> Any:
    """The ONNX graph at ``path`` compiled for the CPU (an ``openvino.CompiledModel``).

    Raises:
        BackendUnavailable: openvino is not installed, or the graph does not load or compile.
    """
    ov = optional.require("openvino")
    config: dict[str, Any] = {
        "INFERENCE_PRECISION_HINT": precision,
        "NUM_STREAMS": streams,
        "INFERENCE_NUM_THREADS": threads,
        # Pinned threads fight the batcher's and the tokenizer's threads for the same cores.
        "ENABLE_CPU_PINNING": False,
    }
    if dynamic_quantization_group_size is not None:
        config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = dynamic_quantization_group_size
    if runtime_cache_capacity is not None:
        # Kernels compiled per input shape; the graph's shapes vary with every batch, and the plugin's
        # default keeps 5000 of them (about 1 MB each): a long-running server's memory crept by GBs.
        config["CPU_RUNTIME_CACHE_CAPACITY"] = runtime_cache_capacity
    try:
        core = ov.Core()
        model = core.read_model(str(path))
        if weights == "fp32":  # fold (weights - zero point) x scale into fp32 constants, once
            from openvino import passes

            manager = passes.Manager()
            manager.register_pass(passes.ConstantFolding())
            manager.run_passes(model)
        return core.compile_model(model, "CPU", config)
    except Exception as e:  # openvino raises RuntimeError subclasses of its own for every failure
        raise BackendUnavailable(f"openvino cannot compile {path.name}: {e}") from e


class OpenVinoBackend:
    """Runs one ONNX graph of the bundle with OpenVINO's CPU plugin."""

    name = "openvino"

    def __init__(
        self,
        spec: OnnxModelSpec,
        *,
        precision: Precision,
        streams: int = 1,
        threads_per_stream: int = 1,
        requests: int = 1,
        solo_threads: int | None = None,
        dynamic_quantization_group_size: int | None = GROUP_SIZE,
        weights: Weights = "int8",
        runtime_cache_capacity: int | None = RUNTIME_CACHE_CAPACITY,
    ) -> None:
        self.spec = spec
        self.runtime_cache_capacity = runtime_cache_capacity
        self.weights: Weights = weights
        self.precision: str = precision
        self.streams = max(1, streams)
        self.threads_per_stream = max(1, threads_per_stream)
        self.requests = max(1, requests, self.streams)
        self.dynamic_quantization_group_size = dynamic_quantization_group_size
        # As the ONNX backend: a call that starts alone may use every CPU (see its solo session).
        self.solo_threads = solo_threads if solo_threads and solo_threads > self.threads_per_stream else None
        self._pool: queue.SimpleQueue[Any] | None = None
        self._solo: Any = None
        self._calls = CallsInFlight()

    def start(self) -> None:
        """Compile the graph (twice with a solo compilation). Raises BackendUnavailable when it cannot."""
        compiled = self._compile(self.streams, self.streams * self.threads_per_stream)
        require_inputs(self.spec, {name for port in compiled.inputs for name in port.get_names()})
        pool: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(self.requests):
            pool.put(compiled.create_infer_request())
        if self.solo_threads is not None:
            self._solo = self._compile(1, self.solo_threads).create_infer_request()
            # The batcher's warm-up calls run alone, on the solo compilation: pay the pool's first call.
            request = pool.get()
            request.infer(probe_batch(self.spec.input_names).as_feeds(self.spec.input_names))
            pool.put(request)
        self._pool = pool
        logger.info(
            "openvino model compiled file=%s precision=%s weights=%s streams=%d threads_per_stream=%d "
            "requests=%d solo_threads=%s",
            self.spec.path.name, self.precision, self.weights, self.streams, self.threads_per_stream,
            self.requests, self.solo_threads,
        )  # fmt: skip

    def _compile(self, streams: int, threads: int) -> Any:
        return compile_graph(
            self.spec.path,
            precision="bf16" if self.precision == "bf16" else "f32",
            streams=streams,
            threads=threads,
            dynamic_quantization_group_size=self.dynamic_quantization_group_size,
            weights=self.weights,
            runtime_cache_capacity=self.runtime_cache_capacity,
        )

    def close(self) -> None:
        """Drop the compiled graphs and their requests."""
        self._pool = self._solo = None

    def health(self) -> bool:
        """Run a one-pair probe."""
        if self._pool is None:
            return False
        try:
            return self.infer(probe_batch(self.spec.input_names)).shape == (1,)
        except (BackendError, BackendUnavailable):
            return False

    def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        """Logits for the batch, float32, one per pair (or per candidate of a shared-prefix batch)."""
        pool = self._pool
        if pool is None:
            raise BackendUnavailable("openvino backend is not started")
        with self._calls.call() as alone:
            solo = self._solo if alone else None
            request = solo if solo is not None else pool.get()
            try:
                output = request.infer(batch.as_feeds(self.spec.input_names))
                # The output tensor is the request's own buffer, reused by its next call: copy it out.
                logits = np.array(output[self.spec.output_name], dtype=np.float32, copy=True)
            except Exception as e:  # openvino raises its own untyped errors
                raise BackendError(f"openvino failed on a batch of shape {batch.shape}") from e
            finally:
                if solo is None:
                    pool.put(request)
        return batch.readout(logits)
