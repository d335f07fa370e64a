"""Test helpers: a tiny word-level tokenizer and model bundle, and an in-process client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from dialogue_ranker.serving.list_encoding import ListEncoder

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
ABCD_KB = SHARED_DATA / "abcd" / "kb.json"
SHIPPED_MODEL = REPO_ROOT / "models" / "dialogue-minilm-l6"

WORDS = (
    "hi hello could you make some coffee tea sure no yes the is it a i will brewing now sorry "
    "morning kitchen machine sister password account order refund one moment please thanks"
).split()


def write_tiny_tokenizer(path: Path) -> Path:
    """A whitespace word-level tokenizer.json with BERT special tokens."""
    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS, ":", ",", ".", "?"])}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(path))
    return path


def tiny_list_encoder(directory: Path, *, similarity: int = 0) -> ListEncoder:
    """A shared-prefix ``ListEncoder`` on the tiny tokenizer (with the similarity term when asked):
    3 candidates a sequence of at most 30 tokens, candidates cut to 6, the prefix to 16."""
    return ListEncoder.from_file(
        write_tiny_tokenizer(directory / "tok.json"),
        max_prefix_tokens=16,
        max_candidate_tokens=6,
        max_chunk_tokens=30,
        max_chunk_candidates=3,
        similarity=similarity,
    )


def write_fake_bundle(directory: Path, *, threshold: float = 0.5) -> Path:
    """A bundle directory for the fake backend (the ONNX files are empty placeholders)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_tiny_tokenizer(directory / "tokenizer.json")
    (directory / "model.onnx").write_bytes(b"")
    meta: dict[str, Any] = {
        "name": "tiny-fake",
        "version": "1",
        "max_length": 64,
        "ranker": {"file": "model.onnx"},
        "calibration": {"method": "platt", "a": 1.0, "b": 0.0},
        "threshold": threshold,
    }
    (directory / "metadata.json").write_text(json.dumps(meta))
    return directory


def real_model_dir() -> Path | None:
    """``$RANKER_TEST_MODEL`` when set, else the shipped model, else None.

    The variable wins: it is how a suite is run on another bundle (a candidate model, an export
    option), and a run that silently fell back to the shipped model would report its results.
    """
    env = os.environ.get("RANKER_TEST_MODEL")
    if env:
        path = Path(env)
        path = path if path.is_absolute() else REPO_ROOT / path
        if not (path / "metadata.json").is_file():
            raise FileNotFoundError(f"RANKER_TEST_MODEL={env}: no bundle there (no metadata.json)")
        return path
    if (SHIPPED_MODEL / "metadata.json").is_file():
        return SHIPPED_MODEL
    return None


@asynccontextmanager
async def serve_in_process(
    app: FastAPI, *, raise_app_exceptions: bool = True
) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the app's ASGI interface, inside the app's lifespan."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://ranker.test", timeout=30
        ) as client:
            yield client


SERVER_STARTUP_TIMEOUT_S = 60


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """``count`` different free ports (the OS may hand a just-released port out again)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def wait_ready(base_url: str, process: subprocess.Popen) -> None:
    """Block until ``/readyz`` answers 200; fail with the server's output if it exits first."""
    deadline = time.monotonic() + SERVER_STARTUP_TIMEOUT_S
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


def launch_service(
    args: Sequence[str], *, cwd: Path, stdout: Any = subprocess.PIPE
) -> tuple[subprocess.Popen[bytes], str]:
    """``ranker serve`` on a free loopback port with one ONNX thread; the process and its URL.

    Its stderr goes where its stdout goes (a pipe by default; a file for a long run, since a
    pipe nobody reads fills and stalls the server).
    """
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src"), "RANKER_ONNX__INTRA_OP_THREADS": "1"}
    # The `ranker` command's own entry point, run by this interpreter: `ranker serve ...`.
    command = [sys.executable, "-m", "dialogue_ranker.cli", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), *args]
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


def stop_process(process: subprocess.Popen, *, timeout_s: float = 20) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within ``timeout_s``."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def persona_slice_lists(shared_data: Path, work: Path, conversations: int, negatives: str) -> Path:
    """The first ``conversations`` of Synthetic-Persona-Chat's test file as ranking lists (a team's own).

    Converted with ``ranker convert persona-chat`` (no retriever, so no ``retrieved`` negatives);
    skips the calling test where the shared data is absent.
    """
    import gzip

    import pytest

    from dialogue_ranker.training import convert

    source = shared_data / "synthetic_persona_chat" / "spc_test.jsonl.gz"
    if not source.is_file():
        pytest.skip(f"{source} is absent")
    with gzip.open(source, "rt") as rows:
        head = [next(rows) for _ in range(conversations)]
    with gzip.open(work / "slice.jsonl.gz", "wt") as out:
        out.writelines(head)
    path = work / "persona-chat.jsonl"
    convert.main(["persona-chat", str(work / "slice.jsonl.gz"), str(path), "--negatives", negatives])
    return path


def tiny_train_flags(sugar: Path, out: Path) -> list[str]:
    """``ranker train`` flags for a tiny real run on the packaged backbone: SUGAR lists, five steps
    over two epochs, one thread (so that two runs agree bit for bit), a checkpoint every two steps."""
    return [
        "--data", str(sugar), "--out", str(out), "--limit", "8", "--dev-lists", "4", "--batch-lists", "2",
        "--epochs", "2", "--max-steps", "5", "--max-prefix-tokens", "64", "--max-candidate-tokens", "16",
        "--threads", "1", "--checkpoint-every", "2",
    ]  # fmt: skip
