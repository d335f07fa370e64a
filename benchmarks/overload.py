"""What clients see under overload and under failing backend calls, counted by status.

``overload`` (the default): starts ``ranker serve`` with its default settings (the shipped
model on the embedded ONNX backend) and, in one run:

1. measures saturation: a closed loop of ``--clients`` clients for ``--saturation-s`` seconds gives
   the successful requests/s the service sustains;
2. offers ``--factor`` times that rate in an open loop (arrivals on a fixed schedule, whatever the
   answers) for ``--duration-s`` seconds, each request with a client timeout a little over the
   server's request timeout;
3. prints the responses by status, client timeouts, the latency of 429s and 200s, and the
   successful requests/s as a share of saturation.

``faults``: a service on the fake backend with ``--fake`` flags (default: one backend call in
three fails), ``--clients`` concurrent clients sending 1-candidate and 5-candidate requests;
prints the share of failed requests of each size.

``--url`` aims either mode at a service that is already running (to compare another checkout side
by side); the requests are SUGAR-like (user request, 12 statements, 5 candidates), read from
``../shared/data/sugar`` when present.

    .venv/bin/python benchmarks/overload.py overload
    .venv/bin/python benchmarks/overload.py faults --fake=--fake.fail-every-n-batches=3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

from bench_gateway import make_requests  # noqa: E402

from benchmarks.service_load import free_port, wait_http  # noqa: E402
from dialogue_ranker.serving.settings import DEFAULT_MODEL_DIR, LimitsSettings  # noqa: E402

#: Client timeout beyond the server's request timeout: a request unanswered by then is a timeout.
CLIENT_SLACK_S = 5.0


def requests_with(count: int, candidates: int, seed: int = 1) -> list[dict[str, Any]]:
    """SUGAR-like requests with exactly ``candidates`` candidates."""
    bodies = []
    for body in make_requests(count, seed=seed):
        pool = body["candidates"] * candidates
        bodies.append(
            {"context": body["context"], "situations": body["situations"], "candidates": pool[:candidates]}
        )
    return bodies


def start_service(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    # The bodies are sent again and again: with kept logits the repeats would cost nothing, and
    # overload is about computing more than the CPUs can.
    no_cache = ["--ranking.logit-cache-entries", "0"]
    command = [sys.executable, "-m", "dialogue_ranker.serving", "--port", str(port), "--log-level", "warning"]
    command += [*no_cache, *args]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/readyz", process, "the service")
    return process, url


async def closed_loop(url: str, bodies: list[dict[str, Any]], clients: int, seconds: float) -> float:
    """Successful requests/s of ``clients`` clients sending back to back for ``seconds``."""
    done = 0
    stop = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def worker(offset: int) -> None:
            nonlocal done
            i = offset
            while time.perf_counter() < stop:
                response = await client.post("/rank", json=bodies[i % len(bodies)])
                done += response.status_code == 200
                i += clients

        started = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(clients)))
        return done / (time.perf_counter() - started)


async def open_loop(
    url: str, bodies: list[dict[str, Any]], rate: float, seconds: float, timeout_s: float
) -> tuple[Counter[str], dict[str, list[float]], float]:
    """Requests sent at ``rate``/s for ``seconds``: outcomes, latencies by outcome, elapsed time."""
    outcomes: Counter[str] = Counter()
    latencies: dict[str, list[float]] = {}
    limits = httpx.Limits(max_connections=4000, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout_s) as client:

        async def one(body: dict[str, Any]) -> None:
            started = time.perf_counter()
            try:
                outcome = str((await client.post("/rank", json=body)).status_code)
            except httpx.TimeoutException:
                outcome = "client timeout"
            except httpx.TransportError as e:
                outcome = f"transport error ({type(e).__name__})"
            outcomes[outcome] += 1
            latencies.setdefault(outcome, []).append(time.perf_counter() - started)

        started = time.perf_counter()
        tasks = []
        for i in range(int(rate * seconds)):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(bodies[i % len(bodies)])))
        await asyncio.gather(*tasks)
        return outcomes, latencies, time.perf_counter() - started


def ms(values: list[float], q: float) -> str:
    return f"{np.percentile(np.array(values) * 1000, q):.0f}" if values else "-"


def run_overload(options: argparse.Namespace, url: str) -> None:
    bodies = requests_with(400, 5)
    asyncio.run(closed_loop(url, bodies, options.clients, 3.0))  # warm-up: the backend speed is measured
    saturation = asyncio.run(closed_loop(url, bodies, options.clients, options.saturation_s))
    rate = options.factor * saturation
    print(f"saturation: {saturation:.1f} requests/s ({options.clients} clients, closed loop, 5 candidates)")
    print(f"offered: {rate:.1f} requests/s for {options.duration_s:g} s (open loop, {options.factor:g}x)")
    timeout_s = options.request_timeout_s + CLIENT_SLACK_S
    outcomes, latencies, elapsed = asyncio.run(open_loop(url, bodies, rate, options.duration_s, timeout_s))
    print("\n| outcome | responses | p50 ms | p99 ms |\n|---|---|---|---|")
    for outcome, count in sorted(outcomes.items()):
        print(f"| {outcome} | {count} | {ms(latencies[outcome], 50)} | {ms(latencies[outcome], 99)} |")
    served = outcomes["200"] / elapsed
    ratio = served / saturation
    print(
        f"\nsuccessful: {served:.1f} requests/s over {elapsed:.1f} s = {ratio:.2f}x saturation; "
        f"504s: {outcomes['504']}; client timeouts: {outcomes['client timeout']}; "
        f"429 p99: {ms(latencies.get('429', []), 99)} ms"
    )


async def fault_load(url: str, bodies: list[dict[str, Any]], clients: int) -> Counter[int]:
    statuses: Counter[int] = Counter()
    pending = list(reversed(bodies))
    async with httpx.AsyncClient(
        base_url=url, limits=httpx.Limits(max_connections=clients), timeout=60
    ) as client:

        async def worker() -> None:
            while pending:
                statuses[(await client.post("/rank", json=pending.pop())).status_code] += 1

        await asyncio.gather(*(worker() for _ in range(clients)))
    return statuses


def run_faults(options: argparse.Namespace, url: str) -> None:
    print(f"{options.clients} clients, {options.requests} requests of each size")
    print("\n| candidates | failed share | statuses |\n|---|---|---|")
    for size in (1, 5):
        statuses = asyncio.run(
            fault_load(url, requests_with(options.requests, size, seed=size), options.clients)
        )
        failed = sum(count for status, count in statuses.items() if status != 200)
        print(f"| {size} | {failed / sum(statuses.values()):.1%} | {dict(sorted(statuses.items()))} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", nargs="?", choices=["overload", "faults"], default="overload")
    parser.add_argument("--url", help="a running service (default: start one)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--saturation-s", type=float, default=20.0)
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument("--factor", type=float, default=2.0, help="offered load / saturation")
    parser.add_argument("--requests", type=int, default=200, help="faults: requests of each size")
    parser.add_argument(
        "--request-timeout-s", type=float, default=LimitsSettings().request_timeout_s,
        help="the server's request timeout (client timeouts are counted past it plus 5 s)",
    )  # fmt: skip
    parser.add_argument(
        "--fake", action="append", default=[],
        help="faults: a flag for the fake backend (default --fake.fail-every-n-batches=3)",
    )  # fmt: skip
    parser.add_argument(
        "--server-arg", action="append", default=[], help="another flag for the started service"
    )
    options = parser.parse_args()
    process = None
    url = options.url
    if url is None:
        args = ["--model", str(options.model), *options.server_arg]
        if options.mode == "faults":
            args += ["--backend", "fake", *(options.fake or ["--fake.fail-every-n-batches=3"])]
        log = REPO_ROOT / "runs" / f"overload-{options.mode}.log"
        log.parent.mkdir(exist_ok=True)
        process, url = start_service(args, log)
        print(f"service: ranker serve {' '.join(args)} (log: {log.relative_to(REPO_ROOT)})")
    try:
        (run_faults if options.mode == "faults" else run_overload)(options, url)
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
