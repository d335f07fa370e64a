"""A deterministic fake backend: no model, configurable latency and failures.

A pair's logit depends only on its own real tokens (never on padding or batch neighbours), so
the fake is batch-invariant exactly like a correct model must be. Tests may pass ``score_fn`` to
choose logits from the tokens. Failures are injected two ways: every n-th call, or every call
that holds a "poison" pair (one whose tokens contain ``fail_on_ids``), so that a test can check
that only the requests holding a poison pair fail.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from dialogue_ranker.serving.errors import BackendError, BackendUnavailable
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.tokenization import Batch, load_tokenizer, token_ids

#: Maps one pair's real token ids to a logit.
ScoreFn = Callable[[Sequence[int]], float]


def hashed_logit(ids: Sequence[int]) -> float:
    """A stable pseudo-logit in [-5, 5] from token ids."""
    acc = 0
    for position, token in enumerate(ids):
        acc = (acc * 31 + token * (position + 7)) % 1_000_003
    return acc / 100_000.3 - 5.0


class FakeBackend:
    """Scores pairs by a pure function of their tokens."""

    name = "fake"

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        fail_every_n_batches: int = 0,
        score_fn: ScoreFn = hashed_logit,
        fail_on_ids: Sequence[int] = (),
    ) -> None:
        self.latency_s = latency_s
        self.fail_every_n_batches = fail_every_n_batches
        self.fail_on_ids = list(fail_on_ids)
        self.score_fn = score_fn
        self.healthy = True
        self.calls = 0
        self.batch_shapes: list[tuple[int, int]] = []
        self._started = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Nothing to load."""
        self._started = True

    def close(self) -> None:
        """Nothing to release."""
        self._started = False

    def health(self) -> bool:
        """The ``healthy`` flag (tests flip it)."""
        return self._started and self.healthy

    def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        """A logit per pair (per shared-prefix candidate) from its real tokens, after ``latency_s``."""
        if not self._started:
            raise BackendUnavailable("fake backend is not started")
        with self._lock:
            self.calls += 1
            call = self.calls
            self.batch_shapes.append(batch.shape)
        if self.latency_s:
            time.sleep(self.latency_s)
        if self.fail_every_n_batches and call % self.fail_every_n_batches == 0:
            raise BackendError(f"fake backend failure on call {call}")
        rows = _rows(batch)
        if self.fail_on_ids and any(_contains(row, self.fail_on_ids) for row in rows):
            raise BackendError(f"fake backend failure on call {call}: a poison pair")
        return np.array([self.score_fn(row) for row in rows], dtype=np.float32)


def _rows(batch: Batch | ListBatch) -> list[list[int]]:
    """The real tokens of each pair; of a shared-prefix row, the prefix plus each candidate."""
    if isinstance(batch, Batch):
        pairs = zip(batch.input_ids, batch.attention_mask, strict=True)
        return [ids[mask.astype(bool)].tolist() for ids, mask in pairs]
    rows = []
    for ids, segments in zip(batch.input_ids, batch.segment_ids, strict=True):
        for k in range(1, int(segments.max(initial=0)) + 1):
            rows.append(ids[(segments == 0) | (segments == k)].tolist())
    return rows


def _contains(row: list[int], needle: list[int]) -> bool:
    width = len(needle)
    return any(row[i : i + width] == needle for i in range(len(row) - width + 1))


def poison_ids(text: str, tokenizer_path: Path | None) -> list[int]:
    """The token ids of ``text`` as they stand inside a pair: no special tokens, no padding.

    Encoded as the pair encoders encode a text, whatever padding or truncation the tokenizer file
    configures (a bundle exported with ``transformers`` pads every encoding to its max length,
    which would make the needle end in pad ids that no real pair holds).

    Raises:
        ValueError: no tokenizer, or ``text`` has no tokens.
    """
    if tokenizer_path is None:
        raise ValueError("fail_on_text needs the bundle's tokenizer")
    ids = token_ids(load_tokenizer(tokenizer_path), [text])[0]
    if not ids:
        raise ValueError(f"fail_on_text {text!r} has no tokens")
    return ids
