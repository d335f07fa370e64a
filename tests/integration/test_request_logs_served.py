"""Request and feedback logs through a real ``ranker serve`` process on loopback, read back by the join.

The fake backend scores: what is under test is the HTTP path, the writer thread, the files and
the reader, not the model.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from helpers import launch_service, stop_process, wait_ready, write_fake_bundle

from dialogue_ranker.data.feedback_logs import join_logs
from dialogue_ranker.serving.request_logs.files import log_files

pytestmark = pytest.mark.integration

KEY = "team-key-1"
AUTH = {"Authorization": f"Bearer {KEY}"}
#: Three turns of a conversation, each ranked, with the candidates a client sent.
TURNS = [
    ("could you make some coffee", ["sure , brewing now", "no", "i will make tea"]),
    ("my sister is in the kitchen", ["good morning sister", "sorry", "one moment please"]),
    ("thanks", ["you are welcome", "no"]),
]


def serve(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    bundle = write_fake_bundle(tmp_path / "bundle")
    process, url = launch_service(["--backend", "fake", "--model", str(bundle), *flags], cwd=tmp_path)
    wait_ready(url, process)
    return process, url


def test_logs_are_off_by_default_and_feedback_says_so(tmp_path: Path) -> None:
    process, url = serve(tmp_path)
    try:
        ranked = httpx.post(
            f"{url}/rank", json={"context": "hi", "candidates": ["hello", "sure"]}, timeout=10
        )
        feedback = httpx.post(
            f"{url}/v1/feedback",
            json={"request_id": ranked.json()["request_id"], "candidate_id": "0", "label": 2},
            timeout=10,
        )
    finally:
        stop_process(process)
    assert ranked.status_code == 200
    assert feedback.status_code == 409 and feedback.json()["error"]["type"] == "logging_off"
    written = [p for p in tmp_path.rglob("*.jsonl")]
    assert written == [], f"logs off, yet {written}"


def test_ranked_requests_and_feedback_come_back_as_the_labelled_lists_sent(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KEY}\n")
    # 1 KB a file: a request line is 500 to 900 bytes with its texts, so the files rotate.
    process, url = serve(
        tmp_path, "--logs.dir", str(logs), "--logs.texts", "--logs.max-bytes", "1024",
        "--logs.max-files", "10", "--auth.api-keys-file", str(keys),
    )  # fmt: skip
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as client:
            ids = []
            for text, candidates in TURNS:
                body = {"context": text, "candidates": candidates, "conversation_id": "chat-1"}
                ids.append(client.post("/rank", json=body).json()["request_id"])
            unjudged = client.post("/rank", json={"context": "hi", "candidates": ["hello"]}).json()[
                "request_id"
            ]
            sent = [
                {"request_id": ids[0], "candidate_id": "0", "label": 2},
                {"request_id": ids[0], "candidate_id": "1", "label": 1},
                {"request_id": ids[0], "candidate_id": "1", "label": 0},  # the last judgement wins
                {"request_id": ids[1], "candidate_id": "2", "reward": 0.5},
                {"request_id": ids[2], "candidate_id": "1", "label": 0.2},
            ]
            answers = [client.post("/v1/feedback", json=body) for body in sent]
            unknown = client.post(
                "/v1/feedback", json={"request_id": ids[2], "candidate_id": "7", "label": 1}
            )
            both = client.post(
                "/v1/feedback", json={"request_id": ids[2], "candidate_id": "1", "label": 1, "reward": 1}
            )
            out_of_range = client.post(
                "/v1/feedback", json={"request_id": ids[2], "candidate_id": "1", "reward": 3}
            )
        no_key = httpx.post(f"{url}/v1/feedback", json=sent[0], timeout=10)
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
    finally:
        stop_process(process)  # the writer writes what is queued, then closes the files

    assert [a.status_code for a in answers] == [202] * 5 and all(a.json()["matched"] for a in answers)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "unknown_candidate"
    assert both.status_code == 422 and "label or reward" in both.json()["error"]["message"]
    assert out_of_range.status_code == 422 and "reward" in out_of_range.json()["error"]["message"]
    assert no_key.status_code == 401
    assert 'ranker_feedback_total{outcome="matched"} 5.0' in metrics
    assert 'ranker_log_lines_total{kind="requests"} 4.0' in metrics

    assert len(log_files(logs, "requests")) >= 2, "a tiny --logs.max-bytes rotates the request files"
    joined = join_logs(logs)
    assert (joined.requests, joined.judgements, joined.unmatched) == (4, 5, 0)
    assert unjudged not in {lst.group for lst in joined.lists} and len(joined.lists) == 3
    got = [(lst.group, [(c.text, c.label) for c in lst.candidates]) for lst in joined.lists]
    assert got == [
        ("chat-1", [("sure , brewing now", 2), ("no", 0)]),
        ("chat-1", [("one moment please", 0.75)]),
        ("chat-1", [("no", 0.2)]),
    ]
    assert [lst.context[0].text for lst in joined.lists] == [text for text, _ in TURNS]


def test_a_logs_directory_that_cannot_be_written_stops_the_service_with_a_clear_message(
    tmp_path: Path,
) -> None:
    (tmp_path / "taken").write_text("a file, not a directory\n")
    bundle = write_fake_bundle(tmp_path / "bundle")
    process, _ = launch_service(
        ["--backend", "fake", "--model", str(bundle), "--logs.dir", str(tmp_path / "taken" / "logs")],
        cwd=tmp_path,
    )
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 1 and "--logs.dir" in output and "cannot be written" in output
    assert "Traceback" not in output
