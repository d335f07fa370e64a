"""Live bank updates with the real model, through a real ``ranker serve`` on loopback (API keys on).

One server for the module; each test writes the bank file it starts from and reloads it first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from bank_helpers import require_retriever, write_bank
from helpers import launch_service, stop_process, wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "reload-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
BANK = "home"
#: Replies a home assistant might give; the first version's ids start with ``a-``.
TEXTS = [
    "Shall I open the window for you?",
    "I can bring the fan from the closet.",
    "The air conditioning is now on.",
    "I lowered the heating by two degrees.",
    "Would you like a glass of cold water?",
    "I closed the curtains to keep the sun out.",
    "Pizza is great.",
    "It will rain in Paris tomorrow.",
    "I love old jazz records.",
    "Your card has been blocked for your safety.",
    "I have issued a refund to your card.",
    "Goodbye, have a nice day!",
]
#: The second version: the last six texts replaced, ids starting with ``b-`` (the vectors follow the texts).
NEW_TEXTS = [
    *TEXTS[:6],
    "The fridge is out of milk.",
    "I booked a table for two at eight.",
    "Your taxi arrives in five minutes.",
    "The garage door is locked.",
    "I turned the lights off downstairs.",
    "Your sister called this morning.",
]
HOT = {"context": "It is so hot in here, can you help?", "bank": BANK, "retrieve_k": 4}
#: Replies the steady-traffic test adds to each version, so that its reload embeds for a while (400
#: new texts: about a second) and requests arrive while it does.
FILLER = 400


def filler(version: str) -> list[str]:
    return [
        f"Note {n} of the {version} house log: the {version} shelf number {n} was dusted."
        for n in range(FILLER)
    ]


def rows(prefix: str, texts: list[str]) -> list[dict[str, str]]:
    return [{"id": f"{prefix}-{i}", "text": text} for i, text in enumerate(texts)]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    bank: Path
    log: Path

    def post(self, path: str, **kwargs) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", headers=AUTH, timeout=60, **kwargs)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", headers=AUTH, timeout=30)

    def serve(self, lines: list) -> dict:
        """Write the bank file (renamed into place) and reload it; the reload's answer."""
        write_bank(self.bank.with_suffix(".new"), lines)
        os.replace(self.bank.with_suffix(".new"), self.bank)
        response = self.post(f"/v1/banks/{BANK}/reload")
        assert response.status_code == 200, response.text
        return response.json()

    def rank(self, body: dict) -> dict:
        response = self.post("/rank", json=body)
        assert response.status_code == 200, response.text
        return response.json()


def without_request_id(answer: dict) -> dict:
    """An answer without its request id, which differs from request to request."""
    return {k: v for k, v in answer.items() if k != "request_id"}


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_retriever()
    directory = tmp_path_factory.mktemp("reload")
    bank = write_bank(directory / "home.jsonl", rows("a", TEXTS))
    keys = directory / "keys.txt"
    keys.write_text(f"{KEY}\n")
    log = directory / "server.log"
    args = ["--model", str(model_dir), "--backend", "onnx", "--bank", f"{BANK}={bank}",
            "--auth.api-keys-file", str(keys), "--banks.cache-dir", str(directory / "cache")]  # fmt: skip
    with log.open("wb") as out:
        process, url = launch_service(args, cwd=directory, stdout=out)
    try:
        wait_ready(url, process)
        yield Server(process, url, bank, log)
    finally:
        stop_process(process)


def bank_ids(answer: dict) -> set[str]:
    return {entry["id"] for entry in answer["ranking"] if entry["bank"] == BANK}


@dataclass(frozen=True)
class Sent:
    sent_at: float
    done_at: float
    status: int
    ids: frozenset[str]


def steady_clients(server: Server, stop: threading.Event, *, threads: int = 3, every_s: float = 0.15):
    """Threads sending bank requests at a steady pace until ``stop``; the list they append to."""
    sent: list[Sent] = []
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as http:
            next_at = time.monotonic()
            while not stop.is_set():
                started = time.monotonic()
                try:
                    response = http.post("/rank", json=HOT)
                    status = response.status_code
                    ids = frozenset(bank_ids(response.json())) if status == 200 else frozenset()
                except httpx.HTTPError:
                    status, ids = 0, frozenset()
                with lock:
                    sent.append(Sent(started, time.monotonic(), status, ids))
                next_at += every_s
                time.sleep(max(0.0, next_at - time.monotonic()))

    workers = [threading.Thread(target=client) for _ in range(threads)]
    for worker in workers:
        worker.start()
    return sent, workers


def test_a_reload_under_steady_traffic_fails_no_request_and_switches_to_the_new_texts(server: Server) -> None:
    server.serve(rows("a", [*TEXTS, *filler("old")]))
    stop = threading.Event()
    sent, workers = steady_clients(server, stop)
    try:
        time.sleep(1.5)
        reload_started = time.monotonic()
        reloaded = server.serve(rows("b", [*NEW_TEXTS, *filler("new")]))
        reload_done = time.monotonic()
        time.sleep(1.5)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert [s for s in sent if s.status != 200] == []
    # Each answer comes from one version whole: all its bank ids are of the old file or all of the new.
    versions = [{i.split("-")[0] for i in s.ids} for s in sent]
    assert all(len(v) == 1 for v in versions), versions
    before = [v for s, v in zip(sent, versions, strict=True) if s.done_at < reload_started]
    after = [v for s, v in zip(sent, versions, strict=True) if s.sent_at > reload_done]
    during = [s for s in sent if reload_started < s.sent_at < reload_done]
    assert before and all(v == {"a"} for v in before)
    assert after and all(v == {"b"} for v in after)
    assert during, "no request was served while the reload embedded"
    assert (reloaded["last_load"]["embedded"], reloaded["last_load"]["reused"]) == (6 + FILLER, 6)


def test_an_unchanged_file_reloads_with_nothing_embedded_and_ranks_byte_for_byte_the_same(
    server: Server,
) -> None:
    first = server.serve(rows("b", NEW_TEXTS))
    body = {**HOT, "retrieve_k": 8, "candidates": [{"id": "own", "text": "I do not know."}]}
    ranked = server.rank(body)["ranking"]
    again = server.serve(rows("b", NEW_TEXTS))
    ranked_again = server.rank(body)["ranking"]
    assert again["version"] == first["version"] and again["last_load"]["embedded"] == 0
    assert again["last_load"]["reused"] == len(NEW_TEXTS)
    assert json.dumps(ranked_again).encode() == json.dumps(ranked).encode()


def test_k_changed_texts_embed_exactly_k(server: Server) -> None:
    server.serve(rows("b", NEW_TEXTS))
    before = embedded_total(server)
    changed = [
        *NEW_TEXTS[:-3],
        "The dishwasher has finished.",
        "The plants were watered.",
        "It is 21 degrees.",
    ]
    reloaded = server.serve(rows("b", changed))
    assert (reloaded["last_load"]["embedded"], reloaded["last_load"]["reused"]) == (3, len(changed) - 3)
    assert embedded_total(server) == before + 3


def embedded_total(server: Server) -> float:
    metrics = server.get("/metrics").text
    line = next(line for line in metrics.splitlines() if line.startswith("ranker_bank_embedded_texts_total{"))
    return float(line.rsplit(" ", 1)[1])


def test_a_bad_file_keeps_the_old_bank_serving_and_the_answer_names_file_line_and_field(
    server: Server,
) -> None:
    served = server.serve(rows("b", NEW_TEXTS))
    ranked = server.rank(HOT)
    lines = [*rows("c", TEXTS[:2]), {"id": "c-2", "text": 42}, *rows("d", TEXTS[3:])]
    write_bank(server.bank.with_suffix(".new"), lines)
    os.replace(server.bank.with_suffix(".new"), server.bank)
    refused = server.post(f"/v1/banks/{BANK}/reload")
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_bank_file" and set(error) == {"type", "message", "request_id"}
    assert f"{server.bank}:3: text: Input should be a valid string" in error["message"]
    listed = server.get(f"/v1/banks/{BANK}").json()
    assert listed["version"] == served["version"] and listed["last_load"]["outcome"] == "failed"
    assert without_request_id(server.rank(HOT)) == without_request_id(ranked)
    assert server.get("/readyz").status_code == 200


def test_sighup_reloads_every_bank(server: Server) -> None:
    served = server.serve(rows("b", NEW_TEXTS))
    write_bank(server.bank.with_suffix(".new"), rows("e", TEXTS))
    os.replace(server.bank.with_suffix(".new"), server.bank)
    server.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 60
    listed = served
    while time.monotonic() < deadline and listed["version"] == served["version"]:
        time.sleep(0.1)
        listed = server.get(f"/v1/banks/{BANK}").json()
    assert listed["version"] != served["version"] and listed["last_load"]["trigger"] == "signal"
    assert server.process.poll() is None, "SIGHUP ended the server"
    assert bank_ids(server.rank(HOT)) <= {f"e-{i}" for i in range(len(TEXTS))}
    for _ in range(50):  # the summary line follows the reload
        if "SIGHUP: banks reloaded home=ok" in server.log.read_text():
            break
        time.sleep(0.1)
    assert "SIGHUP: banks reloaded home=ok" in server.log.read_text()


def test_the_bank_routes_need_an_api_key(server: Server) -> None:
    reload = httpx.post(f"{server.url}/v1/banks/{BANK}/reload", timeout=30)
    listed = httpx.get(f"{server.url}/v1/banks/{BANK}", timeout=30)
    wrong = httpx.post(
        f"{server.url}/v1/banks/{BANK}/reload", headers={"Authorization": "Bearer x"}, timeout=30
    )
    assert [r.status_code for r in (reload, listed, wrong)] == [401, 401, 401]
    assert reload.json()["error"]["type"] == "unauthorized"
    assert server.post(f"/v1/banks/{BANK}/reload").status_code == 200
