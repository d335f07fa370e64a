"""``POST /v1/feedback`` and the request ids of the ranking answers, on the fake backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import serve_in_process
from test_api import BODY, assert_error, fake_settings

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.request_logs.files import log_files


async def test_the_rank_answer_and_the_rerank_id_carry_the_request_id(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        given = await client.post("/rank", json=BODY, headers={"X-Request-ID": "client-7"})
        own = await client.post("/rank", json=BODY)
        rerank = await client.post("/v2/rerank", json={"query": "hi", "documents": ["sure", "no"]})
    assert given.json()["request_id"] == given.headers["x-request-id"] == "client-7"
    assert own.json()["request_id"] == own.headers["x-request-id"]
    assert rerank.json()["id"] == rerank.headers["x-request-id"]


async def test_feedback_without_request_logs_is_a_409_saying_how_to_turn_them_on(
    fake_bundle: Path, tmp_path: Path
) -> None:
    app = create_app(fake_settings(fake_bundle))
    async with serve_in_process(app) as client:
        response = await client.post(
            "/v1/feedback", json={"request_id": "r1", "candidate_id": "0", "label": 1}
        )
        metrics = (await client.get("/metrics")).text
    assert_error(response, 409, "logging_off", "--logs.dir")
    assert 'ranker_feedback_total{outcome="logging_off"} 1.0' in metrics


async def test_feedback_on_a_ranked_candidate_is_accepted_and_matched(
    fake_bundle: Path, tmp_path: Path
) -> None:
    app = create_app(fake_settings(fake_bundle, logs={"dir": tmp_path / "logs"}))
    async with serve_in_process(app) as client:
        ranked = (await client.post("/rank", json=BODY)).json()
        request_id = ranked["request_id"]
        graded = await client.post(
            "/v1/feedback", json={"request_id": request_id, "candidate_id": "2", "label": 2}
        )
        rewarded = await client.post(
            "/v1/feedback", json={"request_id": request_id, "candidate_id": "0", "reward": 0.5}
        )
        elsewhere = await client.post(
            "/v1/feedback", json={"request_id": "x-1", "candidate_id": "0", "label": 0}
        )
        unknown = await client.post(
            "/v1/feedback", json={"request_id": request_id, "candidate_id": "9", "label": 1}
        )
    assert graded.status_code == 202 and graded.json() == {
        "request_id": request_id, "candidate_id": "2", "label": 2, "matched": True
    }  # fmt: skip
    assert rewarded.status_code == 202 and rewarded.json()["label"] == 0.75
    assert elsewhere.status_code == 202 and elsewhere.json()["matched"] is False
    assert_error(unknown, 404, "unknown_candidate", "candidate_id", "'9'")
    assert len(log_files(tmp_path / "logs", "feedback")[0].read_text().splitlines()) == 3


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"candidate_id": "0", "label": 1, "reward": 0.5}, ("label or reward", "both")),
        ({"candidate_id": "0"}, ("label or reward", "neither")),
        ({"candidate_id": "0", "label": 3}, ("label",)),
        ({"candidate_id": "0", "label": 1.5}, ("label",)),
        ({"candidate_id": "0", "label": None}, ("label", "null")),
        ({"candidate_id": "0", "reward": 2}, ("reward", "less than or equal to 1")),
        ({"candidate_id": "0", "reward": "1"}, ("reward",)),
        ({"candidate_id": " ", "label": 1}, ("candidate_id",)),
        ({"candidate_id": "0", "label": 1, "request_id": "no spaces please"}, ("request_id",)),
        ({"label": 1}, ("candidate_id", "required")),
        ({"candidate_id": "0", "label": 1, "comment": "great"}, ("comment",)),
    ],
)
async def test_a_bad_feedback_body_is_a_422_naming_the_field(
    fake_bundle: Path, tmp_path: Path, body: dict, words: tuple[str, ...]
) -> None:
    app = create_app(fake_settings(fake_bundle, logs={"dir": tmp_path / "logs"}))
    async with serve_in_process(app) as client:
        response = await client.post("/v1/feedback", json={"request_id": "r1", **body})
    assert_error(response, 422, "invalid_input", *words)


async def test_feedback_needs_an_api_key_when_keys_are_configured(fake_bundle: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("secret-key\n")
    settings = fake_settings(fake_bundle, logs={"dir": tmp_path / "logs"}, auth={"api_keys_file": keys})
    body = {"request_id": "r1", "candidate_id": "0", "label": 1}
    async with serve_in_process(create_app(settings)) as client:
        refused = await client.post("/v1/feedback", json=body)
        accepted = await client.post(
            "/v1/feedback", json=body, headers={"Authorization": "Bearer secret-key"}
        )
    assert_error(refused, 401, "unauthorized")
    assert accepted.status_code == 202
