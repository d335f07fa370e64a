"""Ranking policy on the fake backend: masks, abstention, statements."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from helpers import serve_in_process, write_fake_bundle
from tokenizers import Tokenizer

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.fake import FakeBackend
from dialogue_ranker.serving.settings import Settings

AGENT_BODY = {
    "context": [{"speaker": "customer", "text": "i forgot my password"}],
    "candidates": [
        {"id": "ok", "text": "yes one moment", "action": "make-password", "generator": "retrieval"},
        {"id": "wrong", "text": "yes refund", "action": "offer-refund", "generator": "llm"},
        {"id": "made-up", "text": "sure", "action": "teleport"},
        {"id": "reply", "text": "thanks"},
    ],
    "intent": "recover_password",
}


def word_scores(bundle: Path, weights: dict[str, float]) -> Callable[[Sequence[int]], float]:
    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    by_id = {tokenizer.token_to_id(word): weight for word, weight in weights.items()}
    return lambda ids: sum(by_id.get(i, 0.0) for i in ids)


def app_with(bundle: Path, score_fn, **overrides):
    settings = Settings(backend="fake", model=bundle, **overrides)
    return create_app(settings, backend_factory=lambda s, spec: FakeBackend(score_fn=score_fn))


async def test_hard_mask_removes_actions_the_abcd_guidelines_do_not_allow(
    fake_bundle: Path, abcd_kb: Path
) -> None:
    app = app_with(fake_bundle, word_scores(fake_bundle, {"yes": 3.0}), guidelines=abcd_kb)
    async with serve_in_process(app) as client:
        body = (await client.post("/rank", json=AGENT_BODY)).json()
    assert [r["id"] for r in body["ranking"]] == ["ok", "reply"]
    assert body["masked"] == [
        {"id": "wrong", "action": "offer-refund", "reason": "action_not_allowed_for_intent", "bank": None},
        {"id": "made-up", "action": "teleport", "reason": "unknown_action", "bank": None},
    ]


async def test_soft_mask_keeps_penalises_and_flags(fake_bundle: Path, abcd_kb: Path) -> None:
    app = app_with(fake_bundle, word_scores(fake_bundle, {"yes": 3.0}), guidelines=abcd_kb)
    async with serve_in_process(app) as client:
        soft = (await client.post("/rank", json={**AGENT_BODY, "mask_mode": "soft"})).json()
        off = (await client.post("/rank", json={**AGENT_BODY, "mask_mode": "off"})).json()
        metrics = (await client.get("/metrics")).text
    assert soft["masked"] == []
    by_id = {r["id"]: r for r in soft["ranking"]}
    unmasked = {r["id"]: r for r in off["ranking"]}
    assert by_id["wrong"]["masked"] and by_id["wrong"]["mask_reason"] == "action_not_allowed_for_intent"
    assert by_id["wrong"]["score"] == pytest.approx(unmasked["wrong"]["score"] * 0.1)
    assert by_id["wrong"]["logit"] == pytest.approx(unmasked["wrong"]["logit"])
    assert not by_id["ok"]["masked"] and soft["ranking"][0]["id"] == "ok"
    assert 'ranker_masked_candidates_total{model="tiny-fake",reason="unknown_action"} 1.0' in metrics


async def test_mask_mode_off_still_refuses_an_unknown_intent(fake_bundle: Path) -> None:
    app = app_with(fake_bundle, lambda ids: 0.0)
    async with serve_in_process(app) as client:
        response = await client.post("/rank", json={**AGENT_BODY, "mask_mode": "off"})
    assert response.status_code == 422 and "recover_password" in response.json()["error"]["message"]


async def test_everything_masked_abstains_with_an_empty_ranking(fake_bundle: Path, abcd_kb: Path) -> None:
    app = app_with(fake_bundle, lambda ids: 5.0, guidelines=abcd_kb)
    body = {**AGENT_BODY, "candidates": AGENT_BODY["candidates"][1:3]}
    async with serve_in_process(app) as client:
        answer = (await client.post("/rank", json=body)).json()
    assert answer["ranking"] == [] and answer["abstain"] is True and len(answer["masked"]) == 2


REPEAT_BODY = {
    "context": [
        {"speaker": "bot", "text": "Do you have any pets?"},
        {"speaker": "user", "text": "Yes, a dog. And you?"},
    ],
    "candidates": [
        {"id": "own-turn", "text": "do you have any PETS"},
        {"id": "user-turn", "text": "Yes, a dog. And you?"},
        {"id": "reply", "text": "I would love a dog one day. What breed is yours?"},
        {"id": "dots", "text": "..."},
    ],
}


async def test_a_candidate_that_repeats_a_turn_is_masked_and_the_response_says_so(fake_bundle: Path) -> None:
    """Either speaker's turn, case and punctuation aside; a text without words is not a repeat."""
    app = app_with(fake_bundle, word_scores(fake_bundle, {"dog": 2.0, "pets": 3.0}))
    async with serve_in_process(app) as client:
        hard = (await client.post("/rank", json=REPEAT_BODY)).json()
        soft = (await client.post("/rank", json={**REPEAT_BODY, "mask_mode": "soft"})).json()
        off = (await client.post("/rank", json={**REPEAT_BODY, "mask_mode": "off"})).json()
        metrics = (await client.get("/metrics")).text
    assert [r["id"] for r in hard["ranking"]] == ["reply", "dots"]
    assert hard["masked"] == [
        {"id": "own-turn", "action": None, "reason": "repeats_a_turn", "bank": None},
        {"id": "user-turn", "action": None, "reason": "repeats_a_turn", "bank": None},
    ]
    flagged = {r["id"]: r["mask_reason"] for r in soft["ranking"] if r["masked"]}
    assert flagged == {"own-turn": "repeats_a_turn", "user-turn": "repeats_a_turn"}
    assert off["ranking"][0]["id"] == "own-turn" and off["masked"] == []
    assert 'ranker_masked_candidates_total{model="tiny-fake",reason="repeats_a_turn"} 4.0' in metrics


async def test_the_repeat_mask_can_be_switched_off_in_settings(fake_bundle: Path) -> None:
    app = app_with(fake_bundle, lambda ids: 0.0, ranking={"mask_repeats": False})
    async with serve_in_process(app) as client:
        body = (await client.post("/rank", json=REPEAT_BODY)).json()
    assert body["masked"] == [] and len(body["ranking"]) == 4


async def test_abstains_when_no_candidate_reaches_the_threshold_and_counts_it(fake_bundle: Path) -> None:
    app = app_with(fake_bundle, lambda ids: -2.0)
    async with serve_in_process(app) as client:
        answer = (await client.post("/rank", json={"context": "hi", "candidates": ["a", "b"]})).json()
        lenient = (
            await client.post("/rank", json={"context": "hi", "candidates": ["a"], "min_score": 0.1})
        ).json()
        metrics = (await client.get("/metrics")).text
    assert answer["abstain"] is True and answer["threshold"] == 0.5
    assert lenient["abstain"] is False
    assert 'ranker_abstentions_total{model="tiny-fake"} 1.0' in metrics
    assert 'ranker_top1_selections_total{generator="none",model="tiny-fake"} 1.0' in metrics


async def test_top1_metric_caps_generator_names(fake_bundle: Path) -> None:
    app = app_with(fake_bundle, lambda ids: 2.0)
    body = {"context": "hi", "candidates": [{"text": "a", "generator": "secret-model-v7"}]}
    async with serve_in_process(app) as client:
        await client.post("/rank", json=body)
        metrics = (await client.get("/metrics")).text
    assert 'ranker_top1_selections_total{generator="other",model="tiny-fake"} 1.0' in metrics
    assert "secret-model-v7" not in metrics


async def test_every_statement_reaches_the_model_in_order_and_select_statements_changes_nothing(
    fake_bundle: Path,
) -> None:
    tokenizer = Tokenizer.from_file(str(fake_bundle / "tokenizer.json"))
    sep = tokenizer.token_to_id("[SEP]")
    seen: list[list[int]] = []

    def statements_of(ids: Sequence[int]) -> float:
        ids = list(ids)
        first = ids.index(sep)
        seen.append(ids[first + 1 : ids.index(sep, first + 1)])
        return 0.0

    body = {"context": "coffee", "candidates": ["sure"], "situations": ["it is morning", "sister", "kitchen"]}
    async with serve_in_process(app_with(fake_bundle, statements_of)) as client:
        plain = await client.post("/rank", json=body)
        # Deprecated and ignored; another context, so that the logit cache does not answer it.
        old = await client.post("/rank", json={**body, "context": "tea", "select_statements": True})
    assert plain.status_code == old.status_code == 200
    assert plain.json()["statements_used"] == old.json()["statements_used"] == [0, 1, 2]
    words = [tokenizer.token_to_id(w) for w in ("morning", "sister", "kitchen")]
    for statements in seen:
        assert [statements.index(w) for w in words] == sorted(statements.index(w) for w in words)


#: A multi-turn request whose earlier turn and last turn name different words to score.
COFFEE_THEN_TEA = {
    "context": [
        {"speaker": "user", "text": "could you make some coffee"},
        {"speaker": "bot", "text": "sorry the machine is broken"},
        {"speaker": "user", "text": "tea please"},
    ],
    "candidates": [{"id": "a", "text": "sure"}, {"id": "b", "text": "no"}],
}


async def test_a_multi_turn_request_gets_the_bundle_s_last_turn_view(tmp_path: Path) -> None:
    """Each logit is (full context + weight x last turn alone) / (1 + weight); one turn: one view."""
    bundle = write_fake_bundle(tmp_path / "views")
    meta = json.loads((bundle / "metadata.json").read_text())
    (bundle / "metadata.json").write_text(json.dumps({**meta, "views": {"last_turn_weight": 0.5}}))
    # "coffee" in an earlier turn lifts every candidate in the full view only; "sure" lifts one.
    score = word_scores(bundle, {"coffee": 3.0, "sure": 1.0})
    body = COFFEE_THEN_TEA
    async with serve_in_process(app_with(bundle, score)) as client:
        views = (await client.post("/rank", json=body)).json()
        alone = (await client.post("/rank", json={**body, "context": body["context"][-1:]})).json()
    async with serve_in_process(app_with(bundle, score, ranking={"last_turn_view": False})) as client:
        full = (await client.post("/rank", json=body)).json()
    logits = {
        name: {r["id"]: r["logit"] for r in b["ranking"]}
        for name, b in [("views", views), ("alone", alone), ("full", full)]
    }
    assert logits["full"] == {"a": 4.0, "b": 3.0} and logits["alone"] == {"a": 1.0, "b": 0.0}
    assert logits["views"] == pytest.approx({"a": (4.0 + 0.5 * 1.0) / 1.5, "b": (3.0 + 0.5 * 0.0) / 1.5})


async def test_a_bundle_with_the_reply_s_prior_scores_a_third_view_with_no_context(tmp_path: Path) -> None:
    """The prior's logit enters as its difference from the bundle's centre; one turn: still one view."""
    bundle = write_fake_bundle(tmp_path / "prior")
    meta = json.loads((bundle / "metadata.json").read_text())
    views = {"last_turn_weight": 0.5, "prior_weight": 0.2, "prior_centre": -1.0}
    (bundle / "metadata.json").write_text(json.dumps({**meta, "views": views}))
    score = word_scores(bundle, {"coffee": 3.0, "tea": 2.0, "sure": 1.0})
    body = COFFEE_THEN_TEA
    async with serve_in_process(app_with(bundle, score)) as client:
        three = (await client.post("/rank", json=body)).json()
        one_turn = (await client.post("/rank", json={**body, "context": body["context"][-1:]})).json()
        listing = (await client.get("/v1/models")).json()
    logits = {
        name: {r["id"]: r["logit"] for r in b["ranking"]} for name, b in [("3", three), ("1", one_turn)]
    }
    # full: coffee + tea (+ sure); last turn: tea (+ sure); prior ("."): sure only.
    full, last, prior = {"a": 6.0, "b": 5.0}, {"a": 3.0, "b": 2.0}, {"a": 1.0, "b": 0.0}
    assert logits["3"] == pytest.approx(
        {k: (full[k] + 0.5 * last[k] + 0.2 * (prior[k] + 1.0)) / 1.5 for k in full}
    )
    assert logits["1"] == last
    assert listing["data"][0] | views == listing["data"][0]
