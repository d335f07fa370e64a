"""Gateway overhead benchmark: the raw ONNX Runtime session vs the service over HTTP, same inputs.

Prints, in one run:
- raw session pairs/s at several batch sizes (the best one is the ceiling);
- the service (a real ``ranker serve`` on loopback) at 1, 4, 16 and 64 concurrent clients:
  pairs/s, p50 and p99 request latency, and the share of the raw ceiling;
- a lone 3-candidate request: service p50 vs the raw session's time for the same 3 pairs;
- with ``--triton``: the same load through a gateway with ``--backend triton`` in front of a real
  Triton (``ranker triton-local``, PyTriton on this CPU), side by side with the embedded
  backend; ``--triton-buckets`` (repeatable) adds one Triton column per length-bucket list
  (``[]``: no buckets, each request padded to its longest pair).

Inputs are SUGAR-like: one user request, 12 situational statements, 3 to 10 candidates (about
110 tokens per pair), read from ``../shared/data/sugar/sugar.jsonl`` when present, else made up.

    .venv/bin/python benchmarks/bench_gateway.py --model models/dialogue-minilm-l6 --requests 400
    .venv/bin/python benchmarks/bench_gateway.py --model models/dialogue-minilm-l6 --requests 400 \
        --concurrency 1,16,64 --triton --triton-buckets 32,64,96,128,160,192,224,256 --triton-buckets '[]'
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnxruntime as ort

# Run as a script or imported by the other benchmarks: the repository root goes on sys.path, so
# ``benchmarks.*`` imports (report.py relies on it too).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.service_load import REPO_ROOT, LoadRow, bench_service, bench_triton, load, pct
from dialogue_ranker.data.sugar import load_sugar
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.tokenization import Turn

SUGAR = REPO_ROOT.parent / "shared" / "data" / "sugar" / "sugar.jsonl"


def make_requests(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """SUGAR-like ranking requests with 3 to 10 candidates."""
    rng = random.Random(seed)
    if SUGAR.is_file():
        rows = load_sugar(SUGAR)[:400]
        # The gold replies first, then the distractor replies (the order the draws below rely on).
        replies = [e.candidates[0] for e in rows] + [c for e in rows for c in e.candidates[1:]]
        examples = [(e.request, list(e.statements)) for e in rows]
    else:
        replies = [f"Sure, I can help with that right away, option {i} is ready." for i in range(50)]
        examples = [
            (
                f"Could you help me with task number {i} please?",
                [f"Statement {j} about the room." for j in range(12)],
            )
            for i in range(50)
        ]
    requests = []
    for _ in range(count):
        user, statements = rng.choice(examples)
        k = rng.randint(3, 10)
        # The service ranks exactly the sequences the raw session runs.
        requests.append({"context": user, "situations": statements, "candidates": rng.sample(replies, k)})
    return requests


def make_session(path: Path, threads: int) -> Any:
    """A CPU ONNX Runtime session with ``threads`` intra-op threads (0: ONNX Runtime's default)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def raw_session(model: Path, threads: int) -> tuple[Any, Any]:
    bundle = load_bundle(model)
    return bundle, make_session(bundle.ranker.path, threads)


def encode_all(bundle: Any, requests: list[dict[str, Any]]) -> list[list[Any]]:
    encoder = bundle.pair_encoder()
    return [
        encoder.encode_request([Turn("user", r["context"])], r["situations"], r["candidates"])
        for r in requests
    ]


def bench_raw(bundle: Any, session: Any, pairs: list[Any], batch_sizes: list[int]) -> dict[int, float]:
    """Pairs/s of session.run alone (padding done beforehand), pairs in arrival order."""
    encoder = bundle.pair_encoder()
    spec = bundle.ranker
    result = {}
    for size in batch_sizes:
        batches = [
            encoder.pad(pairs[i : i + size]).as_feeds(spec.input_names) for i in range(0, len(pairs), size)
        ]
        session.run([spec.output_name], batches[0])  # warm-up
        started = time.perf_counter()
        for feeds in batches:
            session.run([spec.output_name], feeds)
        result[size] = len(pairs) / (time.perf_counter() - started)
    return result


def raw_three_pairs_ms(bundle: Any, session: Any, three: list[Any], repeats: int, *, per_call: int) -> float:
    """Median ms of session.run for the 3 pairs, ``per_call`` pairs per call (3: one batch)."""
    encoder = bundle.pair_encoder()
    feeds = [
        encoder.pad(three[i : i + per_call]).as_feeds(bundle.ranker.input_names)
        for i in range(0, len(three), per_call)
    ]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for feed in feeds:
            session.run([bundle.ranker.output_name], feed)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    parser.add_argument("--requests", type=int, default=400, help="requests per concurrency level")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--batch-sizes", default="1,4,8,16,32,64")
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: default)")
    parser.add_argument("--lone", type=int, default=100, help="lone 3-candidate requests")
    parser.add_argument("--triton", action="store_true", help="add gateway -> Triton columns")
    parser.add_argument(
        "--triton-buckets",
        action="append",
        help="a --triton.length-buckets value (e.g. 32,64,128,256 or '[]'); repeat for more columns",
    )
    parser.add_argument("server_args", nargs="*", help="extra service flags after --")
    return parser.parse_args()


@dataclass(frozen=True)
class RawFigures:
    """The raw session's figures: pairs/s per batch size and a lone request's three pairs (ms)."""

    pairs: int
    mean_tokens: float
    rates: dict[int, float]
    #: The 3 pairs in one call, and as the service must run this model (``served_per_call`` a call).
    three_ms: float
    served_per_call: int
    three_served_ms: float

    @property
    def best(self) -> tuple[int, float]:
        """The batch size with the most pairs/s, and that rate: the ceiling."""
        return max(self.rates.items(), key=lambda kv: kv[1])


def measure_raw(args: argparse.Namespace, requests: list[dict[str, Any]]) -> tuple[Any, RawFigures]:
    """The bundle and its raw session's figures on ``requests`` (the session is closed after)."""
    bundle, session = raw_session(args.model, args.threads)
    encoded = encode_all(bundle, requests)
    pairs = [p for request in encoded for p in request]
    mean_tokens = sum(len(p) for p in pairs) / len(pairs)
    raw = bench_raw(bundle, session, pairs, [int(s) for s in args.batch_sizes.split(",")])
    raw_three = raw_three_pairs_ms(bundle, session, encoded[0][:3], args.lone, per_call=3)
    # How the service must run this model (bundle serving.sub_batch_pairs), for the fair gap.
    served_per_call = bundle.serving_sub_batch_pairs or 3
    raw_three_served = raw_three_pairs_ms(
        bundle, session, encoded[0][:3], args.lone, per_call=served_per_call
    )
    return bundle, RawFigures(len(pairs), mean_tokens, raw, raw_three, served_per_call, raw_three_served)


def other_columns(
    args: argparse.Namespace, requests: list[dict[str, Any]], concurrency: list[int]
) -> dict[str, list[LoadRow]]:
    """The columns beside the embedded backend: Triton (``--triton``)."""
    # Each server runs after the previous one has stopped: they never compete for the CPU.
    columns: dict[str, list[LoadRow]] = {}
    if args.triton:
        columns.update(
            bench_triton(
                args.model,
                args.threads,
                requests,
                concurrency,
                server_args=args.server_args,
                bucket_lists=args.triton_buckets or [None],
            )
        )
    return columns


def main() -> None:
    args = parse_args()
    requests = make_requests(args.requests)
    bundle, raw = measure_raw(args, requests)
    lone_request = {**requests[0], "candidates": requests[0]["candidates"][:3]}

    concurrency = [int(x) for x in args.concurrency.split(",")]
    rows, server, url = bench_service(args.model, args.threads, args.server_args, requests, concurrency)
    try:
        _, lone, _ = asyncio.run(load(url, [lone_request] * args.lone, 1))
    finally:
        server.terminate()
        server.wait(timeout=30)
    columns = other_columns(args, requests, concurrency)
    print_report(args, bundle, raw, rows, lone)
    if columns:
        print_side_by_side({"embedded": rows, **columns})


def print_report(
    args: argparse.Namespace, bundle: Any, raw: RawFigures, rows: list[LoadRow], lone: list[float]
) -> None:
    """The raw session's pairs/s, the service's per concurrency level, and the lone request's gap."""
    best_size, best = raw.best
    print(
        f"\nmodel {bundle.model_id}  pairs {raw.pairs}  mean tokens/pair {raw.mean_tokens:.0f}  "
        f"threads {args.threads or 'default'}  cpus {os.cpu_count()}"
    )
    print("\nraw ONNX Runtime session (session.run only)")
    print(f"{'batch':>6} {'pairs/s':>10}")
    for size, rate in raw.rates.items():
        print(f"{size:>6} {rate:>10.1f}{'  <- best' if size == best_size else ''}")
    print("\nservice over HTTP (loopback, same inputs)")
    print(f"{'clients':>7} {'pairs/s':>10} {'of raw':>7} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7}")
    for clients, rate, latencies, failed in rows:
        p50, p99 = pct(latencies, 50), pct(latencies, 99)
        print(f"{clients:>7} {rate:>10.1f} {rate / best:>7.0%} {p50:>8.1f} {p99:>8.1f} {failed:>7}")
    lone_p50 = pct(lone, 50)
    print(
        f"\nlone 3-candidate request: service p50 {lone_p50:.2f} ms, raw session {raw.three_ms:.2f} ms, "
        f"gap {lone_p50 - raw.three_ms:.2f} ms (target <= 5 ms)"
    )
    if raw.served_per_call != 3:
        print(
            f"  the model runs {raw.served_per_call} pair(s) per call (batch-invariant scores): raw session "
            f"that way {raw.three_served_ms:.2f} ms, gateway overhead {lone_p50 - raw.three_served_ms:.2f} ms"
        )
    at16 = next((rate for clients, rate, *_ in rows if clients == 16), None)
    if at16 is not None:
        print(f"16 clients: {at16 / best:.0%} of the raw session's best pairs/s (target >= 80%)")


def print_side_by_side(columns: dict[str, list[LoadRow]]) -> None:
    """pairs/s, p50 and p99 (ms) per backend column, one row per concurrency level."""
    widths = {name: max(28, len(name)) for name in columns}
    print("\nembedded vs Triton over HTTP (gateway -> backend, same inputs)")
    print(f"{'clients':>7}" + "".join(f" | {name:^{widths[name]}}" for name in columns))
    print(f"{'':>7}" + "".join(f" | {'pairs/s   p50 ms   p99 ms':>{widths[name]}}" for name in columns))
    for i, (clients, *_) in enumerate(next(iter(columns.values()))):
        cells = ""
        for name, rows in columns.items():
            _, rate, latencies, failed = rows[i]
            cell = f"{rate:>9.1f} {pct(latencies, 50):>8.1f} {pct(latencies, 99):>8.1f}"
            cell += f" {failed:>6}" if failed else ""
            cells += f" | {cell:>{widths[name]}}"
        print(f"{clients:>7}{cells}")


if __name__ == "__main__":
    main()
