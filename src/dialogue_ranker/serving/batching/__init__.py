"""Sequences from concurrent requests in, one logit per sequence out: a bounded queue and a batcher.

With a remote backend that batches itself (Triton), :class:`DirectScorer` replaces the batcher.
"""

from dialogue_ranker.serving.batching.batcher import Batcher
from dialogue_ranker.serving.batching.direct import DirectScorer
from dialogue_ranker.serving.batching.queue import SequenceQueue, WorkItem
from dialogue_ranker.serving.batching.scorer import Scorer

__all__ = ["Batcher", "DirectScorer", "SequenceQueue", "Scorer", "WorkItem"]
