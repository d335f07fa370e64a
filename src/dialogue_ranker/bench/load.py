"""Real ``ranker serve`` processes on loopback, and clients that keep ``c`` requests in flight.

The clients are threads of the standard library's ``http.client``, one kept-alive connection each:
the serving install has no HTTP client of its own (aiohttp and httpx come with the dev extra), and
the load generator's cost is the same for every system it measures.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    """One ``ranker serve`` process, its flags, its port and how long it took to be ready."""

    label: str
    flags: Sequence[str]
    port: int
    process: subprocess.Popen[bytes]
    ready_s: float = 0.0

    def get(self, path: str) -> Any:
        """A GET's JSON answer."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as response:
            return json.load(response)

    def stop(self) -> None:
        """Terminate the process and wait for it."""
        self.process.terminate()
        self.process.wait(timeout=30)


def start_service(
    label: str,
    flags: Sequence[str],
    *,
    startup_s: float = 300,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Service:
    """``ranker serve`` on a free port with ``flags``, once ``/readyz`` answers 200.

    ``env`` and ``cwd`` are the process's (default: this one's), e.g. another checkout's ``src/``.
    Its log goes to a temporary file, not a pipe nobody reads while it serves (a full pipe would
    stall it); the file's end is the error when it exits early.

    Raises:
        RuntimeError: the process exited or was not ready in time.
    """
    port = free_port()
    command = [sys.executable, "-m", "dialogue_ranker.serving", "--port", str(port), "--log-level", "warning",
               *flags]  # fmt: skip
    started = time.perf_counter()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=cwd)
    service = Service(label, flags, port, process)
    while time.perf_counter() - started < startup_s:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{label}: ranker serve exited: {log.read().decode()[-1500:]}")
        try:
            service.get("/readyz")
            service.ready_s = time.perf_counter() - started
            return service
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    service.stop()
    raise RuntimeError(f"{label}: not ready within {startup_s:g} s")


@dataclass(frozen=True)
class Load:
    """What ``clients`` clients got in ``seconds``: candidates scored, request latencies, failures."""

    clients: int
    seconds: float
    candidates: int
    latencies_s: tuple[float, ...]
    failed: int

    @property
    def candidates_per_s(self) -> float:
        """(context, candidate) pairs scored per second."""
        return self.candidates / self.seconds if self.seconds > 0 else 0.0


def run_load(port: int, requests: Sequence[dict[str, Any]], clients: int, seconds: float) -> Load:
    """``clients`` threads, each sending the requests in turn on one connection, for ``seconds``."""
    bodies = [json.dumps(r).encode() for r in requests]
    sizes = [len(r["candidates"]) for r in requests]
    lock = threading.Lock()
    latencies: list[float] = []
    counts = {"candidates": 0, "failed": 0}
    deadline = time.perf_counter() + seconds

    def client(offset: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        index = offset
        while time.perf_counter() < deadline:
            body, size = bodies[index % len(bodies)], sizes[index % len(bodies)]
            index += clients
            sent = time.perf_counter()
            connection.request("POST", "/rank", body, {"content-type": "application/json"})
            response = connection.getresponse()
            response.read()
            with lock:
                if response.status == 200:
                    latencies.append(time.perf_counter() - sent)
                    counts["candidates"] += size
                else:
                    counts["failed"] += 1
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return Load(clients, elapsed, counts["candidates"], tuple(latencies), counts["failed"])
