"""Pairs from concurrent requests in, one logit per pair out: a bounded queue and a batcher.

With a remote backend that batches itself (Triton), :class:`DirectScorer` replaces the batcher.
"""

from dialogue_ranker.serving.batching.batcher import Batcher
from dialogue_ranker.serving.batching.direct import DirectScorer
from dialogue_ranker.serving.batching.queue import PairQueue, WorkItem
from dialogue_ranker.serving.batching.scorer import Scorer

__all__ = ["Batcher", "DirectScorer", "PairQueue", "Scorer", "WorkItem"]
