"""A real ``python -m service`` uvicorn process on a loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers import REPO_ROOT, real_model_dir, write_fake_bundle

pytestmark = pytest.mark.integration

STARTUP_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(base_url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode() if process.stdout else ""
            raise AssertionError(f"server exited with {process.returncode}: {output[-2000:]}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("server did not become ready")


def test_a_uvicorn_process_on_loopback_serves_rank(tmp_path: Path) -> None:
    model = real_model_dir()
    args = (
        ["--model", str(model)]
        if model
        else ["--backend", "fake", "--model", str(write_fake_bundle(tmp_path))]
    )
    port = free_port()
    # Started from another directory: the default paths must not depend on the cwd.
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RANKER_ONNX__INTRA_OP_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base_url, process)
        response = httpx.post(
            f"{base_url}/rank", json={"context": "hi", "candidates": ["hello", "sure"]}, timeout=10
        )
        bad = httpx.post(f"{base_url}/rank", content=b"{", headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text
        assert len(response.json()["ranking"]) == 2
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "malformed_request"
    finally:
        process.terminate()
        output = process.communicate(timeout=20)[0].decode()
    assert "hello" not in output, "request text reached the logs"
