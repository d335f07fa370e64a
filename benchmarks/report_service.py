"""The report's service rows (``report.py``): real ``ranker serve`` processes over HTTP.

The service at its defaults (``--backend auto``: whichever runtime it measured fastest within
tolerance at start), the same service forced to each in-process runtime (``--backend onnx``,
``--backend openvino``), and with ``--triton`` the gateway in front of a local Triton; then a
lone request at a time through the default and the ONNX Runtime services and on the raw session,
in turns.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import numpy as np
from bench_gateway import LoadRow, bench_service, bench_triton, load, make_session
from report_output import Point
from report_workload import Workload

from dialogue_ranker.serving.model_bundle import ModelBundle

SERVICE = "service, default settings (HTTP)"
SERVICE_ONNX = "service, --backend onnx (HTTP)"
SERVICE_OPENVINO = "service, --backend openvino (HTTP)"
TRITON = "service -> Triton (HTTP, gRPC)"
#: Lone requests measured in turns, and the pause after each call.
LONE_REQUESTS = 100
PAUSE_S = 0.05


def service_points(system: str, rows: Sequence[LoadRow]) -> list[Point]:
    # bench_gateway's load() reports [nan] when every request of a level failed.
    return [
        Point(system, clients, rate, tuple(x for x in latencies if not math.isnan(x)), failed)
        for clients, rate, latencies, failed in rows
    ]


@dataclass(frozen=True)
class LoneTurns:
    """A lone request's latency (s) per system, measured in turns, request by request."""

    latencies: dict[str, tuple[float, ...]]

    def p50_ms(self, system: str) -> float:
        """Median ms of ``system``."""
        return float(np.median(self.latencies[system])) * 1000

    @property
    def requests(self) -> int:
        """Requests each system answered."""
        return min(len(v) for v in self.latencies.values())


async def _post(client: aiohttp.ClientSession, request: dict[str, Any]) -> float:
    started = time.perf_counter()
    async with client.post("/rank", json=request) as response:
        await response.read()
        assert response.status == 200, await response.text()
    return time.perf_counter() - started


async def _lone_turns(urls: dict[str, str], session: Any, bundle: ModelBundle, work: Workload) -> LoneTurns:
    """Each request alone through each service, then its sequence alone on the raw session, in turns.

    Phases measured minutes apart drift with the machine (other tenants, clock): figures taken in
    turns, request by request, see the same machine. A pause after each call lets the threads of
    whichever ran last stop spinning before the next runs.
    """
    names = [i.name for i in session.get_inputs()]
    output = session.get_outputs()[0].name
    encoder = bundle.pair_encoder()
    latencies: dict[str, list[float]] = {system: [] for system in [*urls, "raw"]}
    clients = {system: aiohttp.ClientSession(url) for system, url in urls.items()}
    try:
        for request, encoded in list(zip(work.requests, work.encoded, strict=True))[:LONE_REQUESTS]:
            feeds = encoder.pad(list(encoded)).as_feeds(names)
            for system, client in clients.items():
                latencies[system].append(await _post(client, request))
                await asyncio.sleep(PAUSE_S)
            started = time.perf_counter()
            session.run([output], feeds)
            latencies["raw"].append(time.perf_counter() - started)
            await asyncio.sleep(PAUSE_S)
    finally:
        for client in clients.values():
            await client.close()
    return LoneTurns({system: tuple(v) for system, v in latencies.items()})


def bench_lone_in_turns(args: argparse.Namespace, bundle: ModelBundle, work: Workload) -> LoneTurns:
    """The service at its defaults, with ``--backend onnx``, and the raw shipped session, in turns."""
    session = make_session(bundle.ranker.path, args.threads)
    servers, urls = [], {}
    try:
        for system, extra in ((SERVICE, []), (SERVICE_ONNX, ["--backend", "onnx"])):
            _, server, urls[system] = bench_service(args.model, 0, extra, work.requests, [])
            servers.append(server)
        return asyncio.run(_lone_turns(urls, session, bundle, work))
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


def backend_choice(url: str) -> dict[str, Any]:
    """The default model's backend choice as ``/v1/models`` reports it."""
    return httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["backend_choice"]


def choice_line(choice: dict[str, Any]) -> str:
    """One line: what the default service chose and what each runtime measured at its start."""
    trials = "; ".join(
        f"{t['runtime']}/{t['precision']} "
        + (f"{t['candidates_per_s']:.1f} candidates/s" if t["accepted"] else f"refused ({t['note']})")
        + (
            f", top-1 {t['top1_agreement']:.3f}, mean |Δp| {t['mean_abs_diff']:.4f}"
            if t["top1_agreement"]
            else ""
        )
        for t in choice["trials"]
    )
    return (
        f"The default service (`--backend auto`) chose **{choice['backend']} {choice['precision']}**: "
        f"{choice['reason']}. At its start: {trials or 'no runtime measured'}."
    )


#: Each level of the in-process services is measured this many times, the services taking turns.
ROUNDS = 2


def _in_turns(urls: dict[str, str], work: Workload, concurrency: Sequence[int]) -> dict[str, list[LoadRow]]:
    """Every service at each level, in turns (the order reversed each round), its rounds pooled.

    The services are started together and measured level by level, one after another, so a
    difference between them is not a difference between two minutes of the machine's life.
    """
    rows: dict[str, list[LoadRow]] = {system: [] for system in urls}
    for clients in concurrency:
        measured: dict[str, list[tuple[float, list[float], int]]] = {system: [] for system in urls}
        for round_ in range(ROUNDS):
            order = list(urls) if round_ % 2 == 0 else list(reversed(urls))
            for system in order:
                measured[system].append(asyncio.run(load(urls[system], work.requests, clients)))
        for system, runs in measured.items():
            # Each round scores the same pairs: the pooled rate is the harmonic mean of the rounds'.
            rate = len(runs) / sum(1 / r for r, _, _ in runs) if all(r > 0 for r, _, _ in runs) else 0.0
            latencies = [x for _, lat, _ in runs for x in lat]
            rows[system].append((clients, rate, latencies, sum(f for _, _, f in runs)))
    return rows


def bench_services(args: argparse.Namespace, work: Workload) -> tuple[list[Point], list[str]]:
    """The service at its defaults, forced to each in-process runtime (in turns), and Triton."""
    points, notes = [], []
    runs: list[tuple[str, list[str]]] = [(SERVICE, []), (SERVICE_ONNX, ["--backend", "onnx"])]
    if importlib.util.find_spec("openvino") is not None:
        runs.append((SERVICE_OPENVINO, ["--backend", "openvino"]))
    else:
        notes.append("Service row with --backend openvino left out: openvino is not installed.")
    servers, urls = [], {}
    try:
        for system, extra in runs:
            # Workers and threads sized from the CPU quota (serving/cpu.py), as a deployment runs.
            _, server, urls[system] = bench_service(args.model, 0, extra, work.requests, [])
            servers.append(server)
        notes.append(choice_line(backend_choice(urls[SERVICE])))
        for system, rows in _in_turns(urls, work, args.concurrency).items():
            points += service_points(system, rows)
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
    notes.append(
        f"The in-process services ran side by side: each concurrency level {ROUNDS} times per service, "
        "the services taking turns (the order reversed each round), rates pooled."
    )
    if args.triton and importlib.util.find_spec("pytriton") is None:
        notes.append("Triton rows left out: nvidia-pytriton is not installed (dev extras).")
    elif args.triton:
        for rows in bench_triton(args.model, args.threads, work.requests, args.concurrency).values():
            points += service_points(TRITON, rows)
    return points, notes
