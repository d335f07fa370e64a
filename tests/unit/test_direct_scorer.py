"""DirectScorer: a remote backend's pairs go out per request, padded to length buckets, no queue."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from helpers import serve_in_process

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends import is_remote
from dialogue_ranker.serving.backends.fake import FakeBackend, hashed_logit
from dialogue_ranker.serving.batching import DirectScorer
from dialogue_ranker.serving.batching.direct import bucket_length
from dialogue_ranker.serving.errors import BackendError, BackendUnavailable, NotReady, Overloaded
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Batch, EncodedPair, PairEncoder


class FakeRemoteBackend:
    """A remote backend double: async calls, recorded shapes, optional failure or delay."""

    name = "fake-remote"

    def __init__(self, *, buckets: tuple[int, ...] = (8, 16, 32), max_batch_pairs: int = 4) -> None:
        self.length_buckets = buckets
        self.max_batch_pairs = max_batch_pairs
        self.shapes: list[tuple[int, int]] = []
        self.error: Exception | None = None
        self.delay_s = 0.0
        self.ready = True

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def health(self) -> bool:
        return self.ready

    async def infer(self, batch: Batch) -> np.ndarray:
        self.shapes.append(batch.shape)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        rows = zip(batch.input_ids, batch.attention_mask, strict=True)
        return np.array(
            [hashed_logit(ids[mask.astype(bool)].tolist()) for ids, mask in rows], dtype=np.float32
        )


def pair(length: int, seed: int = 1) -> EncodedPair:
    ids = [(seed * 7 + i) % 50 + 5 for i in range(length)]
    return EncodedPair(input_ids=ids, token_type_ids=[0] * length, turns_kept=1, statements_kept=0)


def pad(pairs, *, pad_to=None):
    encoder = PairEncoder.__new__(PairEncoder)
    encoder.pad_id = 0
    return PairEncoder.pad(encoder, pairs, pad_to=pad_to)


async def make_scorer(backend: FakeRemoteBackend, *, max_in_flight_pairs: int = 100) -> DirectScorer:
    scorer = DirectScorer(
        backend=backend, pad=pad, metrics=Metrics(), max_in_flight_pairs=max_in_flight_pairs
    )
    await scorer.start()
    return scorer


def test_a_pair_goes_to_the_smallest_bucket_that_holds_it() -> None:
    assert [bucket_length(n, (8, 16, 32)) for n in (1, 8, 9, 32, 40)] == [8, 8, 16, 32, 40]
    assert bucket_length(13, ()) == 13


async def test_each_pair_gets_its_own_logit_in_order() -> None:
    scorer = await make_scorer(FakeRemoteBackend())
    pairs = [pair(n, seed=n) for n in (20, 3, 9, 30, 5)]
    logits = await scorer.score(pairs)
    assert logits.tolist() == pytest.approx([hashed_logit(p.input_ids) for p in pairs])


async def test_pairs_are_padded_to_their_bucket_and_split_at_the_max_batch() -> None:
    backend = FakeRemoteBackend(max_batch_pairs=4)
    scorer = await make_scorer(backend)
    await scorer.score([pair(5, seed=i) for i in range(6)] + [pair(12), pair(20)])
    assert sorted(backend.shapes) == sorted([(4, 8), (2, 8), (1, 16), (1, 32)])


async def test_without_buckets_a_request_is_padded_to_its_longest_pair() -> None:
    backend = FakeRemoteBackend(buckets=())
    scorer = await make_scorer(backend)
    await scorer.score([pair(5), pair(11), pair(7)])
    assert backend.shapes == [(3, 11)]


async def test_concurrent_requests_are_not_queued_behind_each_other() -> None:
    backend = FakeRemoteBackend()
    backend.delay_s = 0.05
    scorer = await make_scorer(backend)
    await asyncio.gather(*(scorer.score([pair(6, seed=i)]) for i in range(5)))
    assert backend.shapes == [(1, 8)] * 5  # one call per request: the remote batcher merges them


async def test_a_failed_call_fails_the_request_with_its_error() -> None:
    backend = FakeRemoteBackend()
    backend.error = BackendUnavailable("down")
    scorer = await make_scorer(backend)
    with pytest.raises(BackendUnavailable):
        await scorer.score([pair(4), pair(20)])
    assert scorer.in_flight == 0


async def test_an_unexpected_backend_exception_becomes_a_backend_error() -> None:
    backend = FakeRemoteBackend()
    backend.error = RuntimeError("secret internals")
    scorer = await make_scorer(backend)
    with pytest.raises(BackendError) as raised:
        await scorer.score([pair(4)])
    assert "secret" not in raised.value.message


async def test_pairs_over_the_in_flight_limit_are_refused_with_overloaded() -> None:
    scorer = await make_scorer(FakeRemoteBackend(), max_in_flight_pairs=3)
    with pytest.raises(Overloaded):
        await scorer.score([pair(4)] * 4)


async def test_a_closed_scorer_is_not_ready() -> None:
    scorer = await make_scorer(FakeRemoteBackend())
    await scorer.close()
    with pytest.raises(NotReady):
        await scorer.score([pair(4)])


def test_only_a_backend_with_coroutine_calls_is_remote() -> None:
    assert is_remote(FakeRemoteBackend()) and not is_remote(FakeBackend())


async def test_the_app_ranks_through_a_remote_backend_and_reports_its_readiness(fake_bundle: Path) -> None:
    backend = FakeRemoteBackend(buckets=(16, 64), max_batch_pairs=64)
    app = create_app(Settings(backend="fake", model=fake_bundle), backend_factory=lambda s, spec: backend)
    async with serve_in_process(app) as client:
        ranked = await client.post("/rank", json={"context": "hi", "candidates": ["hello", "sure", "no"]})
        assert (await client.get("/readyz")).status_code == 200
        backend.ready = False
        not_ready = await client.get("/readyz")
        metrics = (await client.get("/metrics")).text
    assert ranked.status_code == 200 and len(ranked.json()["ranking"]) == 3
    assert backend.shapes == [(3, 16)]
    assert not_ready.status_code == 503
    assert 'ranker_inference_duration_seconds_count{backend="fake-remote",model="tiny-fake"} 1.0' in metrics
