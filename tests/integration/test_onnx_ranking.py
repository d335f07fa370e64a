"""The service on the real model through the ASGI interface (ONNX Runtime, in process)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import serve_in_process

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.onnx import OnnxBackend
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Turn

pytestmark = pytest.mark.integration

SUGAR_LIKE = [
    {
        "context": "Could you make some coffee for my sister?",
        "situations": [
            "The coffee has not been prepared.",
            "My sister just got out of bed.",
            "It is summer now.",
        ],
        "candidates": [
            "Sure. The coffee is brewing right now.",
            "Sure, I'll make iced coffee since it is hot today.",
            "No.",
        ],
    },
    {
        "context": [
            {"speaker": "user", "text": "I want to go for a run."},
            {"speaker": "bot", "text": "Great idea! Where to?"},
            {"speaker": "user", "text": "Somewhere near, I have only half an hour before my meeting."},
        ],
        "candidates": [
            f"How about the park {n} minutes away? It is quiet at this hour." for n in range(2, 9)
        ],
    },
    {
        "context": "Play some music.",
        "situations": ["It is late at night."],
        "candidates": ["OK.", "Sure, softly."],
    },
]


def settings(model_dir: Path, **overrides) -> Settings:
    # ONNX Runtime forced: --backend auto (the default) may serve another runtime on this CPU, and
    # two services of one test could then differ by their runtimes' rounding.
    threads = int(os.environ.get("RANKER_TEST_THREADS", "1"))
    defaults = {"backend": "onnx", "onnx": {"intra_op_threads": threads}}
    return Settings(model=model_dir, **{**defaults, **overrides})


async def test_the_real_model_ranks_a_situated_request(model_dir: Path) -> None:
    async with serve_in_process(create_app(settings(model_dir))) as client:
        ready = await client.get("/readyz")
        response = await client.post("/rank", json=SUGAR_LIKE[0])
        unselected = await client.post("/rank", json={**SUGAR_LIKE[0], "select_statements": False})
    assert ready.status_code == 200
    body = response.json()
    assert response.status_code == 200, body
    meta = json.loads((model_dir / "metadata.json").read_text())
    assert body["model"] == f"{meta['name']}@{meta['version']}"
    assert len(body["ranking"]) == 3
    assert all(0.0 <= r["score"] <= 1.0 for r in body["ranking"])
    assert body["statements_used"] == [0, 1, 2]  # every statement, in order
    unselected_body = {k: v for k, v in unselected.json().items() if k != "request_id"}
    # The deprecated select_statements changes nothing.
    assert unselected_body == {k: v for k, v in body.items() if k != "request_id"}


async def test_a_request_scores_the_same_alone_and_among_concurrent_requests(model_dir: Path) -> None:
    """Within 1e-3 after calibration, however the gateway batches the requests' pairs or sequences.

    Alone, a request runs on the backend's solo session (more threads); among others, on the
    per-call one: the scores must not depend on which.
    """
    threads = int(os.environ.get("RANKER_TEST_THREADS", "1"))
    overrides = {
        "onnx": {"intra_op_threads": threads, "solo_threads": threads + 1},
        "ranking": {"logit_cache_entries": 0},  # the repeats must reach the backend
    }
    app = create_app(settings(model_dir, batching={"max_wait_s": 0.05}, **overrides))
    async with serve_in_process(app) as client:
        alone: dict[tuple[int, int], float] = {}
        for r, request in enumerate(SUGAR_LIKE):
            body = (await client.post("/rank", json=request)).json()
            for entry in body["ranking"]:
                alone[(r, int(entry["id"]))] = entry["score"]
        batches_before = app.state.metrics.registry.get_sample_value(
            "ranker_batch_sequences_count", {"model": app.state.runtime.default.name}
        )
        answers = await asyncio.gather(*(client.post("/rank", json=request) for request in SUGAR_LIKE * 3))
        batches_after = app.state.metrics.registry.get_sample_value(
            "ranker_batch_sequences_count", {"model": app.state.runtime.default.name}
        )
    assert batches_after - batches_before < len(answers), "the concurrent requests were not batched together"
    for r, answer in enumerate(answers):
        for entry in answer.json()["ranking"]:
            assert entry["score"] == pytest.approx(alone[(r % len(SUGAR_LIKE), int(entry["id"]))], abs=1e-3)


MULTI_TURN = {
    "context": [
        {"speaker": "user", "text": "I baked a chocolate cake for my sister's birthday."},
        {"speaker": "bot", "text": "That sounds lovely. How did it turn out?"},
        {"speaker": "user", "text": "It burned a little on the bottom, sadly."},
    ],
    "candidates": [
        "Oh no! You could trim the bottom and cover it with frosting.",
        "My sister likes chocolate cake for her birthday too.",
        "Happy birthday to your sister!",
        "What time is it?",
    ],
}


@pytest.mark.parametrize("copies", [1, 10], ids=["one-sequence", "40-candidates-in-two-sequences"])
async def test_a_multi_turn_request_is_also_scored_with_its_last_turn_alone(
    model_dir: Path, copies: int
) -> None:
    """Each logit is the bundle's weighted mean of the full context's and the last turn's, plus its
    weight of the reply's prior (the candidates after a bare "." turn) less the prior's centre, also
    when a long list is cut into several sequences per view."""
    views = load_bundle(model_dir).views
    weight = views.last_turn
    if weight <= 0:
        pytest.skip(f"{model_dir} scores one view (metadata has no views.last_turn_weight)")
    request = {
        **MULTI_TURN,
        "candidates": [f"{text} ({n})" for n in range(copies) for text in MULTI_TURN["candidates"]],
    }
    last_only = {**request, "context": request["context"][-1:]}
    bare = {**request, "context": [{**request["context"][-1], "text": "."}]}
    # No logit cache: each view is computed again by its own request, not read back.
    uncached = settings(model_dir, ranking={"logit_cache_entries": 0})
    async with serve_in_process(create_app(uncached)) as client:
        both = (await client.post("/rank", json=request)).json()
        last = (await client.post("/rank", json=last_only)).json()
        prior = (await client.post("/rank", json=bare)).json()
    off = settings(model_dir, ranking={"last_turn_view": False})
    async with serve_in_process(create_app(off)) as client:
        full = (await client.post("/rank", json=request)).json()

    def logits(body: dict[str, Any]) -> np.ndarray:
        by_id = {int(entry["id"]): entry["logit"] for entry in body["ranking"]}
        return np.array([by_id[i] for i in range(len(request["candidates"]))])

    expected = logits(full) + weight * logits(last) + views.prior * (logits(prior) - views.prior_centre)
    np.testing.assert_allclose(logits(both), expected / (1 + weight), atol=2e-3)
    assert np.max(np.abs(logits(both) - logits(full))) > 0.05, "the last-turn view changed nothing"


async def test_a_kept_logit_is_the_one_the_model_computes(model_dir: Path) -> None:
    """The next turn offers two of the same replies and a new one: their prior views come from the
    cache, and every logit matches a service without one (a candidate's logit does not depend on
    the candidates it shared a sequence with, beyond rounding)."""
    views = load_bundle(model_dir).views
    later = {
        "context": [
            *MULTI_TURN["context"],
            {"speaker": "bot", "text": "Oh no!"},
            {"speaker": "user", "text": "Yes."},
        ],
        "candidates": [*MULTI_TURN["candidates"][2:], "Frosting hides a lot."],
    }
    async with serve_in_process(create_app(settings(model_dir))) as client:
        await client.post("/rank", json=MULTI_TURN)
        cached = (await client.post("/rank", json=later)).json()
        metrics = (await client.get("/metrics")).text
    async with serve_in_process(
        create_app(settings(model_dir, ranking={"logit_cache_entries": 0}))
    ) as client:
        fresh = (await client.post("/rank", json=later)).json()
    name = json.loads((model_dir / "metadata.json").read_text())["name"]
    hits = f'ranker_logit_cache_lookups_total{{model="{name}",result="hit"}} {2.0 if views.prior else 0.0}'
    assert hits in metrics
    # Within the rounding that batching gives anyway (sequence lengths change the int8 graph's sums).
    by_id = {entry["id"]: entry for entry in fresh["ranking"]}
    for entry in cached["ranking"]:
        assert entry["logit"] == pytest.approx(by_id[entry["id"]]["logit"], abs=5e-3)
        assert entry["score"] == pytest.approx(by_id[entry["id"]]["score"], abs=1e-3)


async def test_the_export_centres_the_prior_where_the_service_scores_it(model_dir: Path) -> None:
    """``export --prior-weight``: the centre is the mean logit the service gives the dev lists'
    multi-turn candidates after a bare "." turn; a one-turn list does not count."""
    pytest.importorskip("torch", reason="the exporter needs the training extras (torch)")
    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.evaluation.scoring import session
    from dialogue_ranker.export.calibration_choice import prior_centre, views_logits
    from dialogue_ranker.export.card_lines import views_line
    from dialogue_ranker.serving.context_views import ViewWeights

    bundle = load_bundle(model_dir)
    if not bundle.shared_prefix:
        pytest.skip(f"{model_dir} is not a shared-prefix bundle")
    turns = tuple(Turn(t["speaker"], t["text"]) for t in MULTI_TURN["context"])
    candidates = tuple(Candidate(text, 0) for text in MULTI_TURN["candidates"])
    lists = [
        RankingList(context=turns, candidates=candidates, group="a"),
        RankingList(context=turns[:2], candidates=candidates[:2], group="b"),
        RankingList(context=turns[:1], candidates=(Candidate("Never mind.", 0),), group="one-turn"),
    ]
    sess, encoder = session(bundle.ranker.path), bundle.pair_encoder()
    centre = prior_centre(views_logits(sess, encoder, {"dev": lists}, ViewWeights(prior=1.0)))
    served = []
    async with serve_in_process(create_app(settings(model_dir))) as client:
        for x in lists[:2]:
            bare = [{"speaker": x.context[-1].speaker, "text": "."}]
            body = {"context": bare, "candidates": [c.text for c in x.candidates]}
            served += [entry["logit"] for entry in (await client.post("/rank", json=body)).json()["ranking"]]
    assert len(served) == 6
    assert centre == pytest.approx(float(np.mean(served)), abs=2e-3)
    with pytest.raises(SystemExit, match="--prior-weight"):
        prior_centre(views_logits(sess, encoder, {"dev": lists[2:]}, ViewWeights(prior=1.0)))
    line = views_line(ViewWeights(last_turn=0.5, prior=0.2, prior_centre=centre))
    assert "three times" in line and "0.13 of the third's difference" in line and f"{centre:.3f}" in line


async def test_abcd_guideline_masks_on_the_real_model(model_dir: Path, abcd_kb: Path) -> None:
    body = {
        "context": [{"speaker": "customer", "text": "I forgot my password."}],
        "candidates": [
            {"id": "a", "text": "Let me pull up your account.", "action": "pull-up-account"},
            {"id": "b", "text": "I will offer a refund.", "action": "offer-refund"},
            {"id": "c", "text": "One moment please."},
        ],
        "intent": "recover_password",
    }
    async with serve_in_process(create_app(settings(model_dir, guidelines=abcd_kb))) as client:
        hard = (await client.post("/rank", json=body)).json()
        soft = (await client.post("/rank", json={**body, "mask_mode": "soft"})).json()
    assert {r["id"] for r in hard["ranking"]} == {"a", "c"}
    assert hard["masked"] == [
        {"id": "b", "action": "offer-refund", "reason": "action_not_allowed_for_intent", "bank": None}
    ]
    assert [r["id"] for r in soft["ranking"] if r["masked"]] == ["b"]


def test_a_call_that_starts_alone_gets_the_solo_session(model_dir: Path) -> None:
    """The solo session serves a call with no other in flight; an overlapping call gets its own share."""
    bundle = load_bundle(model_dir)
    encoder = bundle.pair_encoder()
    request = SUGAR_LIKE[0]
    items = encoder.encode_request(
        [Turn("user", request["context"])], request["situations"], request["candidates"]
    )
    batch = encoder.pad(items)
    backend = OnnxBackend(bundle.ranker, intra_op_threads=1, solo_threads=2)
    backend.start()
    calls: list[str] = []
    first_running, release = threading.Event(), threading.Event()

    class Spy:
        def __init__(self, session: Any, name: str) -> None:
            self.session, self.name = session, name

        def run(self, *args: Any) -> Any:
            calls.append(self.name)
            if len(calls) == 1:  # hold the first call until the second has started beside it
                first_running.set()
                release.wait(10)
            return self.session.run(*args)

    backend._session = Spy(backend._session, "per-call")  # type: ignore[assignment]
    backend._solo_session = Spy(backend._solo_session, "solo")  # type: ignore[assignment]
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(backend.infer, batch)
        assert first_running.wait(10)
        overlapping = backend.infer(batch)
        release.set()
        alone = first.result(10)
    after = backend.infer(batch)
    assert calls == ["solo", "per-call", "solo"]
    assert np.allclose(alone, overlapping, atol=1e-3) and np.allclose(alone, after, atol=1e-6)
