"""A real Triton (``ranker triton-local``, PyTriton) and the gateway against it.

Select with ``pytest -m triton``. Every test runs on a per-pair bundle (a tiny BERT exported by
``export.hf``, dynamic int8 served one pair per call) and on a shared-prefix bundle (the shipped
model when it is one, else a tiny one); see ``tests/bundle_kinds.py``. The server starts once per
bundle on free loopback ports; the kill-and-restart test runs last and leaves a fresh server for
the fixture to stop.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bundle_kinds import KINDS, bundle_of_kind
from helpers import REPO_ROOT, free_port, free_ports, serve_in_process

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.triton]

STARTUP_TIMEOUT_S = 90
#: The gateway's Triton call timeout in these tests: a hang would surface as 504, not 503.
TRITON_TIMEOUT_S = 3.0

SITUATIONS = [
    "The kitchen has a coffee machine.",
    "The user is holding a cup.",
    "It is raining outside.",
    "The robot's battery is low.",
]
REQUESTS: list[dict[str, Any]] = [
    {
        "context": "Could you make me some coffee?",
        "candidates": ["Sure, brewing now.", "No.", "It is raining."],
    },
    {
        "context": [
            {"speaker": "user", "text": "Good morning! " * 12},
            {"speaker": "robot", "text": "Good morning, how can I help?"},
            {"speaker": "user", "text": "Is it going to rain today? I need to go out later."},
        ],
        "situations": SITUATIONS,
        "candidates": ["Take an umbrella, it is raining outside.", "I can make coffee.", "Yes." * 30],
    },
    {"context": "hello " * 90, "situations": SITUATIONS, "candidates": ["hi", "The battery is low. " * 8]},
    # Six candidates: several shared-prefix sequences when a sequence holds fewer.
    {
        "context": "Could you make me some tea?",
        "situations": SITUATIONS[:2],
        "candidates": ["Sure.", "No.", "One moment please.", "I will make tea now.", "Sorry, no.", "Thanks!"],
    },
    # Forty candidates after a long context: several shared-prefix sequences for the shipped model
    # too (32 candidates a sequence), the first longer than its position limit (its max_length).
    {
        "context": "Good morning! " * 30 + "Could you make me some coffee?",
        "situations": SITUATIONS,
        "candidates": [
            f"Answer {i}: the coffee machine in the kitchen is ready, shall I brew now?" for i in range(40)
        ],
    },
]


class TritonProcess:
    """``ranker triton-local`` in its own process group, on fixed ports."""

    def __init__(self, model: Path, log: Path) -> None:
        self.model = model
        self.log = log
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.process: subprocess.Popen[bytes] | None = None
        self.models = ["ranker"]

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> None:
        command = [
            sys.executable, "-m", "dialogue_ranker.export.triton_local", "--model", str(self.model),
            "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port),
            "--metrics-port", str(self.metrics_port), "--threads", "1",
        ]  # fmt: skip
        with self.log.open("ab") as log:
            # Its own session: killing the group takes tritonserver and its Python-backend stubs too.
            self.process = subprocess.Popen(
                command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        base = f"http://127.0.0.1:{self.http_port}/v2"
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"triton_local exited with {self.process.returncode}: {self.tail()}")
            try:
                if all(
                    httpx.get(f"{base}/models/{m}/ready", timeout=1).status_code == 200 for m in self.models
                ):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"Triton did not become ready: {self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, not a shutdown."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
            # A killed PyTriton cannot free its shared-memory regions (named after its pid).
            for region in Path("/dev/shm").glob(f"pytrtion{self.process.pid}-*"):
                region.unlink(missing_ok=True)

    def stop(self) -> None:
        """SIGTERM (a clean stop), then SIGKILL the group if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def metric(self, name: str, model: str = "ranker") -> float:
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        match = re.search(rf'^{name}{{model="{model}",version="1"}} (\S+)$', text, re.MULTILINE)
        assert match, f"{name} for {model} not in Triton's metrics"
        return float(match.group(1))


@pytest.fixture(scope="module", params=KINDS)
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Overrides conftest's: a per-pair bundle, then a shared-prefix one."""
    return bundle_of_kind(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def triton(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    pytest.importorskip("pytriton", reason="nvidia-pytriton is not installed (pip install -e '.[dev]')")
    server = TritonProcess(model_dir, tmp_path_factory.mktemp("triton") / "triton_local.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def triton_settings(model: Path, url: str, **overrides: Any) -> Settings:
    return Settings(
        backend="triton",
        model=model,
        triton={"url": url, "timeout_s": TRITON_TIMEOUT_S},
        executor_threads=2,
        **overrides,
    )


def logits_by_id(body: dict[str, Any]) -> dict[str, float]:
    return {entry["id"]: entry["logit"] for entry in body["ranking"]}


async def rank_all(settings: Settings) -> list[dict[str, Any]]:
    async with serve_in_process(create_app(settings)) as client:
        responses = [await client.post("/rank", json=body) for body in REQUESTS]
    for response in responses:
        assert response.status_code == 200, response.text
    return [response.json() for response in responses]


async def test_triton_scores_equal_the_embedded_backends_within_1e_3(
    triton: TritonProcess, model_dir: Path
) -> None:
    embedded = await rank_all(Settings(backend="onnx", model=model_dir, onnx={"intra_op_threads": 1}))
    remote = await rank_all(triton_settings(model_dir, triton.grpc_url))
    for local, served in zip(embedded, remote, strict=True):
        assert served["statements_used"] == local["statements_used"]
        expected, got = logits_by_id(local), logits_by_id(served)
        assert got.keys() == expected.keys()
        for key, logit in expected.items():
            assert got[key] == pytest.approx(logit, abs=1e-3)


async def test_tritons_batcher_merges_concurrent_requests(triton: TritonProcess, model_dir: Path) -> None:
    requests_before = triton.metric("nv_inference_request_success")
    items_before = triton.metric("nv_inference_count")
    execs_before = triton.metric("nv_inference_exec_count")
    body = {"context": "Could you make me some coffee?", "candidates": ["Sure, brewing now."]}
    # No logit cache: the 48 copies must all reach Triton.
    settings = triton_settings(model_dir, triton.grpc_url, ranking={"logit_cache_entries": 0})
    async with serve_in_process(create_app(settings)) as client:
        responses = await asyncio.gather(*(client.post("/rank", json=body) for _ in range(48)))
        gateway_metrics = (await client.get("/metrics")).text
    assert all(r.status_code == 200 for r in responses)
    requests = triton.metric("nv_inference_request_success") - requests_before
    items = triton.metric("nv_inference_count") - items_before
    execs = triton.metric("nv_inference_exec_count") - execs_before
    # One pair (or one shared-prefix sequence) per request: every execution holding more than one
    # item merged separate requests.
    assert requests == items == 48
    assert execs < items
    name = json.loads((model_dir / "metadata.json").read_text())["name"]
    assert (
        f'ranker_inference_duration_seconds_count{{backend="triton",model="{name}"}} 48.0' in gateway_metrics
    )


async def test_an_unreachable_triton_makes_readyz_and_rank_503(model_dir: Path) -> None:
    settings = triton_settings(model_dir, f"127.0.0.1:{free_port()}")
    async with serve_in_process(create_app(settings)) as client:
        ready = await client.get("/readyz")
        rank = await client.post("/rank", json=REQUESTS[0])
    assert ready.status_code == 503 and ready.json()["error"]["type"] == "not_ready"
    assert rank.status_code == 503 and rank.json()["error"]["type"] == "backend_unavailable"


async def test_killing_triton_fails_fast_and_a_restart_brings_the_gateway_back(
    triton: TritonProcess, model_dir: Path
) -> None:
    # No logit cache: the same request after the kill must reach Triton.
    settings = triton_settings(model_dir, triton.grpc_url, ranking={"logit_cache_entries": 0})
    async with serve_in_process(create_app(settings)) as client:
        assert (await client.post("/rank", json=REQUESTS[0])).status_code == 200
        triton.kill()
        ready = await client.get("/readyz")
        # A hang would end at the gateway's Triton timeout as 504; 503 means it failed fast.
        rank = await client.post("/rank", json=REQUESTS[0])
        assert ready.status_code == 503
        assert rank.status_code == 503 and rank.json()["error"]["type"] == "backend_unavailable"

        await asyncio.to_thread(triton.start)
        deadline = time.monotonic() + 30
        while (await client.get("/readyz")).status_code != 200:
            assert time.monotonic() < deadline, "the gateway did not see Triton come back"
            await asyncio.sleep(0.2)
        again = await client.post("/rank", json=REQUESTS[0])
    assert again.status_code == 200, again.text
