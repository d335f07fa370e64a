"""A real Triton Inference Server on this machine's CPU, through PyTriton, serving a model bundle.

    .venv/bin/ranker triton-local --http-port 8010 --grpc-port 8011 [--metrics-port 8012]
        [--model models/dialogue-minilm-l6]

PyTriton bundles ``tritonserver`` with only the Python backend, so the bundle's ONNX graph
(model ``ranker``) is bound to a function that runs ONNX Runtime on the batch Triton's dynamic
batcher has formed. The batcher
settings are those of the ``onnxruntime`` repository that ``export.triton_repo`` writes for real
deployments: a queue delay of a few milliseconds, preferred batch sizes, and a bounded queue that
rejects. The bound outputs follow the graph's rows (``export.triton_repo.RowLayout``): one logit per
row for a pair graph, a logit per token for a shared-prefix ranker (the gateway averages each
candidate's). Stops cleanly on SIGTERM or SIGINT.

PyTriton's Python-backend stub links ``libpython3.11.so``; the interpreter's own library directory
goes first on ``LD_LIBRARY_PATH`` of the Triton process, or the stub picks up the system's (another
3.11 patch release) and model loading fails.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import onnxruntime as ort

from dialogue_ranker.export.triton_repo import (
    MAX_BATCH_SIZE,
    MAX_QUEUE_SIZE,
    PREFERRED_BATCH_SIZES,
    QUEUE_TIMEOUT_US,
    RowLayout,
)
from dialogue_ranker.serving.list_encoding import PAD_SEGMENT, SIMILARITY_INPUT_NAMES
from dialogue_ranker.serving.model_bundle import OnnxModelSpec, load_bundle

logger = logging.getLogger("dialogue_ranker.export.triton_local")


def unpadded(segment_ids: np.ndarray) -> np.ndarray:
    """Each shared-prefix row's length without its padding (segment id -1)."""
    return np.asarray((segment_ids != PAD_SEGMENT).sum(axis=1))


def real_lengths(feeds: dict[str, np.ndarray]) -> np.ndarray:
    """Each row's length without its padding (padding ends a row in both layouts)."""
    if "segment_ids" in feeds:
        return unpadded(feeds["segment_ids"])
    return np.asarray(feeds["attention_mask"].sum(axis=1))


def calls_of(feeds: dict[str, np.ndarray], rows_per_call: int) -> Iterator[dict[str, np.ndarray]]:
    """The batch as calls of ``rows_per_call`` rows, each input cut to the call's longest real row.

    A similarity bundle's ``similarity_*`` inputs are a second sequence with a length of its own
    (``similarity_segment_ids``); cutting them to the ranker sequence's length would drop candidate
    tokens from the similarity term. With one row per call, a call's feeds are exactly the embedded
    backend's for that row.
    """
    ranker = real_lengths(feeds)
    similarity = unpadded(feeds["similarity_segment_ids"]) if "similarity_segment_ids" in feeds else ranker
    for start in range(0, len(ranker), rows_per_call):
        part = slice(start, start + rows_per_call)
        ends = {"ranker": int(ranker[part].max()), "similarity": int(similarity[part].max())}
        yield {
            name: array[part, : ends["similarity" if name in SIMILARITY_INPUT_NAMES else "ranker"]]
            for name, array in feeds.items()
        }


def onnx_infer_fn(
    spec: OnnxModelSpec, *, threads: int, rows_per_call: int | None = None, rows: RowLayout | None = None
) -> Callable[..., dict[str, np.ndarray]]:
    """A PyTriton inference function running ``spec``'s graph on Triton's batched int64 inputs.

    With ``rows_per_call`` (the bundle's ``serving.sub_batch_pairs``, 1 for dynamic int8) the
    batch Triton formed is run that many rows at a time, each cut to its real length, so a
    row's scores match the embedded backend's whatever Triton merged it with or padded it to.
    ``rows`` (a pair graph by default) gives the output's shape: (rows, 1) for a pair graph,
    (rows, length) for a shared-prefix ranker, whose cut rows are padded back to the batch's length.
    """
    from pytriton.decorators import batch

    per_token = (rows or RowLayout.pairs(spec)).shared_prefix
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(spec.path), sess_options=options, providers=["CPUExecutionProvider"])

    def run(feeds: dict[str, np.ndarray], length: int) -> np.ndarray:
        """The graph's output as (rows, 1), or (rows, ``length``) logits per token."""
        (logits,) = session.run([spec.output_name], feeds)
        out = np.asarray(logits, dtype=np.float32)
        if not per_token:
            return out.reshape(-1, 1)
        return np.pad(out, ((0, 0), (0, length - out.shape[1])))  # padding tokens are never read

    @batch
    def infer(**inputs: np.ndarray) -> dict[str, np.ndarray]:
        feeds = {name: inputs[name].astype(np.int64, copy=False) for name in spec.input_names}
        length = feeds[spec.input_names[0]].shape[1]
        if rows_per_call is None:
            logits = run(feeds, length)
        else:
            logits = np.concatenate([run(part, length) for part in calls_of(feeds, rows_per_call)])
        return {spec.output_name: logits}

    return infer


def bind_model(
    triton: Any,
    name: str,
    spec: OnnxModelSpec,
    *,
    threads: int,
    queue_delay_us: int,
    queue_timeout_us: int,
    rows_per_call: int | None = None,
    rows: RowLayout | None = None,
) -> None:
    """Bind one graph of the bundle as Triton model ``name`` with the repository's batcher settings.

    The output's shape is the repository's (``dialogue_ranker.export.triton_repo``): (1,) per row for a pair
    graph, (-1,) per row, a logit per token, for a shared-prefix ranker.
    """
    from pytriton.model_config import DynamicBatcher, ModelConfig, QueuePolicy, Tensor, TimeoutAction

    rows = rows or RowLayout.pairs(spec)
    output_shape = (-1,) if rows.shared_prefix else (1,)  # a logit per token, or one per row

    batcher = DynamicBatcher(
        max_queue_delay_microseconds=queue_delay_us,
        preferred_batch_size=list(PREFERRED_BATCH_SIZES),
        default_queue_policy=QueuePolicy(
            timeout_action=TimeoutAction.REJECT,
            default_timeout_microseconds=queue_timeout_us,
            max_queue_size=MAX_QUEUE_SIZE,
        ),
    )
    triton.bind(
        model_name=name,
        infer_func=onnx_infer_fn(spec, threads=threads, rows_per_call=rows_per_call, rows=rows),
        inputs=[Tensor(name=input_name, dtype=np.int64, shape=(-1,)) for input_name in spec.input_names],
        outputs=[Tensor(name=spec.output_name, dtype=np.float32, shape=output_shape)],
        config=ModelConfig(max_batch_size=MAX_BATCH_SIZE, batcher=batcher),
        strict=True,
    )


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # PyTriton's serve() stops the server on KeyboardInterrupt (SIGINT); SIGTERM does the same.
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``ranker triton-local``'s arguments: the bundle, the ports and Triton's batcher settings."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--http-port", type=int, default=8010)
    p.add_argument("--grpc-port", type=int, default=8011)
    p.add_argument("--metrics-port", type=int, default=None, help="Prometheus metrics port (default: off)")
    p.add_argument("--address", default="127.0.0.1", help="address to listen on")
    p.add_argument(
        "--model", type=Path, default=Path("models/dialogue-minilm-l6"), help="model bundle directory"
    )
    p.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: all cores)")
    p.add_argument(
        "--queue-delay-us", type=int, default=2000, help="Triton's max queue delay for batch-mates"
    )
    p.add_argument(
        "--queue-timeout-us",
        type=int,
        default=QUEUE_TIMEOUT_US,
        help="a request queued longer is rejected (the gateway answers 429)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    libdir = str(sysconfig.get_config_var("LIBDIR") or "")
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(
        part for part in (libdir, os.environ.get("LD_LIBRARY_PATH")) if part
    )

    from pytriton.triton import Triton, TritonConfig

    bundle = load_bundle(args.model)
    config = TritonConfig(
        http_address=args.address,
        http_port=args.http_port,
        grpc_address=args.address,
        grpc_port=args.grpc_port,
        allow_metrics=args.metrics_port is not None,
        metrics_port=args.metrics_port,
        metrics_address=args.address if args.metrics_port is not None else None,
        exit_timeout_secs=5,
    )
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    models = [("ranker", bundle.ranker)]
    with Triton(config=config) as triton:
        for name, spec in models:
            bind_model(
                triton,
                name,
                spec,
                threads=args.threads,
                queue_delay_us=args.queue_delay_us,
                queue_timeout_us=args.queue_timeout_us,
                rows_per_call=bundle.serving_sub_batch_pairs,
                rows=RowLayout.of(bundle, name),
            )
        logger.info(
            "serving %s http=%d grpc=%d metrics=%s",
            bundle.model_id,
            args.http_port,
            args.grpc_port,
            args.metrics_port,
        )
        triton.serve()
    logger.info("stopped")


if __name__ == "__main__":
    main()
