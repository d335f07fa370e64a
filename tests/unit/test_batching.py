from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from service.backends.fake import FakeBackend, hashed_logit
from service.batching import Batcher, PairQueue, WorkItem
from service.errors import BackendError, NotReady, Overloaded
from service.metrics import Metrics
from service.settings import BatchingSettings
from service.tokenization import EncodedPair, PairEncoder

PAD_ID = 0


def pair(length: int, seed: int = 1) -> EncodedPair:
    ids = [(seed * 7 + i) % 50 + 5 for i in range(length)]
    return EncodedPair(input_ids=ids, token_type_ids=[0] * length, turns_kept=1, statements_kept=0)


def pad(pairs, *, pad_to=None):
    # PairEncoder.pad only needs the pad id.
    encoder = PairEncoder.__new__(PairEncoder)
    encoder.pad_id = PAD_ID
    return PairEncoder.pad(encoder, pairs, pad_to=pad_to)


async def make_batcher(backend: FakeBackend, **overrides) -> Batcher:
    settings = BatchingSettings(**{"max_wait_s": 0.01, **overrides})
    backend.start()
    batcher = Batcher(
        backend=backend, pad=pad, settings=settings, executor=ThreadPoolExecutor(2), metrics=Metrics()
    )
    await batcher.start()
    return batcher


@pytest.fixture
async def fake() -> AsyncIterator[FakeBackend]:
    yield FakeBackend()


async def test_each_pair_gets_its_own_logit_in_order(fake: FakeBackend) -> None:
    batcher = await make_batcher(fake)
    pairs = [pair(n, seed=n) for n in (9, 3, 7, 5)]
    logits = await batcher.score(pairs)
    assert logits.tolist() == pytest.approx([hashed_logit(p.input_ids) for p in pairs])
    await batcher.close()


async def test_concurrent_requests_share_one_batch_sorted_by_length(fake: FakeBackend) -> None:
    batcher = await make_batcher(fake, max_wait_s=0.05)
    requests = [[pair(12, 1), pair(4, 2)], [pair(8, 3)], [pair(2, 4), pair(10, 5)]]
    results = await asyncio.gather(*(batcher.score(r) for r in requests))
    assert fake.calls == 1
    assert fake.batch_shapes == [(5, 12)]
    for request, logits in zip(requests, results, strict=True):
        assert logits.tolist() == pytest.approx([hashed_logit(p.input_ids) for p in request])
    await batcher.close()


async def test_batch_closes_on_max_pairs(fake: FakeBackend) -> None:
    batcher = await make_batcher(fake, max_pairs=2, max_wait_s=0.5)
    await batcher.score([pair(3, i) for i in range(5)])
    assert [shape[0] for shape in fake.batch_shapes] == [2, 2, 1]
    await batcher.close()


async def test_batch_closes_on_max_tokens(fake: FakeBackend) -> None:
    batcher = await make_batcher(fake, max_tokens=20, max_wait_s=0.5)
    await batcher.score([pair(10, i) for i in range(4)])
    assert [shape[0] for shape in fake.batch_shapes] == [2, 2]
    await batcher.close()


async def test_sub_batches_are_padded_to_length_buckets(fake: FakeBackend) -> None:
    batcher = await make_batcher(fake, sub_batch_pairs=2, pad_to_multiple=8)
    pairs = [pair(3, 1), pair(9, 2), pair(5, 3)]
    logits = await batcher.score(pairs)
    assert fake.batch_shapes == [(2, 8), (1, 16)]
    assert logits.tolist() == pytest.approx([hashed_logit(p.input_ids) for p in pairs])
    await batcher.close()


async def test_a_failed_batch_fails_every_waiter_with_the_same_error_and_the_worker_continues() -> None:
    backend = FakeBackend(fail_every_n_batches=1)
    batcher = await make_batcher(backend, max_wait_s=0.05)
    results = await asyncio.gather(
        batcher.score([pair(4, 1)]), batcher.score([pair(5, 2), pair(6, 3)]), return_exceptions=True
    )
    assert all(isinstance(r, BackendError) for r in results)
    assert results[0] is results[1]
    backend.fail_every_n_batches = 0
    assert (await batcher.score([pair(4, 1)])).shape == (1,)
    failures = batcher.metrics.registry.get_sample_value("ranker_batch_failures_total", {"model": "ranker"})
    assert failures == 1.0
    await batcher.close()


async def test_an_unexpected_backend_exception_becomes_a_backend_error() -> None:
    backend = FakeBackend(score_fn=lambda ids: 1 / 0)
    batcher = await make_batcher(backend)
    with pytest.raises(BackendError):
        await batcher.score([pair(4)])
    await batcher.close()


async def test_pairs_of_a_cancelled_request_are_dropped_from_the_batch() -> None:
    backend = FakeBackend()
    batcher = await make_batcher(backend, max_wait_s=0.2)
    cancelled = asyncio.create_task(batcher.score([pair(4, 1), pair(4, 2)]))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    kept = await batcher.score([pair(6, 3)])
    assert kept.shape == (1,)
    assert backend.batch_shapes == [(1, 6)]
    await batcher.close()


async def test_a_full_queue_refuses_the_whole_request() -> None:
    backend = FakeBackend(latency_s=0.2)
    batcher = await make_batcher(backend, max_pairs=1, queue_max_pairs=2, max_wait_s=0.0)
    first = asyncio.create_task(batcher.score([pair(3, 1), pair(3, 2)]))
    await asyncio.sleep(0.05)
    with pytest.raises(Overloaded) as refused:
        await batcher.score([pair(3, 3), pair(3, 4)])
    assert refused.value.headers["Retry-After"] == "1"
    assert (await first).shape == (2,)
    await batcher.close()


async def test_closing_fails_waiting_pairs_with_not_ready() -> None:
    backend = FakeBackend(latency_s=0.2)
    batcher = await make_batcher(backend, max_pairs=1, max_wait_s=0.0)
    waiting = asyncio.create_task(batcher.score([pair(3, 1), pair(3, 2)]))
    await asyncio.sleep(0.05)
    await batcher.close()
    with pytest.raises(NotReady):
        await waiting
    with pytest.raises(NotReady):
        await batcher.score([pair(3)])


async def test_queue_take_respects_the_token_budget_but_always_takes_one() -> None:
    loop = asyncio.get_running_loop()
    queue = PairQueue(max_pairs=10)
    queue.put_all([WorkItem(pair(50), loop.create_future()), WorkItem(pair(5), loop.create_future())])
    assert len(queue.take(max_pairs=10, max_tokens=10)) == 1
    assert len(queue.take(max_pairs=10, max_tokens=10)) == 1
    assert len(queue) == 0 and queue.tokens == 0


def test_fake_backend_scores_do_not_depend_on_padding() -> None:
    backend = FakeBackend()
    backend.start()
    pairs = [pair(3, 1), pair(7, 2)]
    alone = backend.infer(pad(pairs[:1]))
    padded = backend.infer(pad(pairs, pad_to=16))
    np.testing.assert_allclose(alone, padded[:1])
