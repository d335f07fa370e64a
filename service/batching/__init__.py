"""Pairs from concurrent requests in, one logit per pair out: a bounded queue and a batcher."""

from service.batching.batcher import Batcher
from service.batching.queue import PairQueue, WorkItem

__all__ = ["Batcher", "PairQueue", "WorkItem"]
