"""One recorder for backend calls: the gateway's batcher and the direct path count the same things."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import write_tiny_tokenizer

from dialogue_ranker.serving.backends.fake import FakeBackend
from dialogue_ranker.serving.batching import Batcher, DirectScorer
from dialogue_ranker.serving.list_encoding import ListBatch, ListEncoder
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import BatchingSettings
from dialogue_ranker.serving.tokenization import Batch, Turn

CANDIDATES = [f"candidate {word}" for word in ("one", "two", "three", "four", "five", "six", "seven")]


class RemoteFake:
    """The fake backend behind a remote backend's interface (what the direct path calls)."""

    name = "fake-remote"
    length_buckets: tuple[int, ...] = ()
    max_batch_pairs = 8

    def __init__(self) -> None:
        self.local = FakeBackend()
        self.local.start()

    async def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        return self.local.infer(batch)


def sample(metrics: Metrics, name: str, labels: dict[str, str]) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    assert value is not None, (name, labels)
    return value


@pytest.fixture
def encoder(tmp_path: Path) -> ListEncoder:
    # Three candidates per sequence at most: seven candidates make three sequences.
    return ListEncoder.from_file(write_tiny_tokenizer(tmp_path / "tokenizer.json"), max_chunk_candidates=3)


async def test_the_batcher_and_the_direct_path_count_the_same_candidates_and_sequences(
    encoder: ListEncoder,
) -> None:
    sequences = encoder.encode_request([Turn("user", "could you make some coffee")], [], CANDIDATES)
    assert len(sequences) == 3
    local, direct = Metrics(), Metrics()
    batcher = Batcher(backend=FakeBackend(), pad=encoder.pad, settings=BatchingSettings(), metrics=local)
    batcher.backend.start()
    await batcher.start()
    scorer = DirectScorer(backend=RemoteFake(), pad=encoder.pad, metrics=direct, max_in_flight_pairs=100)
    await scorer.start()
    try:
        in_process = await batcher.score(sequences)
        remote = await scorer.score(sequences)
    finally:
        await batcher.close()
        await scorer.close()
    np.testing.assert_array_equal(in_process, remote)
    assert len(in_process) == len(CANDIDATES)
    model = {"model": "default"}
    for metrics in (local, direct):
        assert sample(metrics, "ranker_computed_sequences_total", model) == 3
        assert sample(metrics, "ranker_computed_candidates_total", model) == len(CANDIDATES)
        assert sample(metrics, "ranker_batch_sequences_sum", model) == 3
        assert sample(metrics, "ranker_batch_candidates_sum", model) == len(CANDIDATES)
        # The deprecated aliases: the old label set, the candidates counted on both paths.
        old = {**model, "role": "ranker"}
        assert sample(metrics, "ranker_computed_pairs_total", old) == len(CANDIDATES)
        assert sample(metrics, "ranker_batch_pairs_sum", old) == 3
