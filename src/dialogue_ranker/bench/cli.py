"""``ranker bench``: default service vs ``--backend onnx`` vs a PyTorch CrossEncoder, on this CPU.

    ranker bench                          # about 2 minutes on 2 cores
    ranker bench --clients 1,4,16 --seconds 10 --out bench.md

Both services run the shipped model (or ``--model``) with the logit cache off (the requests
repeat) and are measured in turns: each level is split into rounds, the two services alternate,
so a burst of other work on the machine falls on both. The table gives (context, candidate) pairs
scored per second, request latency percentiles and each system's ratio to ``--backend onnx``;
below it, what ``auto`` chose and why (every runtime it tried, with its rate at start), the time
each service took to be ready, and the CPU's model and flags.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dialogue_ranker.bench.cross_encoder import cross_encoder_missing, run_cross_encoder
from dialogue_ranker.bench.load import Load, Service, run_load, start_service
from dialogue_ranker.bench.workload import bench_requests
from dialogue_ranker.serving.cpu import available_cpus, cpu_flags, cpu_model
from dialogue_ranker.serving.settings import DEFAULT_MODEL_DIR

#: The flags that decide which kernels the runtimes can use, as /proc/cpuinfo spells them.
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16",
                "amx_int8")  # fmt: skip
DEFAULT = "service, default (--backend auto)"
ONNX = "service, --backend onnx"
CROSS_ENCODER = "CrossEncoder fp32 (PyTorch)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command's flags."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR, help="the bundle both serve")
    parser.add_argument("--clients", default="4,16", help="concurrent clients, comma-separated levels")
    parser.add_argument("--seconds", type=float, default=12.0, help="measured seconds per system and level")
    parser.add_argument("--rounds", type=int, default=3, help="turns each level is split into")
    parser.add_argument("--requests", type=Path, default=None, help="a JSONL file of /rank bodies")
    parser.add_argument("--no-cross-encoder", action="store_true", help="leave the PyTorch row out")
    parser.add_argument("--out", type=Path, default=None, help="also write the report (markdown) here")
    parser.add_argument("serve_args", nargs="*", help="`ranker serve` flags for both, after --")
    return parser.parse_args(argv)


def merged(loads: Sequence[Load]) -> Load:
    """The rounds of one system at one level, as one measurement."""
    return Load(
        loads[0].clients,
        sum(x.seconds for x in loads),
        sum(x.candidates for x in loads),
        tuple(t for x in loads for t in x.latencies_s),
        sum(x.failed for x in loads),
    )


def measure(services: Sequence[Service], requests: list[dict[str, Any]], levels: Sequence[int],
            seconds: float, rounds: int) -> dict[tuple[str, int], Load]:  # fmt: skip
    """Each service at each level, the services taking turns round by round."""
    for service in services:  # warm-up: first calls, caches, thread pools
        run_load(service.port, requests, 4, 1.0)
    results: dict[tuple[str, int], list[Load]] = {}
    for clients in levels:
        for round_ in range(rounds):
            order = services if round_ % 2 == 0 else list(reversed(services))
            for service in order:
                load = run_load(service.port, requests, clients, seconds / rounds)
                results.setdefault((service.label, clients), []).append(load)
    return {key: merged(loads) for key, loads in results.items()}


def percentile_ms(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (seconds) in milliseconds."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def report(results: dict[tuple[str, int], Load], levels: Sequence[int], notes: list[str]) -> str:
    """The markdown report: the table, then the notes."""
    lines = [
        "| system | clients | pairs/s | p50 ms | p99 ms | failed | vs --backend onnx |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for system in (DEFAULT, ONNX, CROSS_ENCODER):
        for clients in levels:
            load = results.get((system, clients))
            if load is None:
                continue
            base = results[(ONNX, clients)].candidates_per_s
            ratio = f"{load.candidates_per_s / base:.2f}x" if base else "-"
            lines.append(
                f"| {system} | {clients} | {load.candidates_per_s:.1f} | "
                f"{percentile_ms(load.latencies_s, 50):.0f} | {percentile_ms(load.latencies_s, 99):.0f} | "
                f"{load.failed} | {ratio} |"
            )
    return "\n".join(lines + [""] + [f"- {note}" for note in notes]) + "\n"


def machine_line() -> str:
    """The CPU's model, the CPUs this process may use and the kernel-deciding flags it has."""
    flags = cpu_flags()
    present = [f for f in KERNEL_FLAGS if f in flags]
    return f"CPU: {cpu_model()}, {available_cpus()} CPUs usable; flags: {' '.join(present) or 'none of note'}"


def choice_notes(default: Service) -> list[str]:
    """What ``auto`` chose, why, and what each runtime measured at start."""
    served = default.get("/v1/models")["data"][0]
    choice = served["backend_choice"]
    notes = [f"`auto` chose **{choice['backend']} {choice['precision']}**: {choice['reason']}."]
    for trial in choice["trials"]:
        rate = "" if trial["candidates_per_s"] is None else f"{trial['candidates_per_s']} candidates/s, "
        verdict = "accepted" if trial["accepted"] else f"not serving: {trial['note']}"
        notes.append(f"at start, {trial['runtime']}/{trial['precision']}: {rate}{verdict}")
    return notes


def main(argv: Sequence[str] | None = None) -> None:
    """Run the comparison and print the report."""
    args = parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]
    requests, source = bench_requests(args.requests)
    common = ["--model", str(args.model), "--ranking.logit-cache-entries", "0", *args.serve_args]
    print(machine_line(), file=sys.stderr)
    print(f"starting both services ({source}) ...", file=sys.stderr)
    services = [start_service(DEFAULT, common), start_service(ONNX, [*common, "--backend", "onnx"])]
    try:
        print("measuring in turns ...", file=sys.stderr)
        results = measure(services, requests, levels, args.seconds, args.rounds)
        notes = choice_notes(services[0])
    finally:
        for service in services:
            service.stop()
    notes += [f"ready after {s.ready_s:.1f} s from start: {s.label}" for s in services]
    missing = "left out by --no-cross-encoder" if args.no_cross_encoder else cross_encoder_missing()
    if missing:
        notes.append(f"{CROSS_ENCODER}: {missing}")
    else:
        print("the PyTorch CrossEncoder ...", file=sys.stderr)
        for clients in levels:
            results[(CROSS_ENCODER, clients)] = run_cross_encoder(requests, clients, args.seconds)
    share = statistics.fmean(len(r["candidates"]) for r in requests)
    notes += [
        f"{source}, {share:.1f} candidates a request; the logit cache off; each level {args.seconds:g} s "
        f"per service in {args.rounds} rounds taken in turns.",
        machine_line(),
    ]
    text = "# ranker bench\n\n" + report(results, levels, notes)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
