"""The service under load on loopback: ``ranker serve`` (and a local Triton) as processes, and clients.

``bench_service`` starts a server and runs the same requests at each concurrency level through
``load`` (aiohttp clients on one event loop); ``bench_triton`` does so through a gateway with
``--backend triton`` in front of ``ranker triton-local``. The benchmarks that compare the service
with something else (``bench_gateway``, ``threads``, ``overload``, ``logit_cache``, the report)
share these.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
#: One concurrency level of a load run: clients, pairs/s, request latencies (s), failed requests.
LoadRow = tuple[int, float, list[float], int]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, process: subprocess.Popen, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
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
    """The ``q``-th percentile of ``values`` (seconds), in milliseconds."""
    return float(np.percentile(np.array(values) * 1000, q))
