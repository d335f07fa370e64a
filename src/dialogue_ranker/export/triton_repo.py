"""Write an NVIDIA Triton model repository from an exported model bundle.

    ranker triton-repo --model models/dialogue-minilm-l6 --out build/triton-repo [--device gpu]
        [--ranker-onnx build/<run>/ranker.fp32.onnx]

For Triton's ``onnxruntime`` backend (the official container), the bundle's ranker graph:

    <out>/ranker/config.pbtxt      <out>/ranker/1/model.onnx
    <out>/ranker/warmup/...        (a shared-prefix ranker's warm-up rows)

Each ``config.pbtxt`` is built as Triton's own ``ModelConfig`` protobuf (from tritonclient), so
a field Triton does not know cannot be written. It declares the graph's int64 inputs of dims [-1]
(``input_ids`` / ``attention_mask`` / ``token_type_ids`` for a pair graph; ``input_ids`` /
``token_type_ids`` / ``position_ids`` / ``segment_ids`` for a shared-prefix ranker) and its float
output: dims [1] for a pair graph (one logit per row), dims [-1] for a shared-prefix ranker (one
logit per token, averaged per candidate by the gateway; see :class:`RowLayout`);
``max_batch_size``; a dynamic batcher with a short queue delay and a bounded queue that rejects
(the gateway answers 429) instead of waiting forever; the instance group of ``--device``; on GPU
the TensorRT execution accelerator in fp16 with explicit shape profiles over the whole length
range (one engine, not one per shape) and an engine cache; and warm-up requests, one per length
bucket the gateway pads to (and the longest row), so the first client does not pay for it. A
shared-prefix ranker's warm-up rows are a prefix and one candidate (``segment_ids`` and
``token_type_ids`` read from ``<model>/warmup/``), never a row of padding alone.

``--device cpu`` writes the same repository for CPU instances (ONNX Runtime threads instead of
TensorRT). ``--runtime openvino`` (CPU only) targets Triton's ``openvino`` backend instead: each
graph is written as OpenVINO IR (``1/model.xml`` and ``model.bin``, converted here by the
``openvino`` package from the ONNX file, int8 weights kept), which any OpenVINO backend reads
without needing ONNX Runtime's ``MatMulNBits`` in its ONNX front end; the config sets
``NUM_STREAMS`` (one per instance's thread), ``INFERENCE_NUM_THREADS`` and, with ``--precision
bf16`` for nodes with native bf16 (AVX-512 BF16, AMX), ``HINT_BF16``. OpenVINO quantizes the int8
products' activations per token, so Triton's batches do not move a pair's score.
``--ranker-onnx`` puts another graph of the same model in the repository
(e.g. the unquantised one for TensorRT fp16; the bundle's static int8 graph is the
default). PyTriton's bundled tritonserver has only the Python backend: ``dialogue_ranker.export.triton_local``
serves the same models with the same batcher settings through it.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from dialogue_ranker.export.openvino_ir import write_openvino_ir
from dialogue_ranker.serving.list_encoding import PREFIX_SEGMENT, ListEncoder
from dialogue_ranker.serving.model_bundle import ModelBundle, OnnxModelSpec, load_bundle

#: Triton's batcher settings, shared with ``dialogue_ranker.export.triton_local``. A request waits at most
#: QUEUE_DELAY_US for batch-mates; a full queue or a request queued longer than QUEUE_TIMEOUT_US is
#: rejected (the gateway's 429) rather than left to wait. The queue timeout is below the gateway's
#: Triton call timeout (``--triton.timeout-s``, 8 s), so Triton drops what the gateway would give up on.
MAX_BATCH_SIZE = 64
PREFERRED_BATCH_SIZES = (16, 32, 64)
QUEUE_DELAY_US = 2_000
QUEUE_TIMEOUT_US = 5_000_000
MAX_QUEUE_SIZE = 256
#: The gateway's default length buckets (``--triton.length-buckets``): the warm-up shapes.
DEFAULT_BUCKETS = (32, 64, 96, 128, 160, 192, 224, 256)
#: Where the container keeps TensorRT engines, so a restart does not rebuild them.
TRT_CACHE_DIR = "/models/.trt-cache"
#: Triton reads a warm-up sample's ``input_data_file`` from this folder of the model's directory.
WARMUP_DIR = "warmup"
#: Triton backends a CPU repository can target, and the model file each reads.
RUNTIMES = ("onnxruntime", "openvino")
MODEL_FILES = {"onnxruntime": "model.onnx", "openvino": "model.xml"}

logger = logging.getLogger("dialogue_ranker.export.triton_repo")


@dataclass(frozen=True)
class RepositoryOptions:
    """How the repository's models are deployed."""

    device: str = "gpu"
    instances: int = 1
    cpu_threads: int = 0
    max_batch_size: int = MAX_BATCH_SIZE
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    trt_cache_dir: str = TRT_CACHE_DIR
    #: Graphs to ship instead of the bundle's, by model name (``ranker``).
    graphs: dict[str, Path] = dataclasses.field(default_factory=dict)
    #: Triton's backend on CPU nodes: ``onnxruntime`` or ``openvino`` (IR, converted here).
    runtime: str = "onnxruntime"
    #: OpenVINO's precision on the nodes: ``bf16`` where they have native bf16, else ``f32``.
    precision: str = "f32"

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime {self.runtime!r}: one of {', '.join(RUNTIMES)}")
        if self.runtime == "openvino" and self.device != "cpu":
            raise ValueError("Triton's openvino backend runs on CPU nodes: use --device cpu")
        if self.precision not in ("bf16", "f32"):
            raise ValueError(f"precision {self.precision!r}: bf16 or f32")


@dataclass(frozen=True)
class RowLayout:
    """What one row (one batch item) of a graph holds; it decides three things in the config.

    - A **pair** row (a per-pair ranker, ``dialogue_ranker.serving.tokenization``) is one
      (context, candidate) pair, padded with ``attention_mask`` 0. The graph returns one logit per
      row, shape (batch,) or (batch, 1): the output has dims [1]. Rows are at most the spec's
      ``max_length`` long; zero warm-up inputs are a valid (fully masked) row.
    - A **shared-prefix** row (``dialogue_ranker.serving.list_encoding``) is a request's context followed by
      several candidates, told apart by ``segment_ids`` (0 the prefix, k candidate k, -1 padding).
      The graph returns a logit per token, shape (batch, length): the output has dims [-1] and the
      gateway averages each candidate's tokens (``ListBatch.readout``). The spec's ``max_length``
      bounds positions, not rows: a row holds up to the encoding's ``max_chunk_tokens``. A warm-up
      row must hold a candidate (a row of segment -1 alone is padding, not a request).
    """

    shared_prefix: bool
    #: The longest row the gateway sends: TensorRT's largest profile shape and the last warm-up.
    longest: int

    @classmethod
    def of(cls, bundle: ModelBundle, role: str) -> RowLayout:
        """The layout of the bundle's ``ranker`` graph (the one model a bundle serves).

        Raises:
            ValueError: ``role`` is not ``ranker``.
        """
        if role != "ranker":
            raise ValueError(f"bundle {bundle.model_id} has no {role!r} model, only 'ranker'")
        encoder = bundle.pair_encoder()
        if isinstance(encoder, ListEncoder):
            return cls(shared_prefix=True, longest=encoder.max_chunk_tokens)
        return cls(shared_prefix=False, longest=bundle.ranker.max_length)

    @classmethod
    def pairs(cls, spec: OnnxModelSpec) -> RowLayout:
        """A pair graph's layout."""
        return cls(shared_prefix=False, longest=spec.max_length)


def _output_shape(path: Path, output_name: str) -> list[int | str | None]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for output in session.get_outputs():
        if output.name == output_name:
            return list(output.shape)
    raise ValueError(f"{path.name} has no output {output_name!r}")


def _add_output(config: mc.ModelConfig, spec: OnnxModelSpec, rows: RowLayout) -> None:
    # Triton's dims leave out the batch dimension. The graph's own output shape must match the
    # layout: a shipped --ranker-onnx of the other kind would otherwise load and answer nonsense.
    shape = _output_shape(spec.path, spec.output_name)
    if rows.shared_prefix:
        if len(shape) != 2 or shape[1] == 1:
            raise ValueError(
                f"{spec.path.name}: a shared-prefix ranker returns (sequences, length), not {shape}"
            )
        config.output.add(name=spec.output_name, data_type=mc.TYPE_FP32, dims=[-1])
        return
    if len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] != 1):
        raise ValueError(f"{spec.path.name}: a pair graph returns (batch,) or (batch, 1), not {shape}")
    output = config.output.add(name=spec.output_name, data_type=mc.TYPE_FP32, dims=[1])
    if len(shape) == 1:
        # The graph returns shape (batch,): Triton needs one non-batch dim, reshaped away.
        output.reshape.SetInParent()


def _shapes(names: Sequence[str], batch: int, length: int) -> str:
    return ",".join(f"{name}:{batch}x{length}" for name in names)


def model_config(
    name: str, spec: OnnxModelSpec, options: RepositoryOptions, rows: RowLayout | None = None
) -> mc.ModelConfig:
    """The Triton ``ModelConfig`` of one ONNX graph of the bundle (``rows``: a pair graph by default)."""
    rows = rows or RowLayout.pairs(spec)
    config = mc.ModelConfig(name=name, backend=options.runtime, max_batch_size=options.max_batch_size)
    for input_name in spec.input_names:
        config.input.add(name=input_name, data_type=mc.TYPE_INT64, dims=[-1])
    _add_output(config, spec, rows)

    batcher = config.dynamic_batching
    batcher.preferred_batch_size.extend(b for b in PREFERRED_BATCH_SIZES if b <= options.max_batch_size)
    batcher.max_queue_delay_microseconds = QUEUE_DELAY_US
    policy = batcher.default_queue_policy
    policy.timeout_action = mc.ModelQueuePolicy.REJECT
    policy.default_timeout_microseconds = QUEUE_TIMEOUT_US
    policy.max_queue_size = MAX_QUEUE_SIZE

    gpu = options.device == "gpu"
    kind = mc.ModelInstanceGroup.KIND_GPU if gpu else mc.ModelInstanceGroup.KIND_CPU
    config.instance_group.add(kind=kind, count=options.instances)
    if gpu:
        _add_tensorrt(config, spec, options, rows)
    elif options.runtime == "openvino":
        _add_openvino(config, options)
    else:
        config.parameters["intra_op_thread_count"].string_value = str(options.cpu_threads)
        config.parameters["inter_op_thread_count"].string_value = "1"

    for length in warmup_lengths(spec, rows, options):
        warmup = config.model_warmup.add(name=f"bucket_{length}", batch_size=1, count=1)
        for input_name in spec.input_names:
            sample = warmup.inputs[input_name]
            sample.data_type = mc.TYPE_INT64
            sample.dims.append(length)
            if rows.shared_prefix and input_name in ONE_CANDIDATE_INPUTS:
                sample.input_data_file = _warmup_file(length)
            else:
                sample.zero_data = True
    return config


#: A shared-prefix warm-up row's inputs read from ``warmup/``: segment ids and token types are both
#: 0 on the prefix and 1 on the candidate. The other inputs are zeros (token id 0, position 0).
ONE_CANDIDATE_INPUTS = ("segment_ids", "token_type_ids")


def warmup_lengths(spec: OnnxModelSpec, rows: RowLayout, options: RepositoryOptions) -> list[int]:
    """The warm-up lengths: those the gateway pads to, and the longest row.

    The gateway's buckets are those below ``max_length``, then ``max_length``
    (``serving.backends.base``); a longer shared-prefix sequence (many candidates) is sent at its
    own length, up to ``rows.longest``.
    """
    return sorted({b for b in options.buckets if b < spec.max_length} | {spec.max_length, rows.longest})


def one_candidate_row(length: int) -> np.ndarray:
    """A shared-prefix warm-up row: the first half the prefix, the second half one candidate."""
    row = np.full(length, PREFIX_SEGMENT + 1, dtype="<i8")
    row[: length - length // 2] = PREFIX_SEGMENT
    return row


def _warmup_file(length: int) -> str:
    return f"one_candidate_{length}"


def warmup_files(spec: OnnxModelSpec, rows: RowLayout, options: RepositoryOptions) -> dict[str, bytes]:
    """The files the warm-up samples read, by name under ``<model>/warmup/`` (raw little-endian int64)."""
    if not rows.shared_prefix:
        return {}
    return {_warmup_file(n): one_candidate_row(n).tobytes() for n in warmup_lengths(spec, rows, options)}


def _add_tensorrt(
    config: mc.ModelConfig, spec: OnnxModelSpec, options: RepositoryOptions, rows: RowLayout
) -> None:
    # One profile over every shape the gateway can send: TensorRT builds one engine, once, and
    # the cache keeps it across restarts. Opt is a full batch at the usual 128-token bucket.
    names = spec.input_names
    opt_length = min(128, rows.longest)
    accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
    accelerator.parameters.update(
        {
            "precision_mode": "FP16",
            "max_workspace_size_bytes": str(1 << 30),
            "trt_engine_cache_enable": "1",
            "trt_engine_cache_path": f"{options.trt_cache_dir}/{config.name}",
            "trt_timing_cache_enable": "1",
            "trt_timing_cache_path": f"{options.trt_cache_dir}/{config.name}",
            "trt_profile_min_shapes": _shapes(names, 1, 1),
            "trt_profile_opt_shapes": _shapes(names, options.max_batch_size, opt_length),
            "trt_profile_max_shapes": _shapes(names, options.max_batch_size, rows.longest),
        }
    )


def _add_openvino(config: mc.ModelConfig, options: RepositoryOptions) -> None:
    # The parameters Triton's openvino backend reads (its README): a stream per thread, as the
    # service's embedded OpenVINO backend runs, so concurrent batches each get a core.
    config.default_model_filename = MODEL_FILES["openvino"]
    threads = options.cpu_threads
    parameters = {
        "NUM_STREAMS": str(threads) if threads else "AUTO",
        "PERFORMANCE_HINT": "THROUGHPUT",
        **({"INFERENCE_NUM_THREADS": str(threads)} if threads else {}),
        **({"HINT_BF16": "YES"} if options.precision == "bf16" else {}),
    }
    for key, value in parameters.items():
        config.parameters[key].string_value = value


def config_text(config: mc.ModelConfig) -> str:
    """``config.pbtxt`` text."""
    return text_format.MessageToString(config)


def parse_config(text: str) -> mc.ModelConfig:
    """Parse ``config.pbtxt`` text; raises ``text_format.ParseError`` on a field Triton lacks."""
    return text_format.Parse(text, mc.ModelConfig())


def write_repository(
    bundle_dir: str | Path, out: str | Path, options: RepositoryOptions | None = None
) -> list[Path]:
    """Write the repository; returns each model's directory.

    Raises:
        BundleError: the bundle is missing a file or its metadata is malformed.
    """
    options = options or RepositoryOptions()
    bundle = load_bundle(bundle_dir)
    models = [("ranker", bundle.ranker)]
    written = []
    for name, bundle_spec in models:
        if name not in options.graphs and bundle.serving_sub_batch_pairs and options.runtime != "openvino":
            # Triton's onnxruntime backend runs whole batches; a dynamically quantised graph then
            # scores a pair differently with different batch-mates.
            logger.warning(
                "%s: the bundle's graph must run %d pair(s) per call; Triton will batch it. Ship the "
                "fp32 (CPU) or fp16 (GPU) graph of the export build with --%s-onnx for batch-invariant "
                "scores",
                name,
                bundle.serving_sub_batch_pairs,
                name,
            )
        spec = dataclasses.replace(bundle_spec, path=Path(options.graphs.get(name, bundle_spec.path)))
        rows = RowLayout.of(bundle, name)
        model_dir = Path(out) / name
        (model_dir / "1").mkdir(parents=True, exist_ok=True)
        if options.runtime == "openvino":
            write_openvino_ir(spec.path, model_dir / "1" / MODEL_FILES["openvino"])
        else:
            shutil.copyfile(spec.path, model_dir / "1" / "model.onnx")
        (model_dir / "config.pbtxt").write_text(config_text(model_config(name, spec, options, rows)))
        files = warmup_files(spec, rows, options)
        if files:
            (model_dir / WARMUP_DIR).mkdir(exist_ok=True)
        for file_name, data in files.items():
            (model_dir / WARMUP_DIR / file_name).write_bytes(data)
        written.append(model_dir)
    return written


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="models/dialogue-minilm-l6", help="exported bundle directory")
    p.add_argument("--out", default="build/triton-repo", help="model repository to write")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--instances", type=int, default=1, help="model instances per device")
    p.add_argument("--cpu-threads", type=int, default=0, help="ONNX Runtime threads per CPU instance")
    p.add_argument("--max-batch-size", type=int, default=MAX_BATCH_SIZE)
    p.add_argument("--buckets", default=",".join(map(str, DEFAULT_BUCKETS)), help="warm-up lengths")
    p.add_argument("--trt-cache-dir", default=TRT_CACHE_DIR, help="TensorRT engine cache, in the container")
    p.add_argument("--ranker-onnx", type=Path, help="ship this ranker graph instead of the bundle's")
    p.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default="onnxruntime",
        help="Triton backend of the CPU nodes: openvino writes OpenVINO IR (needs --device cpu)",
    )
    p.add_argument(
        "--precision",
        choices=("bf16", "f32"),
        default="f32",
        help="with --runtime openvino: bf16 for nodes with native bf16 (AVX-512 BF16 or AMX)",
    )
    args = p.parse_args(argv)
    if args.runtime == "openvino" and args.device != "cpu":
        p.error("--runtime openvino runs on CPU nodes: add --device cpu")
    options = RepositoryOptions(
        device=args.device,
        instances=args.instances,
        cpu_threads=args.cpu_threads,
        max_batch_size=args.max_batch_size,
        buckets=tuple(int(b) for b in args.buckets.split(",") if b),
        trt_cache_dir=args.trt_cache_dir,
        runtime=args.runtime,
        precision=args.precision,
        graphs={"ranker": args.ranker_onnx} if args.ranker_onnx else {},
    )
    for model_dir in write_repository(args.model, args.out, options):
        print(f"wrote {model_dir}/config.pbtxt and {model_dir}/1/{MODEL_FILES[options.runtime]}")


if __name__ == "__main__":
    main()
