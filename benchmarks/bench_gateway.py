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
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np
import onnxruntime as ort

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from dialogue_ranker.data.sugar import load_sugar  # noqa: E402
from dialogue_ranker.serving.model_bundle import load_bundle  # noqa: E402
from dialogue_ranker.serving.tokenization import Turn  # noqa: E402

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
        # Selection off: the service ranks exactly the pairs the raw session runs (--selection adds
        # a column with it on).
        requests.append(
            {
                "context": user,
                "situations": statements,
                "candidates": rng.sample(replies, k),
                "select_statements": False,
            }
        )
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.terminate()
    raise SystemExit(f"{what} did not become ready")


def start_triton(model: Path, threads: int) -> tuple[subprocess.Popen, int]:
    """``dialogue_ranker.export.triton_local`` on free ports; returns the process and its gRPC port."""
    http_port, grpc_port = free_port(), free_port()
    command = [
        sys.executable, "-m", "dialogue_ranker.export.triton_local", "--model", str(model),
        "--http-port", str(http_port),
        "--grpc-port", str(grpc_port), "--threads", str(threads),
        # Requests fail at the same age as on the embedded backend (the gateway's request timeout).
        "--queue-timeout-us", str(10_000_000),
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    wait_http(f"http://127.0.0.1:{http_port}/v2/models/ranker/ready", process, "triton_local")
    if load_bundle(model).selector is not None:
        wait_http(f"http://127.0.0.1:{http_port}/v2/models/selector/ready", process, "triton_local")
    return process, grpc_port


def start_server(
    model: Path, port: int, threads: int, extra: list[str], *, logit_cache_entries: int = 0
) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "dialogue_ranker.serving",
        "--model",
        str(model),
        "--port",
        str(port),
        "--onnx.intra-op-threads",
        str(threads),
        "--log-level",
        "warning",
        # The same requests run at every concurrency level: kept logits would answer the repeats
        # without computing them, and this benchmark measures computing (0: no cache).
        "--ranking.logit-cache-entries",
        str(logit_cache_entries),
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    process = subprocess.Popen(command, env=env)
    wait_http(f"http://127.0.0.1:{port}/readyz", process, "the service")
    return process


#: One concurrency level of a load run: clients, pairs/s, request latencies (s), failed requests.
LoadRow = tuple[int, float, list[float], int]


def bench_service(
    model: Path, threads: int, extra: list[str], requests: list[dict[str, Any]], concurrency: list[int]
) -> tuple[list[LoadRow], subprocess.Popen, str]:
    """(clients, pairs/s, latencies, failed requests) per concurrency level; the server is left running."""
    port = free_port()
    server = start_server(model, port, threads, extra)
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(load(url, requests[: min(50, len(requests))], 4))  # warm-up
        rows = [(c, *asyncio.run(load(url, requests, c))) for c in concurrency]
    except BaseException:
        server.terminate()
        raise
    return rows, server, url


def bench_triton(
    model: Path,
    threads: int,
    requests: list[dict[str, Any]],
    concurrency: list[int],
    *,
    server_args: Sequence[str] = (),
    bucket_lists: Sequence[str | None] = (None,),
) -> dict[str, list[LoadRow]]:
    """The gateway with ``--backend triton`` in front of one Triton: one column per bucket list.

    A ``None`` bucket list keeps the gateway's default ``triton.length-buckets``.
    """
    triton, grpc_port = start_triton(model, threads)
    columns = {}
    try:
        for buckets in bucket_lists:
            extra = ["--backend", "triton", "--triton.url", f"127.0.0.1:{grpc_port}", *server_args]
            if buckets is not None:
                extra += ["--triton.length-buckets", buckets]
            rows, server, _ = bench_service(model, threads, extra, requests, concurrency)
            server.terminate()
            server.wait(timeout=30)
            columns[f"triton {buckets or 'default'}"] = rows
    finally:
        triton.terminate()
        triton.wait(timeout=30)
    return columns


async def load(url: str, requests: list[dict[str, Any]], clients: int) -> tuple[float, list[float], int]:
    """Pairs/s, per-request latencies (s) and failed requests with ``clients`` concurrent clients.

    A failed request (429 from a full queue, 504...) is counted and reported, not scored. The
    clients are aiohttp on one event loop: the load generator shares the CPUs with the service,
    and aiohttp spends about 0.6 ms of CPU a request here where httpx spent 2.3 ms.
    """
    queue = [json.dumps(body).encode() for body in reversed(requests)]
    sizes = [len(body["candidates"]) for body in reversed(requests)]
    latencies: list[float] = []
    failures: dict[int, int] = {}
    pairs = 0
    headers = {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(url, connector=connector, timeout=aiohttp.ClientTimeout(60)) as client:

        async def worker() -> None:
            nonlocal pairs
            while queue:
                body, size = queue.pop(), sizes.pop()
                started = time.perf_counter()
                async with client.post("/rank", data=body, headers=headers) as response:
                    await response.read()
                if response.status != 200:
                    failures[response.status] = failures.get(response.status, 0) + 1
                    continue
                latencies.append(time.perf_counter() - started)
                pairs += size

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    if failures:
        print(
            f"{url} with {clients} clients: {sum(failures.values())} requests failed {failures}",
            file=sys.stderr,
        )
    return pairs / elapsed, latencies or [float("nan")], sum(failures.values())


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values) * 1000, q))


def main() -> None:
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
        "--selection",
        action="store_true",
        help="add a column with statement selection on (the selector runs, the ranker sees fewer statements)",
    )
    parser.add_argument(
        "--triton-buckets",
        action="append",
        help="a --triton.length-buckets value (e.g. 32,64,128,256 or '[]'); repeat for more columns",
    )
    parser.add_argument("server_args", nargs="*", help="extra service flags after --")
    args = parser.parse_args()

    requests = make_requests(args.requests)
    bundle, session = raw_session(args.model, args.threads)
    encoded = encode_all(bundle, requests)
    pairs = [p for request in encoded for p in request]
    mean_tokens = sum(len(p) for p in pairs) / len(pairs)
    raw = bench_raw(bundle, session, pairs, [int(s) for s in args.batch_sizes.split(",")])
    best_size, best = max(raw.items(), key=lambda kv: kv[1])
    lone_request = {**requests[0], "candidates": requests[0]["candidates"][:3]}
    raw_three = raw_three_pairs_ms(bundle, session, encoded[0][:3], args.lone, per_call=3)
    # How the service must run this model (bundle serving.sub_batch_pairs), for the fair gap.
    served_per_call = bundle.serving_sub_batch_pairs or 3
    raw_three_served = raw_three_pairs_ms(
        bundle, session, encoded[0][:3], args.lone, per_call=served_per_call
    )
    del session

    concurrency = [int(x) for x in args.concurrency.split(",")]
    rows, server, url = bench_service(args.model, args.threads, args.server_args, requests, concurrency)
    try:
        _, lone, _ = asyncio.run(load(url, [lone_request] * args.lone, 1))
    finally:
        server.terminate()
        server.wait(timeout=30)
    # Each server runs after the previous one has stopped: they never compete for the CPU.
    columns: dict[str, list[LoadRow]] = {}
    if args.selection:
        selecting = [{**r, "select_statements": True} for r in requests]
        columns["embedded, selection on"], server, _ = bench_service(
            args.model, args.threads, args.server_args, selecting, concurrency
        )
        server.terminate()
        server.wait(timeout=30)
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

    print(
        f"\nmodel {bundle.model_id}  pairs {len(pairs)}  mean tokens/pair {mean_tokens:.0f}  "
        f"threads {args.threads or 'default'}  cpus {os.cpu_count()}"
    )
    print("\nraw ONNX Runtime session (session.run only)")
    print(f"{'batch':>6} {'pairs/s':>10}")
    for size, rate in raw.items():
        print(f"{size:>6} {rate:>10.1f}{'  <- best' if size == best_size else ''}")
    print("\nservice over HTTP (loopback, same inputs)")
    print(f"{'clients':>7} {'pairs/s':>10} {'of raw':>7} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7}")
    for clients, rate, latencies, failed in rows:
        p50, p99 = pct(latencies, 50), pct(latencies, 99)
        print(f"{clients:>7} {rate:>10.1f} {rate / best:>7.0%} {p50:>8.1f} {p99:>8.1f} {failed:>7}")
    lone_p50 = pct(lone, 50)
    print(
        f"\nlone 3-candidate request: service p50 {lone_p50:.2f} ms, raw session {raw_three:.2f} ms, "
        f"gap {lone_p50 - raw_three:.2f} ms (target <= 5 ms)"
    )
    if served_per_call != 3:
        print(
            f"  the model runs {served_per_call} pair(s) per call (batch-invariant scores): raw session "
            f"that way {raw_three_served:.2f} ms, gateway overhead {lone_p50 - raw_three_served:.2f} ms"
        )
    at16 = next((rate for clients, rate, *_ in rows if clients == 16), None)
    if at16 is not None:
        print(f"16 clients: {at16 / best:.0%} of the raw session's best pairs/s (target >= 80%)")
    if columns:
        print_side_by_side({"embedded": rows, **columns})


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
