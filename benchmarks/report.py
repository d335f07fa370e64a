"""One report, same inputs: a typical user's CrossEncoder, the raw session, the service, the limit.

Runs one after another, on the same pairs, with the same thread count, and writes a markdown
table (pairs/s, request p50/p95/p99, share of the theoretical FP32 limit), a PNG plot and the
machine's description:

1. sentence-transformers ``CrossEncoder(<fp32 checkpoint>).predict(pairs, batch_size=...)`` in
   PyTorch, fed the segment-A / segment-B texts the service's PairEncoder builds (its token ids
   are checked against the service's, its logits against the fp32 ONNX graph when one exists);
2. raw ONNX Runtime sessions: the fp32 graph of the same weights (when built) and the shipped
   int8 model; raw OpenVINO on the shipped graph in bf16 (where the CPU has native bf16) and f32;
3. the service as a real ``ranker serve`` process on loopback at its defaults (``--backend
   auto``), with ``--backend onnx`` and with ``--backend openvino``, and with ``--triton`` the
   gateway in front of a local Triton (the load and server code of ``bench_gateway.py``);
4. the FP32 limit: matrix-product FLOPs per pair at the measured mean length against the peak
   FP32 FLOP/s of the cores used (see ``compute_limit.py``).

Inputs: the SUGAR test split (all 12 statements, 3 candidates per request) when
``../shared/data/sugar/sugar.jsonl`` exists, else the built-in sample set of ``bench_gateway.py``.
For a shared-prefix model (one sequence per request) the CrossEncoder reads the same requests as
pairs, laid out by the pair encoder; without an fp32 pair checkpoint it is the packaged
MiniLM-L6 with a fresh one-logit head (same shape and speed; its logits are not compared). The
report ends with the default service's ratios to the service with ``--backend onnx``, to the raw
session and to the CrossEncoder, what ``auto`` chose and why, and a lone request's p50 through
the default and the ONNX Runtime services and on the raw shipped session, measured in turns
(request by request, so all see the same machine; the table's rows are phases minutes apart).
The pieces: ``report_workload.py`` (inputs), ``report_systems.py`` (CrossEncoder, raw sessions),
``report_service.py`` (services), ``report_output.py`` (table, plot, file).

    .venv/bin/python benchmarks/report.py                 # a few minutes on 2 cores
    .venv/bin/python benchmarks/report.py --quick         # about a minute, smoke only
    .venv/bin/python benchmarks/report.py --triton --out benchmarks/results/report.md
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import REPO_ROOT, make_session  # noqa: E402  (also puts the repository root on sys.path)
from compute_limit import (  # noqa: E402
    ModelDims,
    describe_limit,
    describe_machine,
    flops_per_pair,
    peak_fp32,
)
from report_output import Point, Section, markdown_table, write_report  # noqa: E402
from report_service import (  # noqa: E402
    SERVICE,
    SERVICE_ONNX,
    SERVICE_OPENVINO,
    LoneTurns,
    bench_lone_in_turns,
    bench_services,
)
from report_systems import (  # noqa: E402
    CROSS_ENCODER,
    DEFAULT_CHECKPOINT,
    DEFAULT_FP32_ONNX,
    ORT_INT8,
    SHARED_PREFIX_FP32_ONNX,
    bench_cross_encoder,
    bench_fp32,
    bench_onnx,
    bench_openvino,
)
from report_workload import Unavailable, Workload, load_workload, pair_encoder, pair_texts  # noqa: E402

from dialogue_ranker.data.machine import read_cpu  # noqa: E402
from dialogue_ranker.serving.model_bundle import ModelBundle, load_bundle  # noqa: E402

DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "report.md"
QUICK_REQUESTS = 24
VERSIONED = ("onnxruntime", "openvino", "torch", "sentence-transformers", "transformers", "numpy")
#: What the tests and other scripts import from here (the pieces live in the report_* modules).
__all__ = [
    "DEFAULT_CHECKPOINT",
    "DEFAULT_FP32_ONNX",
    "Unavailable",
    "bench_cross_encoder",
    "bench_onnx",
    "load_workload",
    "make_session",
    "pair_encoder",
    "pair_texts",
]


def ratio_lines(
    points: Sequence[Point], work: Workload, lone_turns: LoneTurns | None = None, clients: int = 16
) -> list[str]:
    """The default service against the ONNX Runtime service, the raw session and the CrossEncoder."""
    by = {(p.system, p.concurrency): p for p in points}
    lines = [
        f"- Tokens computed per candidate: {work.shipped_tokens_per_candidate:.1f} by the shipped model, "
        f"{work.mean_tokens:.1f} by a per-pair cross-encoder."
    ]
    service = by.get((SERVICE, clients))
    if service is not None:
        lines += throughput_ratios(points, service, clients)
    if lone_turns is not None:
        a, b, c = (lone_turns.p50_ms(s) for s in (SERVICE, SERVICE_ONNX, "raw"))
        lines.append(
            f"- **A lone request's p50, measured in turns** ({lone_turns.requests} requests, each through "
            f"the default service, the {SERVICE_ONNX} and the raw ORT session): **{a:.1f} ms** against "
            f"{b:.1f} ms ({a - b:+.1f} ms) and {c:.1f} ms."
        )
    return lines


def throughput_ratios(points: Sequence[Point], service: Point, clients: int) -> list[str]:
    """The default service at ``clients`` against the forced runtimes, the raw session, the CrossEncoder."""
    by = {(p.system, p.concurrency): p for p in points}
    lines = []
    for other in (SERVICE_ONNX, SERVICE_OPENVINO):
        forced = by.get((other, clients))
        if forced is not None:
            lines.append(
                f"- Default service at {clients} clients: {service.pairs_per_s:.1f} pairs/s = "
                f"**{service.pairs_per_s / forced.pairs_per_s:.2f}x** the {other} ({forced.pairs_per_s:.1f})."
            )
    raw = [p for p in points if p.system == ORT_INT8]
    if raw:
        best = max(raw, key=lambda p: p.pairs_per_s)
        lines.append(
            f"- Default service at {clients} clients = **{service.pairs_per_s / best.pairs_per_s:.2f}x** "
            f"the raw shipped ORT session at its best ({best.pairs_per_s:.1f} pairs/s at concurrency "
            f"{best.concurrency})."
        )
    ce = by.get((CROSS_ENCODER, clients))
    if ce is not None:
        lines.append(
            f"- Default service at {clients} clients = **{service.pairs_per_s / ce.pairs_per_s:.2f}x** the "
            f"CrossEncoder at {clients} requests a call ({ce.pairs_per_s:.1f} pairs/s)."
        )
    return lines


def model_dims(args: argparse.Namespace, bundle: ModelBundle) -> ModelDims:
    """Shapes from the checkpoint's config.json, else from the fp32 graph, else the shipped graph."""
    if (args.checkpoint / "config.json").is_file():
        return ModelDims.from_config(args.checkpoint)
    return ModelDims.from_onnx(args.fp32_onnx if args.fp32_onnx.is_file() else bundle.ranker.path)


def method_section(work: Workload, bundle: ModelBundle) -> Section:
    return Section(
        "What each row measures",
        [
            f"- Inputs: {work.source}; {len(work.requests)} requests, {work.pairs} pairs, mean "
            f"{work.mean_tokens:.1f} tokens per pair; every concurrency level runs all of them (the "
            "service keeps no logits, `--ranking.logit-cache-entries 0`: each level computes them all).",
            "- **Concurrency c** for the CrossEncoder and the raw sessions: the pairs of c requests in "
            "one call (`predict(pairs, batch_size=len(pairs))`, `session.run`), calls one after "
            "another; each request's latency is its call's duration. This is what an ideal batcher "
            "with no overhead would run for c clients waiting at once.",
            "- **Concurrency c** for the service rows: c HTTP clients on loopback, each with one "
            "request (one example's candidates) in flight; latency is measured by the client.",
            "- Raw sessions time `session.run` only (padding done beforehand); the CrossEncoder's "
            "`predict` includes its tokenization; the service includes everything.",
            f"- The shipped graph is {bundle.metadata.get('ranker', {}).get('precision', 'unstated')}"
            f"; the service runs it {bundle.serving_sub_batch_pairs or 'any number of'} pair(s) per call "
            "for batch-invariant scores; the raw session batches as above, so it shows what batching "
            "would give.",
            "- Bold: each system's best pairs/s.",
        ],
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, help="fp32 HF checkpoint dir")
    parser.add_argument("--fp32-onnx", type=Path, default=DEFAULT_FP32_ONNX, help="fp32 graph, same weights")
    parser.add_argument("--requests", type=int, default=None, help="at most this many (default: all)")
    parser.add_argument("--concurrency", default=None, help="levels, comma-separated (default 1,4,16,64)")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    parser.add_argument("--threads", type=int, default=usable, help="compute threads for every system")
    parser.add_argument("--fma-units", type=int, default=2, help="FMA units per core, for the FP32 peak")
    parser.add_argument("--triton", action="store_true", help="add the gateway -> local Triton rows")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REQUESTS} requests, levels 1,4,16")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown report (plot beside it)")
    args = parser.parse_args(argv)
    args.requests = args.requests or (QUICK_REQUESTS if args.quick else None)
    levels = args.concurrency or ("1,4,16" if args.quick else "1,4,16,64")
    args.concurrency = sorted({int(c) for c in levels.split(",")})
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    bundle = load_bundle(args.model)
    if bundle.shared_prefix and args.fp32_onnx == DEFAULT_FP32_ONNX:
        args.fp32_onnx = SHARED_PREFIX_FP32_ONNX
    work = load_workload(bundle, args.requests)
    print(f"{work.source}: {len(work.requests)} requests, {work.pairs} pairs, {args.threads} threads")
    points, notes = bench_fp32(args, bundle, work)
    int8_session = make_session(bundle.ranker.path, args.threads)
    points += bench_onnx(int8_session, bundle, work, args.concurrency, ORT_INT8)[0]
    del int8_session  # its threads must not compete with the server's
    openvino, openvino_notes = bench_openvino(args, bundle, work)
    points += openvino
    notes += openvino_notes
    service, service_notes = bench_services(args, work)
    points += service
    notes += service_notes
    lone_turns = bench_lone_in_turns(args, bundle, work)

    ratios = ratio_lines(points, work, lone_turns)
    print("\n".join(ratios))
    cpu, dims = read_cpu(), model_dims(args, bundle)
    peak = peak_fp32(cpu, threads=args.threads, fma_units=args.fma_units)
    limit = peak.flops_per_s / flops_per_pair(dims, work.mean_tokens) if peak.flops_per_s else None
    sections = [
        Section("Ratios", ratios),
        method_section(work, bundle),
        Section("Checks and gaps", [f"- {n}" for n in notes]),
    ]
    if limit:
        sections.append(Section("Theoretical FP32 limit", describe_limit(dims, work.mean_tokens, peak, cpu)))
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    machine = describe_machine(cpu, threads=args.threads, packages=VERSIONED, command=command)
    sections.append(Section("Machine", machine))
    plot = args.out.with_suffix(".png")
    title = f"{bundle.model_id}: a typical CrossEncoder, raw runtimes and the service, side by side"
    write_report(args.out, plot, title=title, points=points, limit_pairs_per_s=limit, sections=sections)
    print("\n" + markdown_table(points, limit_pairs_per_s=limit) + "\n")
    print("\n".join(notes))
    print(f"\nwrote {args.out} and {plot}")


if __name__ == "__main__":
    main()
