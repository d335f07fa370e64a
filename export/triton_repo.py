"""Write an NVIDIA Triton model repository from an exported model bundle.

    python -m export.triton_repo --model models/sugar-minilm-l6 --out build/triton-repo [--device gpu]
        [--ranker-onnx build/<run>/ranker.fp32.onnx --selector-onnx ...]

For Triton's ``onnxruntime`` backend (the official container), one model per ONNX graph:

    <out>/ranker/config.pbtxt      <out>/ranker/1/model.onnx
    <out>/selector/config.pbtxt    <out>/selector/1/model.onnx     (when the bundle has a selector)

Each ``config.pbtxt`` is built as Triton's own ``ModelConfig`` protobuf (from tritonclient), so
a field Triton does not know cannot be written. It declares int64 ``input_ids`` /
``attention_mask`` (/ ``token_type_ids`` when the graph takes it) of dims [-1] and the logit
output; ``max_batch_size``; a dynamic batcher with a short queue delay and a bounded queue that
rejects (the gateway answers 429) instead of waiting forever; the instance group of ``--device``;
on GPU the TensorRT execution accelerator in fp16 with explicit shape profiles over the whole
length range (one engine, not one per shape) and an engine cache; and warm-up requests, one per
length bucket the gateway pads to, so the first client does not pay for it.

``--device cpu`` writes the same repository for CPU instances (ONNX Runtime threads instead of
TensorRT). ``--ranker-onnx`` / ``--selector-onnx`` put another graph of the same model in the
repository (e.g. the unquantised one for TensorRT fp16; the bundle's static int8 graph is the
default). PyTriton's bundled tritonserver has only the Python backend: ``export.triton_local``
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

import onnxruntime as ort
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from service.model_bundle import OnnxModelSpec, load_bundle

#: Triton's batcher settings, shared with ``export.triton_local``. A request waits at most
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

logger = logging.getLogger("export.triton_repo")


@dataclass(frozen=True)
class RepositoryOptions:
    """How the repository's models are deployed."""

    device: str = "gpu"
    instances: int = 1
    cpu_threads: int = 0
    max_batch_size: int = MAX_BATCH_SIZE
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    trt_cache_dir: str = TRT_CACHE_DIR
    #: Graphs to ship instead of the bundle's, by model name (``ranker``, ``selector``).
    graphs: dict[str, Path] = dataclasses.field(default_factory=dict)


def _output_rank(path: Path, output_name: str) -> int:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for output in session.get_outputs():
        if output.name == output_name:
            return len(output.shape)
    raise ValueError(f"{path.name} has no output {output_name!r}")


def _shapes(names: Sequence[str], batch: int, length: int) -> str:
    return ",".join(f"{name}:{batch}x{length}" for name in names)


def model_config(name: str, spec: OnnxModelSpec, options: RepositoryOptions) -> mc.ModelConfig:
    """The Triton ``ModelConfig`` of one ONNX graph of the bundle."""
    config = mc.ModelConfig(name=name, backend="onnxruntime", max_batch_size=options.max_batch_size)
    for input_name in spec.input_names:
        config.input.add(name=input_name, data_type=mc.TYPE_INT64, dims=[-1])
    output = config.output.add(name=spec.output_name, data_type=mc.TYPE_FP32, dims=[1])
    if _output_rank(spec.path, spec.output_name) == 1:
        # The graph returns shape (batch,): Triton needs one non-batch dim, reshaped away.
        output.reshape.SetInParent()

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
        _add_tensorrt(config, spec, options)
    else:
        config.parameters["intra_op_thread_count"].string_value = str(options.cpu_threads)
        config.parameters["inter_op_thread_count"].string_value = "1"

    lengths = sorted({b for b in options.buckets if b < spec.max_length} | {spec.max_length})
    for length in lengths:
        warmup = config.model_warmup.add(name=f"bucket_{length}", batch_size=1, count=1)
        for input_name in spec.input_names:
            warmup.inputs[input_name].data_type = mc.TYPE_INT64
            warmup.inputs[input_name].dims.append(length)
            warmup.inputs[input_name].zero_data = True
    return config


def _add_tensorrt(config: mc.ModelConfig, spec: OnnxModelSpec, options: RepositoryOptions) -> None:
    # One profile over every shape the gateway can send: TensorRT builds one engine, once, and
    # the cache keeps it across restarts. Opt is a full batch at the usual 128-token bucket.
    names = spec.input_names
    opt_length = min(128, spec.max_length)
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
            "trt_profile_max_shapes": _shapes(names, options.max_batch_size, spec.max_length),
        }
    )


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
    if bundle.selector is not None:
        models.append(("selector", bundle.selector.model))
    written = []
    for name, bundle_spec in models:
        if name not in options.graphs and bundle.serving_sub_batch_pairs:
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
        model_dir = Path(out) / name
        (model_dir / "1").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(spec.path, model_dir / "1" / "model.onnx")
        (model_dir / "config.pbtxt").write_text(config_text(model_config(name, spec, options)))
        written.append(model_dir)
    return written


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="models/sugar-minilm-l6", help="exported bundle directory")
    p.add_argument("--out", default="build/triton-repo", help="model repository to write")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--instances", type=int, default=1, help="model instances per device")
    p.add_argument("--cpu-threads", type=int, default=0, help="ONNX Runtime threads per CPU instance")
    p.add_argument("--max-batch-size", type=int, default=MAX_BATCH_SIZE)
    p.add_argument("--buckets", default=",".join(map(str, DEFAULT_BUCKETS)), help="warm-up lengths")
    p.add_argument("--trt-cache-dir", default=TRT_CACHE_DIR, help="TensorRT engine cache, in the container")
    p.add_argument("--ranker-onnx", type=Path, help="ship this ranker graph instead of the bundle's")
    p.add_argument("--selector-onnx", type=Path, help="ship this selector graph instead of the bundle's")
    args = p.parse_args(argv)
    options = RepositoryOptions(
        device=args.device,
        instances=args.instances,
        cpu_threads=args.cpu_threads,
        max_batch_size=args.max_batch_size,
        buckets=tuple(int(b) for b in args.buckets.split(",") if b),
        trt_cache_dir=args.trt_cache_dir,
        graphs={
            name: path
            for name, path in (("ranker", args.ranker_onnx), ("selector", args.selector_onnx))
            if path
        },
    )
    for model_dir in write_repository(args.model, args.out, options):
        print(f"wrote {model_dir}/config.pbtxt and {model_dir}/1/model.onnx")


if __name__ == "__main__":
    main()
