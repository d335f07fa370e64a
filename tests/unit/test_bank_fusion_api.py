"""A bank request's scores are fused with the retrieval cosine; any other request is answered as before."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from bank_helpers import SUPPORT_BANK, require_retriever, wait_banks_ready, write_bank
from helpers import serve_in_process, write_fake_bundle

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.fake import FakeBackend
from dialogue_ranker.serving.banks.cache import SUFFIX
from dialogue_ranker.serving.banks.hubness import hubness
from dialogue_ranker.serving.banks.index import QuantizedVectors
from dialogue_ranker.serving.settings import Settings

FUSION = {
    "method": "linear",
    "cosine_weight": 10.0,
    "cosine_centre": 0.3,
    "calibration": {"method": "platt", "a": 1.0, "b": 0.0},
    "threshold": 0.6,
    "ranker": "tiny-fake@1",
}
PASSWORD = {
    "context": "I forgot my password and cannot log in.",
    "bank": "support",
    "retrieve_k": 4,
    "candidates": [{"id": "own", "text": "Let me reset your password."}],
}
PLAIN = {"context": "I forgot my password.", "candidates": ["I can send a reset link.", "Pizza is great."]}

#: One request id for two answers compared whole (an answer carries its request id).
SAME_ID = {"X-Request-ID": "compared-request"}


def with_fused_retriever(directory: Path, fusion: dict | None) -> Path:
    """The fake bundle with a retriever/ folder: the shipped graph and tokenizer, and ``fusion``."""
    shipped = require_retriever()
    bundle = write_fake_bundle(directory)
    retriever = bundle / "retriever"
    retriever.mkdir()
    meta = json.loads((shipped / "retriever.json").read_text())
    for name in (meta["file"], meta["tokenizer"]):
        (retriever / name).symlink_to(shipped / name)
    meta.pop("fusion", None)  # the shipped retriever's own fusion: replaced, or none
    if fusion is not None:
        meta["fusion"] = fusion
    (retriever / "retriever.json").write_text(json.dumps(meta))
    return bundle


def app(bundle: Path, *banks: str, score: float = 0.5):
    settings = Settings(backend="fake", model=bundle, bank=list(banks))
    return create_app(settings, backend_factory=lambda s, spec: FakeBackend(score_fn=lambda ids: score))


async def test_a_bank_request_ranks_by_the_fused_score_read_with_the_fusion_own_map(tmp_path: Path) -> None:
    bundle = with_fused_retriever(tmp_path / "bundle", FUSION)
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    async with serve_in_process(app(bundle, f"support={bank}")) as client:
        await wait_banks_ready(client)
        answer = (await client.post("/rank", json=PASSWORD)).json()
    ranking = answer["ranking"]
    # Every logit is the fake ranker's 0.5: the fused score orders them by cosine alone.
    for r in ranking:
        assert r["logit"] == pytest.approx(0.5 + 10.0 * (r["retrieval_score"] - 0.3), abs=1e-4)
        assert r["score"] == pytest.approx(1 / (1 + math.exp(-r["logit"])), abs=1e-6)
    cosines = [r["retrieval_score"] for r in ranking]
    assert cosines == sorted(cosines, reverse=True)
    own = next(r for r in ranking if r["id"] == "own")
    assert own["bank"] is None and 0.3 < own["retrieval_score"] <= 1.0  # embedded with the query encoder
    assert ranking[0]["id"] in {"reset-link", "reset-steps", "own"}
    assert answer["threshold"] == 0.6 and answer["abstain"] is (ranking[0]["score"] < 0.6)


async def test_a_request_without_a_bank_is_answered_byte_for_byte_as_without_fusion(tmp_path: Path) -> None:
    fused = with_fused_retriever(tmp_path / "fused", FUSION)
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    answers = []
    for application in (app(fused, f"support={bank}"), app(write_fake_bundle(tmp_path / "plain"))):
        async with serve_in_process(application) as client:
            if application.state.settings.bank:
                await wait_banks_ready(client)
            answers.append((await client.post("/rank", json=PLAIN, headers=SAME_ID)).content)
    assert answers[0] == answers[1]
    assert json.loads(answers[0])["ranking"][0]["retrieval_score"] is None


async def test_without_a_fusion_a_bank_request_keeps_the_ranker_logits_and_the_bundle_map(
    tmp_path: Path,
) -> None:
    bundle = with_fused_retriever(tmp_path / "bundle", None)
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    async with serve_in_process(app(bundle, f"support={bank}")) as client:
        await wait_banks_ready(client)
        answer = (await client.post("/rank", json=PASSWORD)).json()
    assert {r["logit"] for r in answer["ranking"]} == {0.5} and answer["threshold"] == 0.5
    assert next(r for r in answer["ranking"] if r["id"] == "own")["retrieval_score"] is None


async def test_a_fusion_fitted_on_another_ranker_is_used_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bundle = with_fused_retriever(tmp_path / "bundle", {**FUSION, "ranker": "older@0.9"})
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    async with serve_in_process(app(bundle, f"support={bank}")) as client:
        await wait_banks_ready(client)
        answer = (await client.post("/rank", json=PASSWORD)).json()
    assert answer["threshold"] == 0.6
    assert "bank fusion fitted on another ranker model=tiny-fake@1 fitted_on=older@0.9" in caplog.text


async def test_a_bank_response_loses_its_hubness_and_the_hubness_is_kept_in_the_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fusion = {"method": "linear", "cosine_weight": 10.0, "cosine_centre": 0.3, "hubness_weight": 4.0,
              "hubness_neighbours": 3, "ranker": "tiny-fake@1"}  # fmt: skip
    bundle = with_fused_retriever(tmp_path / "bundle", fusion)
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    answers = []
    for _ in range(2):  # the second start reads the hubness from the cache
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dialogue_ranker.serving.banks"):
            async with serve_in_process(app(bundle, f"support={bank}")) as client:
                await wait_banks_ready(client)
                answers.append((await client.post("/rank", json=PASSWORD, headers=SAME_ID)).json())
        computed = "bank hubness bank=support neighbours=3" in caplog.text
        assert computed is (len(answers) == 1)
    assert answers[0] == answers[1]
    (cached,) = tmp_path.glob(f"support-*{SUFFIX}")
    with np.load(cached) as stored:
        vectors = QuantizedVectors(stored["codes"], stored["scales"])
        kept = stored["hubness-3"]
    np.testing.assert_array_equal(kept, hubness(vectors, 3))
    row_of = {entry["id"]: row for row, entry in enumerate(SUPPORT_BANK)}
    for r in answers[0]["ranking"]:
        hub = 0.0 if r["bank"] is None else float(kept[row_of[r["id"]]])
        assert r["logit"] == pytest.approx(0.5 + 10.0 * (r["retrieval_score"] - 0.3) - 4.0 * hub, abs=1e-4)
    assert np.ptp(kept) > 0.01  # the bank's responses do differ in hubness


async def test_vectors_cached_before_a_fusion_used_hubness_are_kept_and_the_hubness_added_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    plain = with_fused_retriever(tmp_path / "plain", {**FUSION})  # no hubness: the file holds vectors only
    async with serve_in_process(app(plain, f"support={bank}")) as client:
        await wait_banks_ready(client)
    (cached,) = tmp_path.glob(f"support-*{SUFFIX}")
    with np.load(cached) as stored:
        assert not [name for name in stored.files if name.startswith("hubness")]
    hubs = with_fused_retriever(tmp_path / "hubs", {**FUSION, "hubness_weight": 4.0, "hubness_neighbours": 3})
    computed = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dialogue_ranker.serving.banks"):
            async with serve_in_process(app(hubs, f"support={bank}")) as client:
                listed = (await wait_banks_ready(client))["data"][0]
        assert listed["from_cache"] is True  # the vectors are never embedded again
        computed.append("bank hubness bank=support neighbours=3" in caplog.text)
    assert computed == [True, False]
    with np.load(cached) as stored:
        np.testing.assert_array_equal(
            stored["hubness-3"], hubness(QuantizedVectors(stored["codes"], stored["scales"]), 3)
        )
