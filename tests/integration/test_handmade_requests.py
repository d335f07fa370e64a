"""Requests a new user would try, each with the reply any person would pick, on the shipped model.

Written by hand (not from any dataset): situated requests, open chat turns from a socialbot's
generators, and customer-service turns with an intent. Each case asserts that the person's pick
ranks first through ``POST /rank`` on the real model (ONNX Runtime, in process).

The service with model 2.10.0 gets 45 of the 52 right: 19 of the first 20, 15 of the 20
same-request pairs (2.9.0: 17 and 13; 2.8.0: 17 and 12) and 11 of the 12 unseen pairs (2.9.0: 9;
2.8.0: 7). 2.8.0 got 17 of the 20 right, as 2.7.0
did (the same graph: the reply's prior moves only the multi-turn requests' scores, none of
their picks): 2.6.0's 16 and the
cancellation request (2.6.0 got 16, as 2.5.1 did (the same graph; the seven multi-turn requests rank
the same with its last-turn view): 15 by the model, and 1 more because the repeat mask
(``ranking.mask_repeats``, on by default) removes a candidate that says a turn of the conversation
again; 2.5.0, the same weights in a coarser int8 graph, got 17: 16 and 1, the extra one the dinner
request, which the fp32 graph misses as 2.5.1 does; 2.4.0 got 18: 12 by the model, 6 by the mask;
2.3.1 got 16: 12 and 4; 2.2.0 got 16: 8 and 8; 2.1.0 got 14: 11 and 3; model 2.0.0 got 12 without
the mask, and of the first 13 cases 2.0.0 got 8 and 1.1.0 got 3)). Its misses are listed in
``KNOWN_MISSES`` and marked strict xfail: they are asserted like the others, reported as expected
failures, and a model that gets one right makes that case fail until the list is updated, so the
count in the README stays true.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import serve_in_process

from dialogue_ranker.evaluation.handmade import load_cases
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration


#: The cases, written once in ``data/handmade_requests/requests.json`` (``ranker release-check`` reads
#: them too): the first 20, the 20 same-request pairs' cases and the 12 unseen pairs' cases.
CASES = [pytest.param(case.body, case, id=case.name) for case in load_cases()]

#: Cases the service with model 2.10.0 gets wrong (the person's pick is not first), and whether the
#: service abstains on the hot-room request. Update with the README's count when the model changes.
#: (2.9.0 also missed "coffee-machine-broken", "late-for-meeting", "dinner-shellfish-declines",
#: "train-strike-accepts" and "pharmacy-hours-accepts", and got "flat-tyre-declines" right; 2.8.0
#: also missed "lake-storm-accepts"; 2.6.0 and 2.5.1 "service-cancel".)
KNOWN_MISSES = {
    "dinner-allergy",
    # Same request, opposite situation (15 of the 20 right):
    "restaurant-monday-accepts",
    "flat-tyre-declines",
    "car-keys-beer-declines",
    "printer-ink-accepts",
    "call-dentist-accepts",
    # Unseen pairs (11 of the 12 right):
    "design-meeting-accepts",
}
#: Cases whose pick and runner-up are nearer than the runtimes' arithmetic differs, with the gap
#: measured: int8 products (ONNX Runtime; OpenVINO where the CPU has VNNI or AMX) rank the pick
#: first, exact fp32 arithmetic (OpenVINO f32 on an AVX2-only CPU, which dequantizes the int8
#: weights) ranks the runner-up first. The service's count (45 of 52) is on int8 products; on such a
#: CPU it is 44. Each is asserted as a near tie: the pick first, or second within NEAR_TIE_LOGITS.
NEAR_TIES = {
    # 2.10.0: pick 1.536, runner-up 1.526 (OpenVINO f32, int8 products); 1.518 and 1.547 in fp32.
    "pharmacy-hours-accepts",
}
#: How far (in logits) a near tie's runner-up may lead: three times the largest gap measured above.
NEAR_TIE_LOGITS = 0.1

#: 2.10.0 ranks the window first at 0.917, over the bundle's threshold (0.447), with "I do not
#: know." second at 0.224 (OpenVINO bf16, as `--backend auto` picks here). 2.9.0: 0.873 over 0.450
#: and 0.225. 2.8.0: 0.698 over 0.438 and "Pizza is great." at 0.421 (2.7.0: the same scores over
#: 0.413; 2.6.0: 0.733 over 0.432 and 0.607; 2.5.1: the same, threshold 0.426; 2.5.0: 0.751 over
#: 0.375 and 0.591; 2.4.0: 0.629 over 0.607 and 0.618; 2.3.1 ranked it first at 0.626, under its
#: threshold, 0.633.)
HOT_ROOM_ABSTAINS = False


def _with_known_misses(cases):
    marked = []
    for case in cases:
        if case.id in KNOWN_MISSES:
            reason = "model 2.10.0 does not rank the person's pick first"
            case = pytest.param(*case.values, id=case.id, marks=pytest.mark.xfail(strict=True, reason=reason))
        marked.append(case)
    return marked


@pytest.fixture(scope="module")
def results(model_dir: Path) -> dict:
    """Every case's response, from one in-process service on the shipped model."""
    import asyncio

    async def run() -> dict:
        settings = Settings(model=model_dir)  # the packaged ABCD guidelines
        out = {}
        async with serve_in_process(create_app(settings)) as client:
            for param in CASES:
                body, name = param.values[0], param.id
                response = await client.post("/rank", json=body)
                assert response.status_code == 200, (name, response.text)
                out[name] = response.json()
        return out

    return asyncio.run(run())


@pytest.mark.parametrize(("body", "pick"), _with_known_misses(CASES))
def test_the_person_s_pick_ranks_first(results, body, pick):
    answer = results[pick.name]
    top = answer["ranking"][0]
    if pick.name in NEAR_TIES and top["id"] != pick.picked_id:
        second = answer["ranking"][1]
        assert second["id"] == pick.picked_id, (pick.name, answer["ranking"])
        assert top["logit"] - second["logit"] < NEAR_TIE_LOGITS, (pick.name, answer["ranking"])
        return
    assert top["id"] == pick.picked_id, (pick.name, answer["ranking"])


@pytest.mark.xfail(HOT_ROOM_ABSTAINS, strict=True, reason="the window ranks first, under the threshold")
def test_the_hot_room_request_does_not_abstain(results):
    """The window is a good answer: the service must not abstain on it."""
    assert results["hot-room"]["abstain"] is False, results["hot-room"]


@pytest.mark.xfail(strict=True, reason="model 2.10.0 ranks the non sequitur first (-1.88 against -2.39)")
def test_a_bare_hot_room_request_gets_the_window_over_a_non_sequitur(model_dir: Path) -> None:
    """Two candidates, no statements: the fitting offer must beat a reply about something else.

    Kept apart from ``CASES`` (whose count the README and the model card quote per version): found
    by trying the service by hand after 2.8.0 shipped, on ONNX Runtime and OpenVINO alike (2.8.0: -0.78
    against -1.20; 2.9.0: -1.86 against -2.57).
    """
    import asyncio

    candidates = ["I like trains.", "Shall I open the window for you?"]
    body = {"context": "It is so hot in here.", "candidates": candidates}

    async def rank() -> dict:
        async with serve_in_process(create_app(Settings(model=model_dir, backend="onnx"))) as client:
            response = await client.post("/rank", json=body)
            assert response.status_code == 200, response.text
            return response.json()

    answer = asyncio.run(rank())
    assert answer["ranking"][0]["id"] == "1", answer["ranking"]
