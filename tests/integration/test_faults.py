"""Faults, overload and hostile clients against a real ``ranker serve`` on loopback.

The fake backend injects the faults (latency, every n-th call failing, poison pairs); the
sockets are real, so stalled bodies, idle connections, disconnects and malformed HTTP go
through uvicorn and the service's own protocol guards exactly as in production.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from helpers import (
    SHIPPED_MODEL,
    launch_service,
    serve_in_process,
    stop_process,
    wait_ready,
    write_fake_bundle,
)

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.fake import poison_ids
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import load_tokenizer, token_ids

pytestmark = pytest.mark.integration

#: A word of the fake bundle's vocabulary that no other request of these tests uses.
POISON = "refund"
CLEAN_WORDS = ["hello", "sure", "coffee", "tea", "yes", "no", "morning", "kitchen"]


@contextmanager
def service(tmp_path: Path, *args: str) -> Iterator[tuple[str, Path]]:
    """A fake-backend service with extra flags; yields its URL and its log file.

    The logit cache is off: these tests load the backend with repeated bodies, which kept logits
    would answer without it.
    """
    bundle = write_fake_bundle(tmp_path / "bundle")
    log = tmp_path / "server.log"
    flags = ["--backend", "fake", "--model", str(bundle), "--ranking.logit-cache-entries", "0", *args]
    with log.open("wb") as out:
        process, url = launch_service(flags, cwd=tmp_path, stdout=out)
        try:
            wait_ready(url, process)
            yield url, log
        finally:
            stop_process(process)


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def read_until_closed(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started = time.monotonic()
    sock.settimeout(limit_s)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data, time.monotonic() - started
        data += chunk


def status_and_json(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def rank_body(candidates: Sequence[str]) -> dict:
    return {"context": "hello could you make some coffee", "candidates": list(candidates)}


def metric(url: str, name: str, labels: str = "", *, headers: dict[str, str] | None = None) -> float:
    text = httpx.get(f"{url}/metrics", headers=headers).text
    for line in text.splitlines():
        if line.startswith(f"{name}{labels} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_stalled_body_gets_408_and_is_closed_within_the_read_timeout(tmp_path: Path) -> None:
    with service(tmp_path, "--server.read-timeout-s", "1") as (url, _):
        sock = connect(url)
        sock.sendall(
            b"POST /rank HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: 500\r\n\r\n" + b'{"context": "hello", "cand'
        )
        raw, elapsed = read_until_closed(sock, limit_s=5)
        status, body = status_and_json(raw)
        assert status == 408 and body["error"]["type"] == "request_timeout"
        assert elapsed < 2.0


def test_stalled_headers_and_silent_connections_are_closed(tmp_path: Path) -> None:
    with service(tmp_path, "--server.read-timeout-s", "1") as (url, _):
        partial, silent = connect(url), connect(url)
        partial.sendall(b"POST /rank HTTP/1.1\r\nhost: x\r\n")
        raw, elapsed = read_until_closed(partial, limit_s=5)
        assert status_and_json(raw)[0] == 408 and elapsed < 2.0
        _, elapsed = read_until_closed(silent, limit_s=5)
        assert elapsed < 2.0


def test_idle_keep_alive_connections_time_out(tmp_path: Path) -> None:
    with service(tmp_path, "--server.keep-alive-timeout-s", "1") as (url, _):
        sock = connect(url)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        raw, elapsed = read_until_closed(sock, limit_s=5)
        assert raw.startswith(b"HTTP/1.1 200") and 0.9 < elapsed < 2.5


def test_connections_beyond_the_cap_get_a_json_503(tmp_path: Path) -> None:
    with service(tmp_path, "--server.max-connections", "2") as (url, _):
        held = [connect(url), connect(url)]
        extra = connect(url)
        extra.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        raw, _ = read_until_closed(extra, limit_s=5)
        status, body = status_and_json(raw)
        assert status == 503 and body["error"]["type"] == "over_capacity"
        for sock in held:
            sock.close()
        time.sleep(0.2)
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_malformed_http_gets_a_json_400(tmp_path: Path) -> None:
    with service(tmp_path) as (url, _):
        sock = connect(url)
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        raw, _ = read_until_closed(sock, limit_s=5)
        status, body = status_and_json(raw)
        assert status == 400 and body["error"]["type"] == "malformed_request"


def test_a_disconnected_clients_pairs_are_never_computed(tmp_path: Path) -> None:
    args = ("--fake.latency-s", "0.05", "--batching.sub-batch-pairs", "1", "--batching.max-wait-s", "0")
    with service(tmp_path, *args) as (url, _):
        with httpx.Client(timeout=30) as client:
            blocker_body = rank_body([f"{w} {i}" for i in range(2) for w in CLEAN_WORDS])  # 16 pairs
            gone = json.dumps(rank_body([f"sure {i}" for i in range(100)])).encode()

            def block() -> httpx.Response:
                return client.post(f"{url}/rank", json=blocker_body)

            async def scenario() -> httpx.Response:
                blocker = asyncio.create_task(asyncio.to_thread(block))
                await asyncio.sleep(0.2)  # the blocker's pairs are running (about 0.8 s of work)
                sock = connect(url)
                sock.sendall(
                    b"POST /rank HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(gone), gone)
                )
                await asyncio.sleep(0.1)
                sock.close()  # the client goes away while its 100 pairs wait
                return await blocker

            assert asyncio.run(scenario()).status_code == 200
            time.sleep(0.5)
        computed = metric(url, "ranker_computed_sequences_total", '{model="tiny-fake"}')
        dropped = metric(url, "ranker_dropped_sequences_total", '{model="tiny-fake",reason="cancelled"}')
        assert metric(url, "ranker_client_disconnects_total") == 1
        assert dropped >= 95, f"only {dropped} of the gone client's 100 pairs were dropped"
        assert computed <= 16 + 5, f"{computed} pairs computed for 16 live ones"


async def _load(url: str, bodies: list[dict], clients: int) -> list[httpx.Response]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(len(bodies)):
        queue.put_nowait(index)
    responses: list[httpx.Response | None] = [None] * len(bodies)

    async def client_loop(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            index = queue.get_nowait()
            responses[index] = await client.post(f"{url}/rank", json=bodies[index])

    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=clients)) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
    return [r for r in responses if r is not None]


def test_only_requests_holding_a_poison_pair_fail_under_concurrent_load(tmp_path: Path) -> None:
    with service(tmp_path, "--fake.fail-on-text", POISON, "--fake.latency-s", "0.002") as (url, log):
        bodies = []
        for i in range(160):
            candidates = [f"{CLEAN_WORDS[(i + k) % len(CLEAN_WORDS)]} {k}" for k in range(1 + i % 5)]
            if i % 10 == 3:
                candidates[-1] = f"i will {POISON} it"
            bodies.append(rank_body(candidates))
        responses = asyncio.run(_load(url, bodies, clients=16))
        for i, response in enumerate(responses):
            if i % 10 == 3:
                assert response.status_code == 502, response.text
                assert response.json()["error"]["type"] == "backend_error"
            else:
                assert response.status_code == 200, (i, response.text)
        assert httpx.get(f"{url}/readyz").status_code == 200, "poison pairs must not open the breaker"
    lines = log.read_text().splitlines()
    tracebacks = sum(1 for line in lines if line.startswith("Traceback"))
    failures = sum(1 for line in lines if "batch failed" in line)
    assert 0 < failures <= 16 and tracebacks == 1, (failures, tracebacks)


def test_one_backend_call_in_three_failing_fails_no_request(tmp_path: Path) -> None:
    # One call at a time: the fake counts calls across threads, so with calls running side by side a
    # lone sequence's retry could be the next third call too (a fault twice in a row, not a transient
    # one: CI once saw a 502 that way). In sequence, each fault is followed by two good calls.
    with service(tmp_path, "--fake.fail-every-n-batches", "3", "--batching.workers", "1") as (url, _):
        bodies = [rank_body([f"{w} {k}" for k in range(1 + i % 5)]) for i, w in enumerate(CLEAN_WORDS * 10)]
        responses = asyncio.run(_load(url, bodies, clients=16))
        assert [r.status_code for r in responses] == [200] * len(bodies)
        assert metric(url, "ranker_batch_failures_total", '{model="tiny-fake"}') > 0


def test_a_backend_that_keeps_failing_trips_the_breaker_then_recovers(tmp_path: Path) -> None:
    args = ("--fake.fail-on-text", "hello", "--breaker.failure-threshold", "3", "--breaker.cooldown-s", "1")
    with service(tmp_path, *args) as (url, _):
        with httpx.Client(timeout=10) as client:
            for _ in range(3):  # every pair holds the failing text: whole batches fail
                assert client.post(f"{url}/rank", json=rank_body(["sure"])).status_code == 502
            started = time.monotonic()
            refused = client.post(f"{url}/rank", json=rank_body(["sure"]))
            assert refused.status_code == 503 and refused.json()["error"]["type"] == "backend_unavailable"
            assert time.monotonic() - started < 0.5
            assert client.get(f"{url}/readyz").status_code == 503
            time.sleep(1.1)
            assert client.get(f"{url}/readyz").status_code == 200
            clean = {"context": "could you make some tea", "candidates": ["sure"]}
            assert client.post(f"{url}/rank", json=clean).status_code == 200


def test_overload_is_answered_with_fast_429s_and_no_timeouts(tmp_path: Path) -> None:
    # One pair takes 20 ms: about 50 pairs/s. 40 clients each keep a 4-pair request in flight:
    # far more than the 1-second deadline lets the queue hold.
    args = ("--fake.latency-s", "0.02", "--batching.sub-batch-pairs", "1", "--limits.request-timeout-s", "1")
    with service(tmp_path, *args) as (url, _):
        bodies = [rank_body([f"{w} {k}" for k in range(4)]) for w in CLEAN_WORDS * 40]
        asyncio.run(_load(url, bodies[:3], clients=1))  # a warm service has measured its backend
        started = time.monotonic()
        responses = asyncio.run(_load(url, bodies, clients=40))
        elapsed = time.monotonic() - started
        statuses = [r.status_code for r in responses]
        assert set(statuses) <= {200, 429}, sorted(set(statuses))
        assert statuses.count(429) > 0 and statuses.count(200) > 0
        assert all(r.headers["retry-after"].isdigit() for r in responses if r.status_code == 429)
        assert statuses.count(200) * 4 >= 0.5 * 50 * elapsed, "the backend sat idle under overload"


def test_a_client_deadline_header_shortens_the_deadline_and_is_validated(tmp_path: Path) -> None:
    args = ("--fake.latency-s", "0.05", "--batching.sub-batch-pairs", "1")
    with service(tmp_path, *args) as (url, _):
        with httpx.Client(timeout=10) as client:
            client.post(f"{url}/rank", json=rank_body(["sure"]))  # measures the backend speed
            backlog = asyncio.run(_load(url, [rank_body([f"tea {k}" for k in range(20)])], clients=1))
            assert backlog[0].status_code == 200
            for value in ("-1", "5e-324", "soon"):
                bad = client.post(
                    f"{url}/rank", json=rank_body(["sure"]), headers={"X-Request-Timeout-S": value}
                )
                assert (
                    bad.status_code == 422 and "x-request-timeout-s" in bad.json()["error"]["message"].lower()
                )

            async def race() -> tuple[httpx.Response, httpx.Response]:
                async with httpx.AsyncClient(timeout=10) as aclient:
                    slow = asyncio.create_task(
                        aclient.post(f"{url}/rank", json=rank_body([f"tea {k}" for k in range(30)]))
                    )
                    await asyncio.sleep(0.1)
                    hurried = await aclient.post(
                        f"{url}/rank", json=rank_body(["sure"]), headers={"X-Request-Timeout-S": "0.3"}
                    )
                    return hurried, await slow

            hurried, slow = asyncio.run(race())
            assert hurried.status_code == 429 and slow.status_code == 200


def test_api_keys_guard_scoring_and_metrics_and_never_reach_logs_or_metrics(tmp_path: Path) -> None:
    api_key, metrics_key = "k-3f9a1c7e55d04b2a", "m-8d2e6b0f1a9c4e37"
    (tmp_path / "keys").write_text(f"# service keys\n{api_key}\n\nsecond-key-0001\n")
    (tmp_path / "metrics-keys").write_text(f"{metrics_key}\n")
    args = (
        "--auth.api-keys-file",
        str(tmp_path / "keys"),
        "--auth.metrics-keys-file",
        str(tmp_path / "metrics-keys"),
    )
    with service(tmp_path, *args) as (url, log):
        with httpx.Client(timeout=10) as client:
            body = rank_body(["sure"])
            missing = client.post(f"{url}/rank", json=body)
            wrong = client.post(f"{url}/rank", json=body, headers={"Authorization": "Bearer nope"})
            good = client.post(f"{url}/rank", json=body, headers={"Authorization": f"Bearer {api_key}"})
            second = client.post(
                f"{url}/rank", json=body, headers={"Authorization": "Bearer second-key-0001"}
            )
            assert missing.status_code == 401 and missing.json()["error"]["type"] == "unauthorized"
            assert missing.headers["www-authenticate"] == "Bearer"
            assert wrong.status_code == 401 and good.status_code == 200 and second.status_code == 200
            # Unauthenticated garbage is refused before its body is read.
            assert client.post(f"{url}/rank", content=b"{").status_code == 401
            assert client.get(f"{url}/healthz").status_code == 200
            assert client.get(f"{url}/readyz").status_code == 200
            assert client.get(f"{url}/metrics").status_code == 401
            assert (
                client.get(f"{url}/metrics", headers={"Authorization": f"Bearer {api_key}"}).status_code
                == 401
            )
            exposition = client.get(f"{url}/metrics", headers={"Authorization": f"Bearer {metrics_key}"})
            assert exposition.status_code == 200
            assert 'ranker_errors_total{type="unauthorized"}' in exposition.text
        assert api_key not in exposition.text and metrics_key not in exposition.text
    text = log.read_text()
    assert api_key not in text and metrics_key not in text and "nope" not in text


def test_an_unreadable_key_file_stops_the_service_with_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("# no keys yet\n")
    bundle = write_fake_bundle(tmp_path / "bundle")
    process, _ = launch_service(
        ["--backend", "fake", "--model", str(bundle), "--auth.api-keys-file", str(tmp_path / "empty")],
        cwd=tmp_path,
    )
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 1 and "no key in the file" in output and "Traceback" not in output


def test_an_alias_of_no_served_model_stops_the_service_with_a_clear_message(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    process, _ = launch_service(
        ["--backend", "fake", "--model", str(bundle), "--model-alias", "rerank-v3.5=dialogue-minilm-l6"],
        cwd=tmp_path,
    )
    output = process.communicate(timeout=60)[0].decode()
    expected = "--model-alias rerank-v3.5=dialogue-minilm-l6: no served model is called 'dialogue-minilm-l6'"
    assert process.returncode == 1 and expected in output and "Traceback" not in output


async def test_poison_text_fails_its_request_with_the_shipped_bundle_s_tokenizer() -> None:
    """The shipped tokenizer.json pads every encoding to 128: the needle must be the text's own ids."""
    tokenizer = SHIPPED_MODEL / "tokenizer.json"
    needle = poison_ids("POISON", tokenizer)
    assert needle == token_ids(load_tokenizer(tokenizer), ["POISON"])[0] and 0 not in needle
    settings = Settings(
        backend="fake",
        model=SHIPPED_MODEL,
        fake={"fail_on_text": "POISON"},
        ranking={"logit_cache_entries": 0},
    )
    async with serve_in_process(create_app(settings)) as client:
        poisoned = await client.post(
            "/rank", json={"context": "could you help me?", "candidates": ["sure", "POISON in the tea"]}
        )
        clean = await client.post("/rank", json={"context": "could you help me?", "candidates": ["sure"]})
        rerank = await client.post("/v2/rerank", json={"query": "help?", "documents": ["a POISON pill"]})
    assert poisoned.status_code == 502 and poisoned.json()["error"]["type"] == "backend_error"
    assert rerank.status_code == 502 and rerank.json()["error"]["type"] == "backend_error"
    assert clean.status_code == 200, clean.text
