"""Statement selection on the real model: the statements that matter are kept, any count works."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import serve_in_process

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration

COFFEE = "Could you make some coffee for my sister?"
RELEVANT = {
    0: "The coffee has not been prepared.",
    2: "My sister just got out of bed.",
    4: "[user] has a coffee machine in the kitchen.",
}
DISTRACTORS = {
    1: "The garage door was painted blue last year.",
    3: "There is a bicycle in the garden.",
    5: "[user]'s favourite football team won yesterday.",
}
STATEMENTS = [{**RELEVANT, **DISTRACTORS}[i] for i in range(6)]
CANDIDATES = ["Sure, the coffee is brewing now; it will be ready when she comes down.", "No."]


@pytest.fixture
def selecting_model(model_dir: Path) -> Path:
    if load_bundle(model_dir).selector is None:
        pytest.skip("the model under test has no statement selector")
    return model_dir


def _app(model_dir: Path):
    return create_app(Settings(model=model_dir, onnx={"intra_op_threads": 1}))


async def test_selection_keeps_the_statements_that_matter_and_drops_distractors(selecting_model):
    async with serve_in_process(_app(selecting_model)) as client:
        body = (
            await client.post(
                "/rank", json={"context": COFFEE, "situations": STATEMENTS, "candidates": CANDIDATES}
            )
        ).json()
    used = body["statements_used"]
    assert set(RELEVANT) <= set(used), used
    assert not set(DISTRACTORS) & set(used), used
    assert len(body["ranking"]) == len(CANDIDATES)


async def test_requests_with_no_statements_and_with_fifty_both_rank_every_candidate(selecting_model):
    fifty = [f"Statement number {i}: the shelf holds {i} books." for i in range(48)] + list(
        RELEVANT.values()
    )[:2]
    async with serve_in_process(_app(selecting_model)) as client:
        none = await client.post(
            "/rank", json={"context": COFFEE, "situations": [], "candidates": CANDIDATES}
        )
        many = await client.post(
            "/rank", json={"context": COFFEE, "situations": fifty, "candidates": CANDIDATES}
        )
    assert none.status_code == 200 and many.status_code == 200, (none.json(), many.json())
    assert none.json()["statements_used"] == []
    used = many.json()["statements_used"]
    assert 1 <= len(used) < 50 and {48, 49} <= set(used)
    for response in (none, many):
        assert sorted(r["id"] for r in response.json()["ranking"]) == ["0", "1"]


def test_selection_never_drops_the_context_or_the_candidate(selecting_model):
    """Whatever the selector keeps, the ranker's pair still holds the latest turn and the candidate."""
    bundle = load_bundle(selecting_model)
    encoder = bundle.pair_encoder()
    from dialogue_ranker.serving.tokenization import Turn

    long_statements = [
        f"Statement {i} is a rather long sentence about the state of the house." for i in range(50)
    ]
    for candidate in CANDIDATES:
        pair = encoder.encode([Turn("user", COFFEE)], long_statements, candidate)
        text = encoder.tokenizer.decode(pair.input_ids)
        assert "could you make some coffee for my sister" in text
        assert text.endswith(
            encoder.tokenizer.decode(encoder.tokenizer.encode(candidate, add_special_tokens=False).ids)
        )
        assert len(pair) <= bundle.ranker.max_length
