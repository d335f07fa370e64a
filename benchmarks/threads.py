"""Which split of the CPUs serves best: concurrent backend calls x ONNX Runtime threads per call.

Runs the service (a real ``ranker serve`` on loopback) once per setting on the same
requests as ``report.py`` (the SUGAR test requests, all 12 statements, 3 candidates) and prints
pairs/s and request latency at 1 and 16 clients:

    .venv/bin/python benchmarks/threads.py          # 1x2, 2x1, 4x1 with and without a solo session
    .venv/bin/python benchmarks/threads.py --settings 1x4,2x2,8x1 --requests 200

``WxT`` is ``--batching.workers W --onnx.intra-op-threads T``, with the solo session at its default
(a call that starts alone gets every CPU); ``WxT/S`` sets ``--onnx.solo-threads S`` too (``/1``:
no solo session). The defaults (``workers`` 0, ``intra-op-threads`` 0, ``solo-threads`` 0) mean
two calls per CPU of the container's quota, one thread each, and the quota for a lone call
(``service/cpu.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import REPO_ROOT, bench_service, pct  # noqa: E402
from report import load_workload  # noqa: E402

from dialogue_ranker.serving.cpu import available_cpus  # noqa: E402
from dialogue_ranker.serving.model_bundle import load_bundle  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    parser.add_argument(
        "--settings", default="1x2/2,2x1/1,2x1,4x1/1,4x1", help="WORKERSxTHREADS[/SOLO], comma-separated"
    )
    parser.add_argument("--requests", type=int, default=None, help="at most this many (default: all)")
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args(argv)
    work = load_workload(load_bundle(args.model), args.requests)
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"{work.source}: {len(work.requests)} requests; {available_cpus()} CPUs available")
    print("| workers x threads / solo | clients | pairs/s | p50 ms | p95 ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for setting in args.settings.split(","):
        split, _, solo = setting.partition("/")
        workers, threads = (int(x) for x in split.split("x"))
        # ONNX Runtime's thread settings: forced, as --backend auto may choose another runtime.
        extra = ["--backend", "onnx", "--batching.workers", str(workers), "--onnx.solo-threads", solo or "0"]
        rows, server, _ = bench_service(args.model, threads, extra, work.requests, levels)
        server.terminate()
        server.wait(timeout=30)
        for clients, rate, latencies, failed in rows:
            note = f" ({failed} failed)" if failed else ""
            p50, p95 = pct(latencies, 50), pct(latencies, 95)
            print(
                f"| {workers} x {threads} / {solo or available_cpus()} | {clients} | {rate:.1f}{note} "
                f"| {p50:.1f} | {p95:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
