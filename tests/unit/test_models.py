"""Several models in one process: selection by name, listing, per-model metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import serve_in_process, write_fake_bundle
from pydantic import ValidationError

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.model_bundle import BundleError
from dialogue_ranker.serving.runtime import AliasError
from dialogue_ranker.serving.settings import Settings

BODY = {"context": "could you make some coffee", "candidates": ["sure", "no", "i will make tea"]}


def two_bundles(tmp_path: Path) -> tuple[Path, Path]:
    first = write_fake_bundle(tmp_path / "first")
    second = write_fake_bundle(tmp_path / "second", threshold=0.9)
    meta = json.loads((second / "metadata.json").read_text())
    meta.update(
        name="tiny-fake-b",
        version="2",
        calibration={"method": "platt", "a": 2.0, "b": -1.0},
        views={"last_turn_weight": 0.5},
    )
    (second / "metadata.json").write_text(json.dumps(meta))
    return first, second


async def test_two_models_are_served_listed_and_chosen_by_name(tmp_path: Path) -> None:
    first, second = two_bundles(tmp_path)
    settings = Settings(backend="fake", model=[f"control={first}", f"candidate={second}"])
    async with serve_in_process(create_app(settings)) as client:
        listing = (await client.get("/v1/models")).json()
        default = (await client.post("/rank", json=BODY)).json()
        control = (await client.post("/rank", json={**BODY, "model": "control"})).json()
        candidate = (await client.post("/rank", json={**BODY, "model": "candidate"})).json()
        rerank = (
            await client.post(
                "/v2/rerank",
                json={"model": "candidate", "query": BODY["context"], "documents": BODY["candidates"]},
            )
        ).json()
        unknown = await client.post("/rank", json={**BODY, "model": "other"})
        metrics = (await client.get("/metrics")).text
    assert [m["id"] for m in listing["data"]] == ["control", "candidate"]
    assert [m["default"] for m in listing["data"]] == [True, False]
    second_entry = listing["data"][1]
    assert second_entry["model"] == "tiny-fake-b@2" and second_entry["threshold"] == 0.9
    assert second_entry["calibration"] == {"method": "platt", "a": 2.0, "b": -1.0}
    assert second_entry["max_length"] == 64 and "selector" not in second_entry
    assert [m["last_turn_weight"] for m in listing["data"]] == [0.0, 0.5]
    assert default["model"] == control["model"] == "tiny-fake@1"
    assert candidate["model"] == "tiny-fake-b@2" and candidate["threshold"] == 0.9
    assert rerank["model"] == "tiny-fake-b@2"
    # Same fake logits, different calibration: the models really differ.
    assert {r["id"]: r["logit"] for r in control["ranking"]} == {
        r["id"]: r["logit"] for r in candidate["ranking"]
    }
    assert control["ranking"][0]["score"] != candidate["ranking"][0]["score"]
    assert unknown.status_code == 422 and "model" in unknown.json()["error"]["message"]
    assert 'ranker_request_candidates_sum{model="control"} 6.0' in metrics
    assert 'ranker_request_candidates_sum{model="candidate"} 6.0' in metrics
    assert 'ranker_batch_sequences_sum{model="candidate"}' in metrics


async def test_a_plain_directory_is_served_under_the_bundles_name(tmp_path: Path) -> None:
    first, second = two_bundles(tmp_path)
    async with serve_in_process(create_app(Settings(backend="fake", model=f"{first},{second}"))) as client:
        listing = (await client.get("/v1/models")).json()
    assert [m["id"] for m in listing["data"]] == ["tiny-fake", "tiny-fake-b"]


async def test_the_listing_says_when_the_last_turn_view_is_switched_off(tmp_path: Path) -> None:
    _, second = two_bundles(tmp_path)
    settings = Settings(backend="fake", model=str(second), ranking={"last_turn_view": False})
    async with serve_in_process(create_app(settings)) as client:
        listing = (await client.get("/v1/models")).json()
    assert listing["data"][0]["last_turn_weight"] == 0.0


async def test_two_models_under_one_name_fail_at_start(tmp_path: Path) -> None:
    first, _ = two_bundles(tmp_path)
    app = create_app(Settings(backend="fake", model=[str(first), str(first)]))
    with pytest.raises(BundleError, match="two models are served as 'tiny-fake'"):
        async with serve_in_process(app):
            pass


def test_the_triton_backend_takes_one_model(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="triton backend serves one model"):
        Settings(backend="triton", model=["a=/x", "b=/y"])


async def test_an_alias_is_listed_and_accepted_by_every_route(tmp_path: Path) -> None:
    first, second = two_bundles(tmp_path)
    settings = Settings(
        backend="fake",
        model=[str(first), str(second)],
        model_alias=["rerank-v3.5=tiny-fake-b", "ranker=tiny-fake"],
    )
    rerank = {"model": "rerank-v3.5", "query": BODY["context"], "documents": BODY["candidates"]}
    async with serve_in_process(create_app(settings)) as client:
        listing = (await client.get("/v1/models")).json()["data"]
        by_name = (await client.post("/rank", json={**BODY, "model": "tiny-fake-b"})).json()
        by_alias = (await client.post("/rank", json={**BODY, "model": "rerank-v3.5"})).json()
        v2 = (await client.post("/v2/rerank", json=rerank)).json()
        v1 = (await client.post("/v1/rerank", json=rerank)).json()
        unknown = await client.post("/v2/rerank", json={**rerank, "model": "rerank-english-v3.0"})
    assert [(m["id"], m["alias_of"], m["default"]) for m in listing] == [
        ("tiny-fake", None, True),
        ("tiny-fake-b", None, False),
        ("rerank-v3.5", "tiny-fake-b", False),
        ("ranker", "tiny-fake", False),
    ]
    assert {k: v for k, v in listing[2].items() if k not in ("id", "alias_of")} == {
        k: v for k, v in listing[1].items() if k not in ("id", "alias_of", "default")
    } | {"default": False}
    assert by_alias.pop("request_id") != by_name.pop("request_id")  # two requests
    assert by_alias == by_name and by_alias["model"] == "tiny-fake-b@2"
    assert v2["model"] == v1["model"] == "tiny-fake-b@2"
    assert unknown.status_code == 422
    message = unknown.json()["error"]["message"]
    assert message.startswith("model: unknown model 'rerank-english-v3.0'") and "'rerank-v3.5'" in message


@pytest.mark.parametrize(
    ("alias", "message"),
    [
        (
            "rerank-v3.5=tiny-fake-c",
            "--model-alias rerank-v3.5=tiny-fake-c: no served model is called 'tiny-fake-c'",
        ),
        (
            "tiny-fake=tiny-fake-b",
            "--model-alias tiny-fake=tiny-fake-b: 'tiny-fake' is already a served model's name",
        ),
    ],
)
async def test_an_alias_of_no_served_model_fails_at_start_naming_the_setting(
    tmp_path: Path, alias: str, message: str
) -> None:
    first, second = two_bundles(tmp_path)
    app = create_app(Settings(backend="fake", model=[str(first), str(second)], model_alias=[alias]))
    with pytest.raises(AliasError, match=re.escape(message)):
        async with serve_in_process(app):
            pass
