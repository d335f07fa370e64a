"""Shared-prefix encoding: the context once per request, every candidate as its own segment.

One sequence holds the prefix (context turns and statements, laid out as the pair encoder's
segment A) followed by each candidate's segment:

    [CLS] speaker: turn ... [SEP] statement ... [SEP] | cand 1 [SEP] | cand 2 [SEP] | ...

The model's attention mask is built from ``segment_ids`` (0 for the prefix, k for candidate k,
-1 for padding): prefix tokens attend to the prefix only, a candidate's tokens to the prefix and
to themselves. Each candidate's positions restart where the prefix ends. So a candidate's logit
is what a cross-encoder would compute on (prefix, candidate) with a candidate-blind prefix, the
same whichever other candidates share the sequence, while the prefix is computed once instead
of once per candidate. A candidate's logit is the mean of its tokens' logits.

Long candidate lists are split into several sequences (chunks), each with the whole prefix,
deterministically: candidates in request order, a new chunk when the next candidate would pass
``max_chunk_tokens`` or ``max_chunk_candidates``. Training, export, evaluation and serving all
use :class:`ListEncoder`. Like :mod:`service.tokenization`, it needs no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from service.tokenization import Turn, context_segment, load_tokenizer, special_id, token_ids, turn_text

#: Segment id of the prefix and of padding.
PREFIX_SEGMENT = 0
PAD_SEGMENT = -1


@dataclass(frozen=True, slots=True)
class EncodedList:
    """One sequence: the prefix and some of a request's candidates, before padding."""

    input_ids: list[int]
    token_type_ids: list[int]
    position_ids: list[int]
    segment_ids: list[int]
    #: How many candidates the sequence scores (segments 1..candidates).
    candidates: int
    turns_kept: int
    statements_kept: int

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def outputs(self) -> int:
        """Logits this sequence yields: one per candidate."""
        return self.candidates


@dataclass(frozen=True, slots=True)
class ListBatch:
    """Padded sequences: int64 arrays of shape (sequences, length)."""

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    position_ids: np.ndarray
    segment_ids: np.ndarray
    real_tokens: int = field(default=0)

    @property
    def shape(self) -> tuple[int, int]:
        """(sequences, padded length)."""
        return (int(self.input_ids.shape[0]), int(self.input_ids.shape[1]))

    def as_feeds(self, input_names: Sequence[str]) -> dict[str, np.ndarray]:
        """The arrays keyed by model input name."""
        arrays = {
            "input_ids": self.input_ids,
            "token_type_ids": self.token_type_ids,
            "position_ids": self.position_ids,
            "segment_ids": self.segment_ids,
        }
        return {name: arrays[name] for name in input_names}

    def readout(self, output: np.ndarray) -> np.ndarray:
        """Token logits (sequences, length) as each candidate's mean, sequences in order."""
        return candidate_logits(np.asarray(output, dtype=np.float32).reshape(self.shape), self.segment_ids)


class ListEncoder:
    """Turns (turns, statements, candidates) into shared-prefix sequences under length budgets."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        max_prefix_tokens: int = 256,
        max_candidate_tokens: int = 64,
        max_chunk_tokens: int = 1024,
        max_chunk_candidates: int = 32,
    ) -> None:
        if max_prefix_tokens < 8 or max_candidate_tokens < 2:
            raise ValueError("max_prefix_tokens must be at least 8 and max_candidate_tokens at least 2")
        self.tokenizer = tokenizer
        self.max_prefix_tokens = max_prefix_tokens
        self.max_candidate_tokens = max_candidate_tokens
        self.max_chunk_tokens = max(max_chunk_tokens, max_prefix_tokens + max_candidate_tokens)
        self.max_chunk_candidates = max_chunk_candidates
        self.cls_id = special_id(tokenizer, "[CLS]")
        self.sep_id = special_id(tokenizer, "[SEP]")
        self.pad_id = special_id(tokenizer, "[PAD]")

    @classmethod
    def from_file(cls, path: str | Path, **budgets: int) -> ListEncoder:
        """Build an encoder from a ``tokenizer.json`` file or the directory holding it."""
        return cls(load_tokenizer(path), **budgets)

    @property
    def max_length(self) -> int:
        """The longest position a sequence uses (the model's position table must cover it)."""
        return self.max_prefix_tokens + self.max_candidate_tokens

    def budgets(self) -> dict[str, int]:
        """The length settings, as a bundle's metadata records them."""
        return {
            "max_prefix_tokens": self.max_prefix_tokens,
            "max_candidate_tokens": self.max_candidate_tokens,
            "max_chunk_tokens": self.max_chunk_tokens,
            "max_chunk_candidates": self.max_chunk_candidates,
        }

    def encode_request(
        self,
        turns: Sequence[Turn],
        statements: Sequence[str],
        candidates: Sequence[str],
        max_candidate_tokens: int | None = None,
    ) -> list[EncodedList]:
        """The request's sequences; their candidates, in order, are the request's candidates."""
        prefix, turns_kept, statements_kept = self._prefix(
            token_ids(self.tokenizer, [turn_text(t) for t in turns]), token_ids(self.tokenizer, statements)
        )
        limit = self.max_candidate_tokens - 1
        if max_candidate_tokens is not None:
            limit = min(limit, max_candidate_tokens)
        segments = [[*ids[:limit], self.sep_id] for ids in token_ids(self.tokenizer, candidates)]
        chunks: list[list[list[int]]] = []
        size = 0
        for segment in segments:
            if (
                not chunks
                or len(chunks[-1]) >= self.max_chunk_candidates
                or size + len(segment) > self.max_chunk_tokens
            ):
                chunks.append([])
                size = len(prefix)
            chunks[-1].append(segment)
            size += len(segment)
        return [self._assemble(prefix, chunk, turns_kept, statements_kept) for chunk in chunks]

    def _prefix(
        self, turn_ids: list[list[int]], statement_ids: list[list[int]]
    ) -> tuple[list[int], int, int]:
        """``[CLS] turns [SEP] statements [SEP]`` within the prefix budget.

        The latest turn is kept (its oldest tokens cut if it alone is over), then statements in
        the caller's priority order, then older turns from the newest back.
        """
        budget = self.max_prefix_tokens - 2  # [CLS] and the closing [SEP]
        latest = turn_ids[-1][-budget:] if turn_ids else []
        return context_segment(
            turn_ids, latest, statement_ids, budget - len(latest), cls_id=self.cls_id, sep_id=self.sep_id
        )

    def _assemble(
        self, prefix: list[int], segments: list[list[int]], turns_kept: int, statements_kept: int
    ) -> EncodedList:
        input_ids = list(prefix)
        token_type_ids = [0] * len(prefix)
        position_ids = list(range(len(prefix)))
        segment_ids = [PREFIX_SEGMENT] * len(prefix)
        for k, segment in enumerate(segments, start=1):
            input_ids.extend(segment)
            token_type_ids.extend([1] * len(segment))
            position_ids.extend(range(len(prefix), len(prefix) + len(segment)))
            segment_ids.extend([k] * len(segment))
        return EncodedList(
            input_ids, token_type_ids, position_ids, segment_ids, len(segments), turns_kept, statements_kept
        )

    def synthetic(
        self, candidates: int = 3, candidate_tokens: int = 16, prefix_tokens: int = 96
    ) -> EncodedList:
        """A made-up request of about a situated request's size (the batcher's warm-up call)."""
        prefix = [self.cls_id, *[1000] * (min(prefix_tokens, self.max_prefix_tokens) - 2), self.sep_id]
        segments = [
            [1000] * (min(candidate_tokens, self.max_candidate_tokens) - 1) + [self.sep_id]
        ] * candidates
        return self._assemble(prefix, segments, turns_kept=1, statements_kept=0)

    def pad(self, sequences: Sequence[EncodedList], *, pad_to: int | None = None) -> ListBatch:
        """Pad sequences to the longest one (or to ``pad_to``) as int64 arrays."""
        return pad_lists(sequences, self.pad_id, pad_to=pad_to)


def pad_lists(sequences: Sequence[EncodedList], pad_id: int, *, pad_to: int | None = None) -> ListBatch:
    """Pad sequences to the longest one (or ``pad_to``); padding has segment id -1."""
    if not sequences:
        raise ValueError("cannot pad an empty batch")
    length = max(max(len(s) for s in sequences), pad_to or 0)
    shape = (len(sequences), length)
    input_ids = np.full(shape, pad_id, dtype=np.int64)
    token_type_ids = np.zeros(shape, dtype=np.int64)
    position_ids = np.zeros(shape, dtype=np.int64)
    segment_ids = np.full(shape, PAD_SEGMENT, dtype=np.int64)
    for row, s in enumerate(sequences):
        n = len(s)
        input_ids[row, :n] = s.input_ids
        token_type_ids[row, :n] = s.token_type_ids
        position_ids[row, :n] = s.position_ids
        segment_ids[row, :n] = s.segment_ids
    real = sum(len(s) for s in sequences)
    return ListBatch(input_ids, token_type_ids, position_ids, segment_ids, real_tokens=real)


def candidate_logits(token_logits: np.ndarray, segment_ids: np.ndarray) -> np.ndarray:
    """Each candidate's logit (the mean of its tokens'), row by row, candidates in order."""
    out = []
    for row in range(segment_ids.shape[0]):
        segments = np.clip(segment_ids[row], 0, None)
        count = int(segments.max(initial=0))
        sums = np.bincount(segments, weights=token_logits[row], minlength=count + 1)
        sizes = np.bincount(segments, minlength=count + 1)
        out.append(sums[1:] / sizes[1:])
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, dtype=np.float32)
