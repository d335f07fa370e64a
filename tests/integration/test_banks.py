"""Banks with the real model: through the ASGI app, and through a real ``ranker serve`` on loopback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from bank_helpers import SUPPORT_BANK, require_retriever, wait_banks_ready, write_bank
from helpers import launch_service, serve_in_process, stop_process, wait_ready, write_fake_bundle

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration

#: A small bank of replies from several kinds of system; the README's request is answered from it.
HOME_BANK = [
    {"id": "window", "text": "Shall I open the window for you?", "generator": "retrieval"},
    {"id": "fan", "text": "I can bring the fan from the closet.", "generator": "retrieval"},
    {"id": "pizza", "text": "Pizza is great.", "generator": "llm"},
    {"id": "card", "text": "Your card has been blocked for your safety.", "action": "freeze-card"},
    {"id": "weather", "text": "It will rain in Paris tomorrow."},
    {"id": "jazz", "text": "I love old jazz records."},
    {"id": "refund", "text": "I have issued a refund to your card.", "action": "issue-refund"},
    {"id": "bye", "text": "Goodbye, have a nice day!", "generator": "template"},
]
HOT = {
    "context": [{"speaker": "user", "text": "It is so hot in here, can you help?"}],
    "situations": ["The window is closed.", "There is a fan in the closet."],
    "bank": "home",
    "retrieve_k": 4,
}

PASSWORD = {"context": "I forgot my password.", "bank": "support", "retrieve_k": 3, "candidates": ["Hi"]}


@pytest.fixture
def home_bank(tmp_path: Path) -> Path:
    require_retriever()
    return write_bank(tmp_path / "home.jsonl", HOME_BANK)


async def test_the_real_model_ranks_a_bank_and_the_request_own_candidates(
    model_dir: Path, home_bank: Path
) -> None:
    settings = Settings(backend="onnx", model=model_dir, bank=[f"home={home_bank}"])
    async with serve_in_process(create_app(settings)) as client:
        await wait_banks_ready(client)
        body = {**HOT, "candidates": [{"id": "own", "text": "I do not know.", "generator": "template"}]}
        answer = (await client.post("/rank", json=body)).json()
        unrelated = {**HOT, "context": "Can you translate this sentence into German?", "situations": []}
        abstained = (await client.post("/rank", json=unrelated)).json()
    ranking = answer["ranking"]
    assert len(ranking) == 5 and {r["bank"] for r in ranking} == {"home", None}
    assert ranking[0]["id"] in {"window", "fan"} and ranking[0]["bank"] == "home"
    assert answer["abstain"] is False and ranking[0]["score"] >= answer["threshold"]
    assert next(r for r in ranking if r["id"] == "own")["score"] < ranking[0]["score"]
    # Nothing in the bank answers a translation request: calibrated scores stay low, the answer abstains.
    best = max(r["score"] for r in abstained["ranking"])
    assert abstained["abstain"] is True and best < abstained["threshold"]


def test_a_served_bank_is_ready_after_start_and_read_from_the_cache_after_a_restart(
    model_dir: Path, tmp_path: Path
) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    require_retriever()
    args = ["--model", str(model_dir), "--backend", "onnx", "--bank", f"support={bank}"]
    listed = []
    for _ in range(2):
        process, base_url = launch_service(args, cwd=tmp_path)
        try:
            wait_ready(base_url, process)
            listed.append(httpx.get(f"{base_url}/v1/banks", timeout=10).json()["data"][0])
            response = httpx.post(f"{base_url}/rank", json=PASSWORD, timeout=30)
        finally:
            stop_process(process)
        output = process.stdout.read().decode() if process.stdout else ""
        assert response.status_code == 200, response.text
        ids = {r["id"] for r in response.json()["ranking"] if r["bank"] == "support"}
        assert {"reset-link", "reset-steps"} <= ids and len(ids) == 3
    assert [entry["from_cache"] for entry in listed] == [False, True]
    assert "bank ready bank=support responses=8 source=cache" in output
    assert "password" not in output, "request text reached the logs"


def run_serve(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    process, _ = launch_service(args, cwd=cwd)
    try:
        output = process.communicate(timeout=60)[0].decode()
    finally:
        if process.poll() is None:
            stop_process(process)
    return subprocess.CompletedProcess(args, process.returncode, output)


def test_a_bad_bank_file_stops_the_start_with_its_line_and_field_and_no_traceback(
    model_dir: Path, tmp_path: Path
) -> None:
    bank = write_bank(tmp_path / "faq.jsonl", [{"id": "a", "text": "Hello."}, {"id": "b", "txt": "Bye."}])
    ended = run_serve(["--model", str(model_dir), "--backend", "onnx", "--bank", f"faq={bank}"], tmp_path)
    assert ended.returncode != 0
    assert f"bank 'faq': {bank}:2: text: Field required" in ended.stdout
    assert "Traceback" not in ended.stdout


def test_a_bank_without_a_retrieval_encoder_stops_the_start(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    bank = write_bank(tmp_path / "faq.jsonl", [{"id": "a", "text": "Hello."}])
    ended = run_serve(["--backend", "fake", "--model", str(bundle), "--bank", f"faq={bank}"], tmp_path)
    assert ended.returncode != 0 and "Traceback" not in ended.stdout
    assert f"--bank needs a retrieval encoder and {bundle} has none" in ended.stdout
