"""Pairs from concurrent requests in, one logit per pair out: a bounded queue and a batcher.

With a remote backend that batches itself (Triton), :class:`DirectScorer` replaces the batcher.
"""

from service.batching.batcher import Batcher
from service.batching.direct import DirectScorer
from service.batching.queue import PairQueue, WorkItem
from service.batching.scorer import Scorer

__all__ = ["Batcher", "DirectScorer", "PairQueue", "Scorer", "WorkItem"]
