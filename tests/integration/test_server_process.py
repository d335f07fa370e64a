"""A real ``ranker serve`` uvicorn process on a loopback port."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from helpers import launch_service, real_model_dir, wait_ready, write_fake_bundle

pytestmark = pytest.mark.integration

SHUTDOWN_TIMEOUT_S = 10


def start_server(tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``ranker serve`` on a free loopback port (the real model when present, else fake)."""
    model = real_model_dir()
    args = (
        ["--model", str(model)]
        if model
        else ["--backend", "fake", "--model", str(write_fake_bundle(tmp_path))]
    )
    # Started from another directory: the default paths must not depend on the cwd.
    return launch_service(args, cwd=tmp_path)


def test_a_uvicorn_process_on_loopback_serves_rank(tmp_path: Path) -> None:
    process, base_url = start_server(tmp_path)
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


def test_sigterm_shuts_the_server_down_gracefully(tmp_path: Path) -> None:
    # SIGTERM is what `docker stop` and Kubernetes send: uvicorn stops serving, runs the app's
    # shutdown, then re-raises the signal so that a parent sees how the process ended. Here that is
    # -SIGTERM; as a container's PID 1 the kernel drops a self-sent default-action signal and the
    # process exits 0.
    process, base_url = start_server(tmp_path)
    try:
        wait_ready(base_url, process)
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=SHUTDOWN_TIMEOUT_S)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == -signal.SIGTERM, output[-2000:]
    assert "Application shutdown complete" in output and "Finished server process" in output
