from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest

from dialogue_ranker.serving.backends.fake import FakeBackend, hashed_logit
from dialogue_ranker.serving.batching import Batcher, SequenceQueue, WorkItem
from dialogue_ranker.serving.batching.admission import Backlog, ServiceRate, admit
from dialogue_ranker.serving.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    NotReady,
    Overloaded,
)
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import BatchingSettings, BreakerSettings
from dialogue_ranker.serving.tokenization import EncodedPair, PairEncoder

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
    # One call at a time (the default runs 2 on a 2-CPU box): these tests count and order calls.
    settings = BatchingSettings(**{"max_wait_s": 0.01, "workers": 1, **overrides})
    backend.start()
    batcher = Batcher(backend=backend, pad=pad, settings=settings, metrics=Metrics())
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


async def test_a_backend_failing_every_call_fails_every_waiter_and_the_worker_continues() -> None:
    backend = FakeBackend(fail_every_n_batches=1)
    batcher = await make_batcher(backend, max_wait_s=0.05)
    results = await asyncio.gather(
        batcher.score([pair(4, 1)]), batcher.score([pair(5, 2), pair(6, 3)]), return_exceptions=True
    )
    assert all(isinstance(r, BackendError) for r in results)
    backend.fail_every_n_batches = 0
    assert (await batcher.score([pair(4, 1)])).shape == (1,)
    sample = batcher.recorder.metrics.registry.get_sample_value
    # Each request's first failing pair failed alone, twice; a failed request's other pairs never run.
    assert sample("ranker_batch_failures_total", {"model": "default"}) >= 4.0
    assert sample("ranker_failed_sequences_total", {"model": "default"}) == 2.0
    await batcher.close()


async def test_a_poison_pair_fails_only_its_own_request() -> None:
    poison = [99, 98]
    backend = FakeBackend(fail_on_ids=poison)
    batcher = await make_batcher(backend, max_wait_s=0.05)
    bad = EncodedPair(input_ids=[5, 99, 98, 6], token_type_ids=[0] * 4, turns_kept=1, statements_kept=0)
    requests = [[pair(4, seed), pair(5, seed + 10)] for seed in range(1, 8)]
    requests[3] = [pair(4, 40), bad]
    results = await asyncio.gather(*(batcher.score(r) for r in requests), return_exceptions=True)
    assert isinstance(results[3], BackendError)
    for i, result in enumerate(results):
        if i != 3:
            assert isinstance(result, np.ndarray), result
            np.testing.assert_allclose(result, [hashed_logit(p.input_ids) for p in requests[i]], rtol=1e-6)
    assert (
        batcher.recorder.metrics.registry.get_sample_value(
            "ranker_failed_sequences_total", {"model": "default"}
        )
        == 1.0
    )
    await batcher.close()


async def test_one_call_in_three_failing_fails_no_request() -> None:
    backend = FakeBackend(fail_every_n_batches=3)
    batcher = await make_batcher(backend, max_wait_s=0.01, sub_batch_pairs=4)
    results = await asyncio.gather(
        *(batcher.score([pair(4, s), pair(6, s + 1)]) for s in range(30)), return_exceptions=True
    )
    assert all(isinstance(r, np.ndarray) for r in results)
    assert (
        batcher.recorder.metrics.registry.get_sample_value(
            "ranker_batch_failures_total", {"model": "default"}
        )
        >= 1
    )
    await batcher.close()


async def test_the_breaker_opens_on_repeated_failures_answers_503_and_recovers() -> None:
    backend = FakeBackend(fail_every_n_batches=1)
    batcher = Batcher(
        backend=backend, pad=pad, settings=BatchingSettings(max_wait_s=0.0, workers=1),
        metrics=Metrics(),
        breaker=BreakerSettings(failure_threshold=2, cooldown_s=0.3),
    )  # fmt: skip
    backend.start()
    await batcher.start()
    for _ in range(2):
        with pytest.raises(BackendError):
            await batcher.score([pair(4)])
    assert not batcher.available()
    calls = backend.calls
    with pytest.raises(BackendUnavailable):
        await batcher.score([pair(4)])
    assert backend.calls == calls, "an open breaker must not reach the backend"
    await asyncio.sleep(0.35)
    assert batcher.available()  # half-open: the next batch is the trial
    backend.fail_every_n_batches = 0
    assert (await batcher.score([pair(4)])).shape == (1,)
    assert batcher.breaker.consecutive_failures == 0 and batcher.available()
    await batcher.close()


async def test_each_backend_call_resolves_its_pairs_when_it_returns() -> None:
    backend = FakeBackend(latency_s=0.1)
    batcher = await make_batcher(backend, max_wait_s=0.05, sub_batch_pairs=1)
    short = asyncio.create_task(batcher.score([pair(3, 1)]))
    long = asyncio.create_task(batcher.score([pair(8, s) for s in range(2, 8)]))
    done, _ = await asyncio.wait({short, long}, return_when=asyncio.FIRST_COMPLETED)
    assert done == {short}, "the one-pair request waited for its batch-mates"
    assert (await long).shape == (6,)
    await batcher.close()


def test_admission_refuses_work_that_does_not_fit_the_deadline_with_a_truthful_retry_after() -> None:
    backlog = Backlog()
    admit(wait_s=0.7, remaining_s=1.0, margin=0.8, what="ranking")  # fits 0.8 s
    with backlog.hold(3.0), pytest.raises(Overloaded) as refused:
        admit(wait_s=backlog.seconds + 0.5, remaining_s=1.0, margin=0.8, what="ranking")
    # 3.5 s of work against 0.8 s of budget: it fits once 2.7 s of it have been done.
    assert refused.value.headers["Retry-After"] == "3"
    assert backlog.seconds == 0.0
    with pytest.raises(BackendTimeout):
        admit(wait_s=0.0, remaining_s=0.0, margin=0.8, what="ranking")


async def test_the_measured_speed_turns_pairs_into_seconds() -> None:
    backend = FakeBackend(latency_s=0.05)
    batcher = await make_batcher(backend, max_wait_s=0.0, sub_batch_pairs=1)
    assert batcher.estimated_seconds(10) is None
    await batcher.score([pair(10, s) for s in range(4)])
    assert batcher.estimated_seconds(10) == pytest.approx(0.5, rel=0.3)
    await batcher.close()


def test_a_slow_call_of_one_candidate_weighs_as_one_candidate_in_the_measured_speed() -> None:
    rate = ServiceRate()
    for _ in range(10):
        rate.observe(candidates=32, seconds=0.32)  # 10 ms a candidate
    assert rate.seconds_per_candidate == pytest.approx(0.01)
    rate.observe(candidates=1, seconds=0.5)  # a long situated context, or a CPU taken for a moment
    # Its half second joins about 115 candidates' worth of recent work (0.014 s a candidate); a
    # running mean of each call's ratio would say 0.108 s, and 200 candidates 21.6 s.
    assert 0.01 < rate.seconds_per_candidate < 0.015
    assert rate.seconds_for(200) < 3.0


async def test_pairs_whose_deadline_passed_in_the_queue_never_run() -> None:
    backend = FakeBackend(latency_s=0.2)
    batcher = await make_batcher(backend, max_wait_s=0.0, max_pairs=1, admission_margin=1.0)
    await batcher.score([pair(4, 9)])  # measured: 0.2 s a pair
    # Admitted (0.6 s of work at the measured speed fits 0.65 s), but the pair ahead runs long.
    backend.latency_s = 0.7
    first = asyncio.create_task(batcher.score([pair(4, 1)]))
    await asyncio.sleep(0.01)
    with pytest.raises(BackendTimeout):
        await batcher.score([pair(4, 2), pair(4, 3)], deadline=time.perf_counter() + 0.65)
    await first
    await asyncio.sleep(0.05)
    assert backend.calls == 2
    dropped = batcher.recorder.metrics.registry.get_sample_value
    assert dropped("ranker_dropped_sequences_total", {"model": "default", "reason": "expired"}) == 2.0
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
    queue = SequenceQueue(max_pairs=10)
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


async def test_two_workers_run_two_backend_calls_at_once() -> None:
    """With batching.workers 2 a second batch starts while the first call is still running."""
    slow = FakeBackend(latency_s=0.2)
    batcher = await make_batcher(slow, workers=2, sub_batch_pairs=1, max_wait_s=0.0)
    started = time.perf_counter()
    first = asyncio.create_task(batcher.score([pair(6, 1)]))
    await asyncio.sleep(0.02)  # the first call is under way before the second request arrives
    second = asyncio.create_task(batcher.score([pair(6, 2)]))
    await asyncio.gather(first, second)
    elapsed = time.perf_counter() - started
    await batcher.close()
    assert slow.calls == 2
    assert elapsed < 0.35, f"the calls ran one after the other ({elapsed:.2f} s)"
