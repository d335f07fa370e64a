"""The logit cache: least recently used first out, keys that tell views apart, reuse through /rank."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers import serve_in_process, write_fake_bundle
from test_ranking import COFFEE_THEN_TEA, app_with, word_scores

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.logit_cache import Kept, LogitCache
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Turn

USER_TEA = [Turn("user", "tea please")]


def test_the_least_recently_used_entry_goes_first() -> None:
    cache = LogitCache(2)
    a, b, c = Kept(1.0, 10), Kept(2.0, 20), Kept(3.0, 30)
    cache.put(b"a", a)
    cache.put(b"b", b)
    assert cache.get(b"a") == a  # now b is the least recently used
    cache.put(b"c", c)
    assert (cache.get(b"a"), cache.get(b"b"), cache.get(b"c"), len(cache)) == (a, None, c, 2)


def test_a_cache_of_no_entries_keeps_nothing_and_a_negative_size_is_refused() -> None:
    cache = LogitCache(0)
    cache.put(b"a", Kept(1.0, 10))
    assert cache.get(b"a") is None and len(cache) == 0
    with pytest.raises(ValueError, match="max_entries -1"):
        LogitCache(-1)


@pytest.mark.parametrize(
    "other",
    [
        ([Turn("bot", "tea please")], [], None),  # the speaker
        ([Turn("user", "tea, please")], [], None),  # the text
        ([Turn("user", "tea"), Turn("user", "please")], [], None),  # where turns end
        (USER_TEA, ["it is morning"], None),  # the statements
        (USER_TEA, [], 8),  # the candidate's token cut
    ],
)
def test_a_key_changes_with_anything_the_logit_depends_on(other) -> None:
    key = LogitCache.key(LogitCache.prefix_key(USER_TEA, [], None), "sure")
    assert key == LogitCache.key(LogitCache.prefix_key(list(USER_TEA), (), None), "sure")
    assert key != LogitCache.key(LogitCache.prefix_key(*other), "sure")
    assert key != LogitCache.key(LogitCache.prefix_key(USER_TEA, [], None), "sure!")


def prior_bundle(path: Path) -> Path:
    """A fake bundle that scores three views of a multi-turn request."""
    bundle = write_fake_bundle(path)
    meta = json.loads((bundle / "metadata.json").read_text())
    views = {"last_turn_weight": 0.5, "prior_weight": 0.2, "prior_centre": -1.0}
    (bundle / "metadata.json").write_text(json.dumps({**meta, "views": views}))
    return bundle


def counted(bundle: Path, calls: list[Sequence[int]]):
    score = word_scores(bundle, {"coffee": 3.0, "tea": 2.0, "sure": 1.0})

    def count(ids: Sequence[int]) -> float:
        calls.append(ids)
        return score(ids)

    return count


def lookups(metrics: str, result: str) -> float:
    line = f'ranker_logit_cache_lookups_total{{model="tiny-fake",result="{result}"}} '
    return float(next(x for x in metrics.splitlines() if x.startswith(line)).split()[-1])


async def test_a_repeated_request_is_answered_from_the_cache_with_the_same_logits(tmp_path: Path) -> None:
    bundle = prior_bundle(tmp_path / "b")
    calls: list[Sequence[int]] = []
    async with serve_in_process(app_with(bundle, counted(bundle, calls))) as client:
        warm_up = len(calls)
        first = (await client.post("/rank", json=COFFEE_THEN_TEA)).json()
        computed = len(calls)
        again = (await client.post("/rank", json=COFFEE_THEN_TEA)).json()
        metrics = (await client.get("/metrics")).text
    assert computed - warm_up == 6  # 2 candidates x 3 views
    assert len(calls) == computed  # nothing computed the second time
    assert again["ranking"] == first["ranking"]
    assert (lookups(metrics, "miss"), lookups(metrics, "hit")) == (6.0, 6.0)
    assert 'ranker_logit_cache_entries{model="tiny-fake"} 6.0' in metrics


async def test_a_new_context_reuses_only_the_reply_s_prior(tmp_path: Path) -> None:
    """The bare-turn view does not see the context, so a fixed candidate list computes it once."""
    bundle = prior_bundle(tmp_path / "b")
    calls: list[Sequence[int]] = []
    other_turn = {**COFFEE_THEN_TEA, "context": [*COFFEE_THEN_TEA["context"][:-1], {"text": "tea now"}]}
    async with serve_in_process(app_with(bundle, counted(bundle, calls))) as client:
        await client.post("/rank", json=COFFEE_THEN_TEA)
        before = len(calls)
        cached = (await client.post("/rank", json=other_turn)).json()
        metrics = (await client.get("/metrics")).text
    assert len(calls) - before == 4  # the full and last-turn views of 2 candidates
    assert lookups(metrics, "hit") == 2.0
    # The same request on a fresh service (empty cache) gives the same logits.
    async with serve_in_process(app_with(bundle, counted(bundle, []))) as client:
        fresh = (await client.post("/rank", json=other_turn)).json()
    assert cached["ranking"] == fresh["ranking"]


async def test_with_no_entries_every_request_is_computed(tmp_path: Path) -> None:
    bundle = prior_bundle(tmp_path / "b")
    calls: list[Sequence[int]] = []
    app = app_with(bundle, counted(bundle, calls), ranking={"logit_cache_entries": 0})
    async with serve_in_process(app) as client:
        warm_up = len(calls)
        await client.post("/rank", json=COFFEE_THEN_TEA)
        await client.post("/rank", json=COFFEE_THEN_TEA)
        metrics = (await client.get("/metrics")).text
    assert len(calls) - warm_up == 12
    assert (lookups(metrics, "miss"), lookups(metrics, "hit")) == (12.0, 0.0)


@pytest.mark.parametrize("entries", [65536, 0], ids=["cache", "no-cache"])
async def test_admission_counts_only_the_logits_still_to_compute(fake_bundle: Path, entries: int) -> None:
    """A backend measured at 0.5 s a call: a 50 ms deadline admits a request only if nothing is left
    to compute for it."""
    settings = Settings(
        backend="fake", model=fake_bundle, fake={"latency_s": 0.5}, ranking={"logit_cache_entries": entries}
    )
    body = {"context": "could you make some coffee", "candidates": ["sure", "no"]}
    hurry = {"X-Request-Timeout-S": "0.05"}
    async with serve_in_process(create_app(settings)) as client:
        first = await client.post("/rank", json=body)
        again = await client.post("/rank", json=body, headers=hurry)
        new = await client.post("/rank", json={**body, "candidates": ["sure", "later"]}, headers=hurry)
    assert first.status_code == 200
    assert (again.status_code, new.status_code) == ((200, 429) if entries else (429, 429))
    if entries:
        assert again.json()["ranking"] == first.json()["ranking"]
