"""The HTTP contract on the fake backend: one test per error class, health, metrics, OpenAPI."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

import httpx
import pytest
from helpers import serve_in_process

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.fake import FakeBackend
from dialogue_ranker.serving.errors import ERROR_TABLE
from dialogue_ranker.serving.settings import Settings

BODY = {"context": "could you make some coffee", "candidates": ["sure", "no", "i will make tea"]}


def fake_settings(bundle: Path, **overrides) -> Settings:
    return Settings(backend="fake", model=bundle, **overrides)


def assert_error(response: httpx.Response, status: int, error_type: str, *words: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type
    assert error["request_id"] == response.headers["x-request-id"]
    for word in words:
        assert word in error["message"]
    return error


async def test_rank_returns_every_candidate_best_first(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json=BODY)
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "tiny-fake@1"
    scores = [r["score"] for r in body["ranking"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert body["masked"] == [] and body["statements_used"] == []
    assert body["abstain"] == (scores[0] < body["threshold"])


async def test_top_k_and_min_score_shape_the_answer(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        body = (await client.post("/rank", json={**BODY, "top_k": 1, "min_score": 1.0})).json()
    assert len(body["ranking"]) == 1 and body["abstain"] is True and body["threshold"] == 1.0


async def test_malformed_json_is_a_400(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post(
            "/rank", content=b'{"context": ', headers={"content-type": "application/json"}
        )
    assert_error(response, 400, "malformed_request", "JSON")


async def test_a_wrong_type_is_a_422_naming_the_field(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, "top_k": "three"})
    assert_error(response, 422, "invalid_input", "top_k")


async def test_empty_candidates_are_a_422(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, "candidates": []})
    assert_error(response, 422, "invalid_input", "candidates")


async def test_duplicate_candidate_ids_are_a_422(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, "candidates": [{"id": "a", "text": "x"}] * 2})
    assert_error(response, 422, "invalid_input", "candidates", "duplicate")


async def test_an_out_of_range_value_is_a_422(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, "min_score": 2})
    assert_error(response, 422, "invalid_input", "min_score")


async def test_too_many_candidates_are_a_422(fake_bundle: Path) -> None:
    settings = fake_settings(fake_bundle, limits={"max_candidates": 2})
    async with serve_in_process(create_app(settings)) as client:
        response = await client.post("/rank", json=BODY)
    assert_error(response, 422, "invalid_input", "candidates", "at most 2")


async def test_a_text_over_the_character_limit_is_a_422(fake_bundle: Path) -> None:
    settings = fake_settings(fake_bundle, limits={"max_text_chars": 10})
    async with serve_in_process(create_app(settings)) as client:
        response = await client.post("/rank", json={**BODY, "candidates": ["x" * 11]})
    assert_error(response, 422, "invalid_input", "candidates.0.text")


async def test_a_body_over_the_size_limit_is_a_413(fake_bundle: Path) -> None:
    settings = fake_settings(fake_bundle, limits={"max_body_bytes": 2048})
    async with serve_in_process(create_app(settings)) as client:
        response = await client.post("/rank", json={**BODY, "situations": ["it is morning"] * 300})
    assert_error(response, 413, "payload_too_large", "2048")


async def test_an_unknown_intent_is_a_422_naming_it(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, "intent": "buy_a_spaceship"})
    assert_error(response, 422, "unknown_intent", "intent", "buy_a_spaceship")


async def test_a_full_queue_is_a_429_with_retry_after(fake_bundle: Path) -> None:
    settings = fake_settings(
        fake_bundle,
        fake={"latency_s": 0.3},
        batching={"max_pairs": 1, "queue_max_pairs": 3, "max_wait_s": 0, "workers": 1},
    )
    async with serve_in_process(create_app(settings)) as client:
        # The backend speed is measured (on a candidate BODY lacks: the logit cache would keep it).
        await client.post("/rank", json={**BODY, "candidates": ["maybe"]})
        first = asyncio.create_task(client.post("/rank", json=BODY))
        await asyncio.sleep(0.1)
        response = await client.post("/rank", json=BODY)
        assert (await first).status_code == 200
    assert_error(response, 429, "overloaded", "queue full")
    assert response.headers["retry-after"] == "1"


async def test_a_failing_backend_is_a_502(fake_bundle: Path) -> None:
    settings = fake_settings(fake_bundle, fake={"fail_every_n_batches": 1})
    async with serve_in_process(create_app(settings)) as client:
        response = await client.post("/rank", json=BODY)
    assert_error(response, 502, "backend_error")


async def test_a_backend_slower_than_measured_is_a_504(fake_bundle: Path) -> None:
    settings = fake_settings(fake_bundle, limits={"request_timeout_s": 0.05})
    app = create_app(settings)
    async with serve_in_process(app) as client:
        app.state.runtime.backends[0].latency_s = 0.5  # admitted at the warm-up's speed, then slow
        response = await client.post("/rank", json=BODY)
    assert_error(response, 504, "backend_timeout")


async def test_a_backend_known_to_be_too_slow_for_the_deadline_is_a_fast_429(
    fake_bundle: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = fake_settings(fake_bundle, fake={"latency_s": 0.5}, limits={"request_timeout_s": 0.05})
    async with serve_in_process(create_app(settings)) as client:
        with caplog.at_level(logging.INFO, logger="dialogue_ranker.serving.api.middleware"):
            response = await client.post("/rank", json=BODY, headers={"x-request-id": "slow-1"})
    assert_error(response, 429, "overloaded", "estimated wait")
    # The operator's log says which request was refused, and why.
    assert any(
        "status=429 error=overloaded request_id=slow-1 reason='ranking: estimated wait" in record.getMessage()
        for record in caplog.records
    ), caplog.text


async def test_rank_before_the_model_is_loaded_is_a_503(fake_bundle: Path) -> None:
    app = create_app(fake_settings(fake_bundle))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.post("/rank", json=BODY)
        assert (await client.get("/healthz")).status_code == 200
    assert_error(response, 503, "not_ready")


async def test_readyz_is_503_when_the_backend_does_not_answer(fake_bundle: Path) -> None:
    backend = FakeBackend()
    app = create_app(fake_settings(fake_bundle), backend_factory=lambda settings, spec: backend)
    async with serve_in_process(app) as client:
        assert (await client.get("/readyz")).json()["status"] == "ready"
        backend.healthy = False
        response = await client.get("/readyz")
    assert_error(response, 503, "not_ready")


async def test_an_unknown_route_is_a_404_and_a_wrong_method_a_405(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        assert_error(await client.get("/nowhere"), 404, "not_found")
        assert_error(await client.get("/rank"), 405, "method_not_allowed")


async def test_an_unexpected_error_is_a_plain_500_without_internals(fake_bundle: Path) -> None:
    app = create_app(fake_settings(fake_bundle))

    async def broken(query):
        raise RuntimeError("secret internal detail")

    async with serve_in_process(app, raise_app_exceptions=False) as client:
        app.state.runtime.ranker.rank = broken
        response = await client.post("/rank", json=BODY)
    error = assert_error(response, 500, "internal_error")
    assert "secret" not in error["message"]


async def test_a_client_request_id_is_echoed(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, "top_k": 0}, headers={"x-request-id": "turn-42"})
    assert response.headers["x-request-id"] == "turn-42"
    assert response.json()["error"]["request_id"] == "turn-42"


async def test_metrics_count_requests_candidates_and_batches(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        await client.post("/rank", json=BODY)
        text = (await client.get("/metrics")).text
    assert 'ranker_request_duration_seconds_count{route="/rank",status="200"} 1.0' in text
    assert 'ranker_request_candidates_sum{model="tiny-fake"} 3.0' in text
    assert 'ranker_batch_sequences_sum{model="tiny-fake"} 3.0' in text
    assert 'ranker_batch_candidates_sum{model="tiny-fake"} 3.0' in text
    info = (
        'ranker_model_info{backend="fake",backend_rates="",backend_reason="--backend fake",'
        'backend_selection="forced",calibration="bundle",model="tiny-fake",name="tiny-fake",precision="-",'
        'version="1"}'
    )
    assert f"{info} 1.0" in text


async def test_the_openapi_schema_has_the_three_examples_and_the_limits(fake_bundle: Path) -> None:
    settings = fake_settings(fake_bundle, limits={"max_candidates": 9})
    async with serve_in_process(create_app(settings)) as client:
        spec = (await client.get("/openapi.json")).json()
    body = spec["paths"]["/rank"]["post"]["requestBody"]["content"]["application/json"]
    assert set(body["examples"]) == {"socialbot", "situated", "agent_action"}
    schema_name = body["schema"]["$ref"].rsplit("/", 1)[-1]
    assert spec["components"]["schemas"][schema_name]["properties"]["candidates"]["maxItems"] == 9


@pytest.mark.parametrize("example", ["socialbot", "situated"])
async def test_the_openapi_examples_are_valid_requests(fake_bundle: Path, example: str) -> None:
    from dialogue_ranker.serving.api.examples import RANK_EXAMPLES

    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json=RANK_EXAMPLES[example]["value"])
    assert response.status_code == 200, response.text


async def test_a_405_names_the_allowed_methods(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.get("/rank")
    assert_error(response, 405, "method_not_allowed", "POST")
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
async def test_a_body_that_is_not_json_is_a_415(fake_bundle: Path, content_type: str) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post(
            "/rank", content=b'{"context": "hi"}', headers={"content-type": content_type}
        )
    assert_error(response, 415, "unsupported_media_type", "content-type")


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/vnd.ranker+json"])
async def test_json_media_types_with_parameters_or_suffixes_are_accepted(
    fake_bundle: Path, content_type: str
) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post(
            "/rank", content=json.dumps(BODY), headers={"content-type": content_type}
        )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("field", "value"),
    [("top_k", True), ("select_statements", 0), ("select_statements", "yes"), ("min_score", "0.5")],
)
async def test_fields_are_strictly_typed(fake_bundle: Path, field: str, value: object) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, field: value})
    assert_error(response, 422, "invalid_input", field)


async def test_a_count_without_a_fraction_is_an_integer_as_json_schema_says(fake_bundle: Path) -> None:
    documents = {"query": BODY["context"], "documents": BODY["candidates"]}
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        rank = await client.post("/rank", json={**BODY, "top_k": 2.0})
        rerank = await client.post("/v2/rerank", json={**documents, "top_n": 2.0, "max_tokens_per_doc": 8.0})
        fraction = await client.post("/rank", json={**BODY, "top_k": 2.5})
    assert rank.status_code == rerank.status_code == 200, (rank.text, rerank.text)
    assert len(rank.json()["ranking"]) == len(rerank.json()["results"]) == 2
    assert_error(fraction, 422, "invalid_input", "top_k: Input should be a valid integer")


async def test_the_deadline_header_is_published_as_the_number_it_takes(fake_bundle: Path) -> None:
    app = create_app(fake_settings(fake_bundle))
    async with serve_in_process(app) as client:
        published = (await client.get("/openapi.json")).json()["paths"]["/rank"]["post"]["parameters"]
        taken = await client.post("/rank", json=BODY, headers={"X-Request-Timeout-S": "2.5"})
        null = await client.post("/rank", json=BODY, headers={"X-Request-Timeout-S": "null"})
    (header,) = published
    # No null branch: a header cannot carry JSON's null, and the word "null" is refused.
    assert header["schema"]["type"] == "number" and "anyOf" not in header["schema"]
    assert (header["schema"]["minimum"], header["schema"]["maximum"]) == (0.01, 3600)
    assert taken.status_code == 200, taken.text
    assert_error(null, 422, "invalid_input", "header.X-Request-Timeout-S: Input should be a valid number")


async def test_every_error_status_publishes_the_one_error_body(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        document = (await client.get("/openapi.json")).json()
        invalid = (await client.post("/rank", json={**BODY, "top_k": 0})).json()
    schemas = document["components"]["schemas"]
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    body = response["content"]["application/json"]["schema"]
                    assert body == {"$ref": "#/components/schemas/ErrorOut"}, (method, path, status)
    detail = schemas["ErrorDetailOut"]
    assert set(invalid) == {"error"} and set(invalid["error"]) == set(detail["required"])
    assert set(detail["properties"]["type"]["enum"]) == {t for _, t in ERROR_TABLE.values()}


EMPTY_LOOKING = [
    "\u0000",
    "\u0000\u0001\u007f",
    "\u200b\u200c\u200d",
    "\u0085",
    " \u00a0\u2007\u3000",
    "\ufeff\u2060",
]


@pytest.mark.parametrize("text", EMPTY_LOOKING)
async def test_effectively_empty_texts_are_a_422_and_the_schema_says_so(fake_bundle: Path, text: str) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        response = await client.post("/rank", json={**BODY, "candidates": ["sure", text]})
        spec = (await client.get("/openapi.json")).json()
    assert_error(response, 422, "invalid_input", "candidates.1.text")
    # The published pattern (a JSON Schema validator's view) rejects exactly the same texts.
    candidate_schema = next(v for k, v in spec["components"]["schemas"].items() if "Candidate" in k)
    pattern = candidate_schema["properties"]["text"]["pattern"]
    assert re.search(pattern, text) is None
    assert re.search(pattern, f"{text}ok") and re.search(pattern, "é") and re.search(pattern, "\u4f60")


async def test_docs_are_served_from_local_files_only(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle))) as client:
        page = await client.get("/docs")
        script = await client.get("/docs/static/swagger-ui-bundle.js")
        spec = await client.get("/openapi.json")
    assert page.status_code == 200 and "/docs/static/swagger-ui-bundle.js" in page.text
    assert re.search(r"(src|href)=['\"]https?://", page.text) is None, (
        "the docs page loads from a remote host"
    )
    assert script.status_code == 200 and len(script.content) > 100_000
    assert spec.status_code == 200


async def test_docs_can_be_turned_off(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(fake_settings(fake_bundle, server={"docs": False}))) as client:
        assert_error(await client.get("/docs"), 404, "not_found")
        assert_error(await client.get("/openapi.json"), 404, "not_found")
        assert (await client.post("/rank", json=BODY)).status_code == 200
