"""The three steps of a ranking request, each on its own: candidates, scorer, reading.

The whole path through the API is tested in ``test_ranking.py``; here each step runs alone on
real components (the tiny tokenizer, the fake backend behind a real batcher).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from helpers import write_tiny_tokenizer

from dialogue_ranker.serving.backends.fake import FakeBackend, hashed_logit
from dialogue_ranker.serving.batching import Batcher
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.context_views import ONE_VIEW
from dialogue_ranker.serving.encoding import OffLoopEncoder
from dialogue_ranker.serving.errors import Overloaded, UnknownBank, UnknownIntent
from dialogue_ranker.serving.fusion import Fusion
from dialogue_ranker.serving.guidelines import Guidelines, MaskReason
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.rank_query import Candidate, MaskMode, RankQuery
from dialogue_ranker.serving.ranking.candidates import CandidateGatherer
from dialogue_ranker.serving.ranking.reading import ScoreReader
from dialogue_ranker.serving.ranking.scorer import LogitScorer
from dialogue_ranker.serving.ranking.steps import Candidates, Logits
from dialogue_ranker.serving.settings import BatchingSettings
from dialogue_ranker.serving.tokenization import PairEncoder, Turn

GUIDELINES = Guidelines({"reset_login": frozenset({"send-reset-email"})})
TURNS = [Turn("user", "could you make some coffee")]


def query(*texts: str, **fields) -> RankQuery:
    candidates = [
        Candidate(str(i), text, action=fields.pop(f"action{i}", None)) for i, text in enumerate(texts)
    ]
    return RankQuery(turns=TURNS, candidates=candidates, **fields)


# Candidates


async def test_candidates_without_a_bank_are_the_requests_own_with_their_mask_reasons() -> None:
    gatherer = CandidateGatherer(guidelines=GUIDELINES, banks=None, mask_repeats=True)
    q = query(
        "could you make some coffee", "sure", "i sent it", action2="send-reset-email", intent="reset_login"
    )
    hard = await gatherer.gather(q)
    assert [c.text for c in hard.all] == [c.text for c in q.candidates]
    # The repeat and an action-free reply; the allowed action is not masked.
    assert hard.reasons == [MaskReason.REPEATS_A_TURN, None, None]
    assert hard.scored == [1, 2] and hard.texts == ["sure", "i sent it"]
    soft = await gatherer.gather(RankQuery(turns=TURNS, candidates=q.candidates, mask_mode=MaskMode.SOFT))
    assert soft.scored == [0, 1, 2]


async def test_a_bank_request_without_banks_and_an_unknown_intent_are_refused() -> None:
    gatherer = CandidateGatherer(guidelines=GUIDELINES, banks=None, mask_repeats=True)
    with pytest.raises(UnknownBank):
        await gatherer.gather(RankQuery(turns=TURNS, candidates=[], bank="faq"))
    with pytest.raises(UnknownIntent):  # in every mask mode
        await gatherer.gather(query("sure", intent="nope", mask_mode=MaskMode.OFF))


# Scorer


@pytest.fixture
async def scorer(tmp_path: Path):
    encoder = PairEncoder.from_file(write_tiny_tokenizer(tmp_path / "tokenizer.json"), max_length=64)
    backend = FakeBackend()
    backend.start()
    batcher = Batcher(backend=backend, pad=encoder.pad, settings=BatchingSettings(), metrics=Metrics())
    await batcher.start()
    executor = ThreadPoolExecutor(1)
    off_loop = OffLoopEncoder(encoder, executor=executor, metrics=Metrics(), backend="fake", model="m")
    yield (
        LogitScorer(
            encoder=off_loop, batcher=batcher, views=ONE_VIEW, cache_entries=100, metrics=Metrics(), model="m"
        ),
        backend,
        encoder,
    )
    await batcher.close()
    executor.shutdown()


async def test_the_scorer_computes_a_logit_per_text_and_keeps_them_for_the_next_request(scorer) -> None:
    logit_scorer, backend, encoder = scorer
    texts = ["sure", "no"]

    async def score():
        deadline = time.perf_counter() + 5
        return await logit_scorer.score(
            TURNS, [], texts, max_candidate_tokens=None, deadline=deadline, timeout_s=5
        )

    first = await score()
    expected = [hashed_logit(p.input_ids) for p in encoder.encode_request(TURNS, [], texts)]
    np.testing.assert_allclose(first.logits, expected, rtol=1e-6)
    assert first.input_tokens == first.computed_tokens > 0
    calls = backend.calls
    again = await score()
    assert backend.calls == calls, "the cached logits reached the backend"
    np.testing.assert_array_equal(again.logits, first.logits)
    assert again.input_tokens == first.input_tokens and again.computed_tokens == 0


async def test_the_scorer_refuses_a_request_that_cannot_finish_before_its_deadline(scorer) -> None:
    logit_scorer, _, _ = scorer
    logit_scorer.batcher.rate.observe(candidates=1, seconds=10.0)  # as measured on a very slow backend
    with pytest.raises(Overloaded):
        await logit_scorer.score(
            TURNS, [], ["sure"], max_candidate_tokens=None, deadline=time.perf_counter() + 1, timeout_s=1
        )


# Reading


def reader(bank_fusion: Fusion | None = None) -> ScoreReader:
    return ScoreReader(
        model_id="m@1",
        calibration=Calibrator.from_dict({"method": "platt", "a": 1.0, "b": 0.0}),
        threshold=0.5,
        bank_fusion=bank_fusion,
        soft_mask_penalty=0.5,
        metrics=Metrics(),
        model="m",
    )


def test_a_bank_request_is_read_with_the_fusions_map_and_any_other_with_the_bundles() -> None:
    own = Calibrator.from_dict({"method": "platt", "a": 2.0, "b": 0.0})
    fusion = Fusion(cosine_weight=10.0, cosine_centre=0.5, calibration=own, threshold=0.9)
    plain = reader(fusion).reading(query("sure"))
    banked = reader(fusion).reading(RankQuery(turns=TURNS, candidates=[], bank="faq"))
    assert plain.threshold == 0.5 and plain.fusion.cosine_weight == 0
    assert banked.calibration is own and banked.threshold == 0.9 and banked.fusion is fusion
    banked_candidates = Candidates([Candidate("a", "x", bank="faq", retrieval_score=0.6)], [None], [0])
    assert banked.scores(np.zeros(1, dtype=np.float32), banked_candidates).tolist() == pytest.approx([1.0])


def test_the_reading_penalises_soft_masks_orders_abstains_and_cuts_to_top_k() -> None:
    q = RankQuery(
        turns=TURNS,
        candidates=[],
        statements=["a", "b"],
        mask_mode=MaskMode.SOFT,
        top_k=1,
        min_score=0.99,
    )
    candidates = Candidates(
        [Candidate("low", "x"), Candidate("masked", "y"), Candidate("high", "z")],
        [None, MaskReason.REPEATS_A_TURN, None],
        [0, 1, 2],
    )
    result = reader().result(q, candidates, Logits(np.asarray([-1.0, 3.0, 1.0], dtype=np.float32), 7, 5))
    # The masked one's probability (0.95) is halved below the high one's (0.73).
    assert [r.id for r in result.ranking] == ["high"]
    assert result.abstain and result.threshold == 0.99
    assert result.statements_used == [0, 1]
    assert (result.input_tokens, result.computed_tokens) == (7, 5)
