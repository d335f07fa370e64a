"""Which graph, precision and threads the OpenVINO backend should use, side by side with ONNX Runtime.

    .venv/bin/python benchmarks/openvino_graphs.py [--model DIR] [--requests N]

Each row is a backend built as the service builds it (``serving.backends``), run on the same
requests (the SUGAR test groups with all 12 statements, one sequence a call, as served): the
candidates scored per second with 4 calls at once (the batcher's default on 2 CPUs) and a lone
call's median latency, after a warm-up pass. The graphs: the shipped ``MatMulNBits`` graph read
directly (int8 products); the same weights dequantized to fp32 at load (``--openvino.weights
fp32``: OpenVINO folds weight x scale into fp32 constants, as numpy would; "load s" includes it);
and OpenVINO IR written from the shipped graph (what an export could ship). Needs the
``openvino`` extra. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import REPO_ROOT, SUGAR  # noqa: E402

from dialogue_ranker.data.sugar import load_sugar  # noqa: E402
from dialogue_ranker.evaluation.domains import group_split  # noqa: E402
from dialogue_ranker.serving.backends.base import Backend  # noqa: E402
from dialogue_ranker.serving.backends.onnx import OnnxBackend  # noqa: E402
from dialogue_ranker.serving.backends.openvino import OpenVinoBackend  # noqa: E402
from dialogue_ranker.serving.model_bundle import OnnxModelSpec, load_bundle  # noqa: E402
from dialogue_ranker.serving.tokenization import Turn  # noqa: E402

CALLS = 4
LONE = 60


def requests(model: Path, limit: int) -> tuple[list, int]:
    """Padded one-sequence calls of the SUGAR test groups, and their candidates."""
    bundle = load_bundle(model)
    encoder = bundle.pair_encoder()
    examples = [e for e in load_sugar(SUGAR) if group_split(f"sugar-{e.index}") == "test"][:limit]
    sequences = [
        s
        for e in examples
        for s in encoder.encode_request([Turn("user", e.request)], list(e.statements), list(e.candidates))
    ]
    return [encoder.pad([s]) for s in sequences], sum(s.candidates for s in sequences)


def rate(backend: Backend, batches: list, candidates: int) -> float:
    """Candidates per second over every batch, ``CALLS`` calls at once."""
    taken = [0]
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                index = taken[0]
                taken[0] += 1
            if index >= len(batches):
                return
            backend.infer(batches[index])

    threads = [threading.Thread(target=work) for _ in range(CALLS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return candidates / (time.perf_counter() - started)


def lone_ms(backend: Backend, batches: list) -> float:
    """Median ms of a call that runs alone (a pause after each lets spinning threads stop)."""
    times = []
    for batch in batches[:LONE]:
        started = time.perf_counter()
        backend.infer(batch)
        times.append(time.perf_counter() - started)
        time.sleep(0.01)
    return statistics.median(times) * 1000


def row(name: str, build: Callable[[], Backend], batches: list, candidates: int) -> None:
    started = time.perf_counter()
    backend = build()
    backend.start()
    load_s = time.perf_counter() - started
    rate(backend, batches, candidates)  # warm-up: every shape once
    rates = [rate(backend, batches, candidates) for _ in range(3)]
    print(
        f"| {name} | {load_s:.2f} | {statistics.median(rates):.1f} | {lone_ms(backend, batches):.1f} |",
        flush=True,
    )
    backend.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    parser.add_argument("--requests", type=int, default=218)
    args = parser.parse_args(argv)
    import openvino as ov

    spec = load_bundle(args.model).ranker
    batches, candidates = requests(args.model, args.requests)
    print(f"{len(batches)} calls, {candidates} candidates\n")
    print(
        "| runtime, graph, precision, threads | load s | candidates/s, 4 calls at once | lone call p50 ms |"
    )
    print("| --- | ---: | ---: | ---: |")
    work = Path(tempfile.mkdtemp(prefix="openvino-graphs-"))
    ir = work / "model.xml"
    ov.save_model(ov.Core().read_model(str(spec.path)), str(ir), compress_to_fp16=False)

    def onnx_backend(graph: OnnxModelSpec) -> Backend:
        return OnnxBackend(graph, intra_op_threads=1, solo_threads=2)

    def ov_backend(graph: OnnxModelSpec, precision: str, **options: int | str | None) -> Backend:
        kwargs = {"streams": 2, "requests": CALLS, "solo_threads": 2, **options}
        return OpenVinoBackend(graph, precision=precision, **kwargs)  # type: ignore[arg-type]

    rows: list[tuple[str, Callable[[], Backend]]] = [
        ("ONNX Runtime, shipped graph, 4 calls x 1 thread (+solo 2)", partial(onnx_backend, spec))
    ]
    for p in ("bf16", "f32"):
        rows += [
            (f"OpenVINO {p}, shipped graph read directly", partial(ov_backend, spec, p)),
            (
                f"OpenVINO {p}, shipped graph, activations not quantized",
                partial(ov_backend, spec, p, dynamic_quantization_group_size=0),
            ),
            (f"OpenVINO {p}, fp32 weights dequantized at load", partial(ov_backend, spec, p, weights="fp32")),
            (
                f"OpenVINO {p}, IR written from the shipped graph",
                partial(ov_backend, dataclasses.replace(spec, path=ir), p),
            ),
        ]
    rows += [
        (
            "OpenVINO bf16, shipped graph, 1 stream x 2 threads",
            partial(ov_backend, spec, "bf16", streams=1, threads_per_stream=2, solo_threads=None),
        ),
        (
            "OpenVINO bf16, shipped graph, 2 streams x 1, no solo",
            partial(ov_backend, spec, "bf16", solo_threads=None),
        ),
        (
            "OpenVINO bf16, shipped graph, 4 streams x 1 (+solo 2)",
            partial(ov_backend, spec, "bf16", streams=4),
        ),
        (
            "OpenVINO bf16, shipped graph, activations in groups of 128",
            partial(ov_backend, spec, "bf16", dynamic_quantization_group_size=128),
        ),
    ]
    for name, build in rows:
        row(name, build, batches, candidates)
    print(f"\nIR: {(work / 'model.bin').stat().st_size / 2**20:.1f} MB of weights beside model.xml")


if __name__ == "__main__":
    main()
