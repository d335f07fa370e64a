"""Candidate logits already computed, kept for the next request that needs them.

A candidate's logit depends only on its own view of the request: the turns of that view, the
statements kept, the candidate's text and its token cut. Shared-prefix sequences give each
candidate its own segment and positions (``serving.list_encoding``), per-pair sequences hold one
candidate each, and the shipped graphs quantize activations per token, so the same candidate
scores the same whichever other candidates share its sequence or batch, up to the rounding that
batching brings anyway (other sequence lengths change the order of the int8 graph's sums: about
0.001 of a logit on model 2.8.0, ``tests/integration/test_onnx_ranking.py``). That makes a logit
reusable wherever those four things repeat:

- the reply's prior view (a bare turn, no context) of every candidate a socialbot's template
  generator or an agent's fixed action list offers turn after turn;
- every view of a request sent again (a client's retry after a timeout, a dialog manager that
  re-ranks the same turn).

Keys are 16-byte BLAKE2b digests of those four things, and an entry keeps the logit with the
number of tokens its pair read (a rerank client's ``usage`` counts a kept candidate as a computed
one), so it costs about 230 bytes however long the conversation; a collision needs about 2**64
entries. Least recently used entries go
first. Written here rather than taken from ``functools.lru_cache`` because entries are read and
filled a list at a time around one backend call (the misses of a request are scored together),
which a memoised function cannot do; ``cachetools`` would add a dependency for an ``OrderedDict``.
One event loop uses it, so it takes no lock.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from dialogue_ranker.serving.tokenization import Turn

#: Separates fields in the digested key (never in request text: it is a control character).
_SEP = "\x1f"


class Kept(NamedTuple):
    """A computed candidate: its logit, and the tokens of its pair (a shared prefix's plus its own)."""

    logit: float
    tokens: int


class LogitCache:
    """At most ``max_entries`` candidate logits, least recently used dropped first (0: keeps none)."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries {max_entries} is not >= 0")
        self.max_entries = max_entries
        self._entries: OrderedDict[bytes, Kept] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def prefix_key(
        turns: Sequence[Turn], statements: Sequence[str], max_candidate_tokens: int | None
    ) -> bytes:
        """What every candidate of one view shares: its turns, the statements and the token cut."""
        digest = hashlib.blake2b(digest_size=16)
        for turn in turns:
            digest.update(f"t{_SEP}{turn.speaker}{_SEP}{turn.text}{_SEP}".encode())
        for statement in statements:
            digest.update(f"s{_SEP}{statement}{_SEP}".encode())
        digest.update(f"m{_SEP}{max_candidate_tokens}".encode())
        return digest.digest()

    @staticmethod
    def key(prefix: bytes, candidate: str) -> bytes:
        """One candidate's key under a view's :meth:`prefix_key`."""
        return hashlib.blake2b(prefix + candidate.encode(), digest_size=16).digest()

    def get(self, key: bytes) -> Kept | None:
        """What is kept under ``key`` (now the most recently used), or None."""
        kept = self._entries.get(key)
        if kept is not None:
            self._entries.move_to_end(key)
        return kept

    def put(self, key: bytes, kept: Kept) -> None:
        """Keep ``kept`` under ``key``, dropping the least recently used entry when full."""
        if self.max_entries == 0:
            return
        self._entries[key] = kept
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
