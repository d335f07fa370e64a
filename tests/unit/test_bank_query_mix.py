"""A bank request's query vector: its last turns mixed with its last turn (``query.last_turn_weight``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from bank_helpers import SUPPORT_BANK, require_retriever, wait_banks_ready, write_bank
from helpers import serve_in_process, write_fake_bundle

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.fake import FakeBackend
from dialogue_ranker.serving.banks.encoder import TextEncoder, retrieval_query
from dialogue_ranker.serving.model_bundle import BundleError, load_retriever
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Turn

REFUND = (
    Turn("user", "My order never arrived and the tracking page has said 'in transit' for two weeks."),
    Turn("bot", "I am sorry to hear that."),
    Turn("user", "Can I just get my money back?"),
)
REFUND_REQUEST = {
    "context": [{"speaker": t.speaker, "text": t.text} for t in REFUND],
    "bank": "support",
    "retrieve_k": len(SUPPORT_BANK),
    "candidates": [],
}


@pytest.fixture(scope="module")
def encoder() -> Iterator[TextEncoder]:
    spec = load_retriever(require_retriever())
    started = TextEncoder(dataclasses.replace(spec, query_turns=2))
    started.start()
    yield started
    started.close()


def weighted(encoder: TextEncoder, weight: float) -> TextEncoder:
    """The started encoder with another last-turn weight (the sessions shared)."""
    other = dataclasses.replace(encoder.spec, last_turn_weight=weight)
    copy = TextEncoder.__new__(TextEncoder)
    copy.__dict__.update(encoder.__dict__, spec=other)
    return copy


def test_the_query_vector_is_the_weighted_mix_of_the_two_embeddings(encoder: TextEncoder) -> None:
    turns_vector = encoder.embed([retrieval_query(REFUND, last_turns=2)])[0]
    last_vector = encoder.embed([REFUND[-1].text])[0]
    assert float(turns_vector @ last_vector) < 0.95  # two different vectors: the mix is not either

    # Both texts go through the graph in one call: the shorter is padded, which moves the int8
    # graph's output by up to 2e-3 (a weight off by 0.05 moves it by 5e-3).
    mixed = weighted(encoder, 0.25).embed_queries([REFUND])[0]
    np.testing.assert_allclose(mixed, 0.75 * turns_vector + 0.25 * last_vector, atol=3e-3)
    # So a response's cosine with it is the same mix of its cosines with the two.
    response = encoder.embed(["I have issued a refund to your card."])[0]
    cosines = (float(response @ turns_vector), float(response @ last_vector))
    assert float(response @ mixed) == pytest.approx(0.75 * cosines[0] + 0.25 * cosines[1], abs=1e-3)
    # The bulk session (evaluation) gives the vector a request gets.
    bulk = weighted(encoder, 0.25).embed_queries([REFUND], bulk=True)[0]
    np.testing.assert_allclose(bulk, mixed, atol=1e-4)


def test_a_zero_weight_or_a_one_turn_context_queries_with_one_embedding(encoder: TextEncoder) -> None:
    plain = encoder.embed([retrieval_query(REFUND, last_turns=2)])[0]
    np.testing.assert_allclose(weighted(encoder, 0.0).embed_queries([REFUND])[0], plain, atol=1e-5)
    one_turn = REFUND[-1:]
    alone = encoder.embed([one_turn[0].text])[0]
    vectors = weighted(encoder, 0.25).embed_queries([one_turn, REFUND])
    np.testing.assert_allclose(vectors[0], alone, atol=3e-3)
    assert not np.allclose(vectors[1], plain, atol=1e-2)  # the other context in the batch is mixed


def retriever_with(directory: Path, query: dict) -> Path:
    """A copy of the shipped retriever's metadata with ``query`` (the graph and tokenizer linked)."""
    shipped = require_retriever()
    directory.mkdir(parents=True)
    meta = json.loads((shipped / "retriever.json").read_text())
    meta.pop("fusion", None)
    for name in (meta["file"], meta["tokenizer"]):
        (directory / name).symlink_to((shipped / name).resolve())
    meta["query"] = query
    (directory / "retriever.json").write_text(json.dumps(meta))
    return directory


def test_retriever_json_gives_the_weight_and_refuses_one_out_of_range(tmp_path: Path) -> None:
    mixed = retriever_with(tmp_path / "a", {"turns": 2, "last_turn_weight": 0.25})
    assert load_retriever(mixed).last_turn_weight == 0.25
    assert load_retriever(retriever_with(tmp_path / "b", {"turns": 2})).last_turn_weight == 0.0
    for bad in (1.5, -0.1, "NaN"):
        with pytest.raises(BundleError, match="query.last_turn_weight"):
            load_retriever(retriever_with(tmp_path / f"bad-{bad}", {"turns": 2, "last_turn_weight": bad}))


async def test_a_bank_request_retrieves_with_the_mixed_query(tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    scores = {}
    for weight in (0.0, 1.0, 0.25):
        bundle = write_fake_bundle(tmp_path / f"bundle-{weight}")
        retriever_with(bundle / "retriever", {"turns": 2, "last_turn_weight": weight})
        settings = Settings(backend="fake", model=bundle, bank=[f"support={bank}"])
        app = create_app(settings, backend_factory=lambda s, spec: FakeBackend(score_fn=lambda ids: 0.5))
        async with serve_in_process(app) as client:
            await wait_banks_ready(client)
            response = await client.post("/rank", json=REFUND_REQUEST)
        assert response.status_code == 200, response.text
        scores[weight] = {r["id"]: r["retrieval_score"] for r in response.json()["ranking"]}
    assert set(scores[0.25]) == {row["id"] for row in SUPPORT_BANK}
    # The two queries differ enough that a mix at another weight would miss by more than the
    # padding's 2e-3 (see above).
    assert max(abs(scores[0.0][i] - scores[1.0][i]) for i in scores[0.0]) > 0.05
    for i, score in scores[0.25].items():
        assert score == pytest.approx(0.75 * scores[0.0][i] + 0.25 * scores[1.0][i], abs=2e-3)
