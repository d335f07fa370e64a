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

A bundle with the **similarity term** (``similarity`` in its encoding budgets) also gets a short
second sequence per chunk for the untrained sentence encoder: the latest turn's text and each of
the chunk's candidates as separate blocks, ``[CLS] text [SEP]``, each seeing only itself, positions
restarting at 0 in each (segment 0 the turn, k candidate k, -1 padding). The graph adds a fitted
weight times the cosine of candidate k's mean-pooled block with the turn's to candidate k's token
logits: the reply-to-turn similarity all-MiniLM-L6-v2 was trained for, which fine-tuning on a
few thousand lists wears away (see ``training/similarity.py``).

Long candidate lists are split into several sequences (chunks), each with the whole prefix,
deterministically: candidates in request order, a new chunk when the next candidate would pass
``max_chunk_tokens`` or ``max_chunk_candidates``. Training, export, evaluation and serving all
use :class:`ListEncoder`. Like :mod:`dialogue_ranker.serving.tokenization`, it needs no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from dialogue_ranker.serving.tokenization import (
    Turn,
    context_segment,
    load_tokenizer,
    special_id,
    token_ids,
    turn_text,
)

#: Segment id of the prefix and of padding.
PREFIX_SEGMENT = 0
PAD_SEGMENT = -1
#: The similarity sequence's graph inputs (after the four of the shared-prefix sequence).
SIMILARITY_INPUT_NAMES = ("similarity_input_ids", "similarity_position_ids", "similarity_segment_ids")
#: Longest latest turn the similarity sequence keeps (its first tokens, as sentence encoders cut).
SIMILARITY_TURN_TOKENS = 128


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
    #: The similarity sequence (empty without the similarity term): ids, positions, segments.
    similarity_ids: tuple[int, ...] = ()
    similarity_positions: tuple[int, ...] = ()
    similarity_segments: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def outputs(self) -> int:
        """Logits this sequence yields: one per candidate."""
        return self.candidates

    def output_tokens(self) -> list[int]:
        """The tokens each candidate's logit reads: the prefix's and its own segment's."""
        sizes = [0] * (self.candidates + 1)
        for segment in self.segment_ids:
            sizes[segment] += 1
        return [sizes[PREFIX_SEGMENT] + own for own in sizes[1:]]


@dataclass(frozen=True, slots=True)
class ListBatch:
    """Padded sequences: int64 arrays of shape (sequences, length)."""

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    position_ids: np.ndarray
    segment_ids: np.ndarray
    real_tokens: int = field(default=0)
    #: The similarity sequences, padded to their own length (None without the similarity term).
    similarity: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

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
            **dict(zip(SIMILARITY_INPUT_NAMES, self.similarity or (), strict=False)),
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
        similarity: int = 0,
    ) -> None:
        if max_prefix_tokens < 8 or max_candidate_tokens < 2:
            raise ValueError("max_prefix_tokens must be at least 8 and max_candidate_tokens at least 2")
        self.tokenizer = tokenizer
        self.max_prefix_tokens = max_prefix_tokens
        self.max_candidate_tokens = max_candidate_tokens
        self.max_chunk_tokens = max(max_chunk_tokens, max_prefix_tokens + max_candidate_tokens)
        self.max_chunk_candidates = max_chunk_candidates
        #: 1: build the similarity sequence too (a bundle whose graph has the similarity term).
        self.similarity = int(bool(similarity))
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
            **({"similarity": 1} if self.similarity else {}),
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
        candidate_ids = token_ids(self.tokenizer, candidates)
        segments = [[*ids[:limit], self.sep_id] for ids in candidate_ids]
        blocks = self._similarity_blocks(turns, candidate_ids, limit) if self.similarity else None
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
        out, done = [], 0
        for chunk in chunks:
            similarity = blocks and [blocks[0], *blocks[1 + done : 1 + done + len(chunk)]]
            out.append(self._assemble(prefix, chunk, turns_kept, statements_kept, similarity))
            done += len(chunk)
        return out

    def _similarity_blocks(
        self, turns: Sequence[Turn], candidate_ids: list[list[int]], limit: int
    ) -> list[list[int]]:
        """``[CLS] text [SEP]`` of the latest turn (its text alone), then of each candidate."""
        latest = token_ids(self.tokenizer, [turns[-1].text])[0] if turns else []
        return [
            [self.cls_id, *ids[:cap], self.sep_id]
            for ids, cap in [(latest, SIMILARITY_TURN_TOKENS - 2)] + [(c, limit - 1) for c in candidate_ids]
        ]

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
        self,
        prefix: list[int],
        segments: list[list[int]],
        turns_kept: int,
        statements_kept: int,
        similarity: list[list[int]] | None = None,
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
        blocks = similarity or []  # block 0 the latest turn, block k candidate k
        return EncodedList(
            input_ids,
            token_type_ids,
            position_ids,
            segment_ids,
            len(segments),
            turns_kept,
            statements_kept,
            tuple(i for block in blocks for i in block),
            tuple(p for block in blocks for p in range(len(block))),
            tuple(k for k, block in enumerate(blocks) for _ in block),
        )

    def synthetic(
        self, candidates: int = 3, candidate_tokens: int = 16, prefix_tokens: int = 96
    ) -> EncodedList:
        """A made-up request of about a situated request's size (the batcher's warm-up call)."""
        prefix = [self.cls_id, *[1000] * (min(prefix_tokens, self.max_prefix_tokens) - 2), self.sep_id]
        segments = [
            [1000] * (min(candidate_tokens, self.max_candidate_tokens) - 1) + [self.sep_id]
        ] * candidates
        similarity = (
            [[self.cls_id, *[1000] * 14, self.sep_id], *([self.cls_id, *s] for s in segments)]
            if self.similarity
            else None
        )
        return self._assemble(prefix, segments, turns_kept=1, statements_kept=0, similarity=similarity)

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
    # real_tokens counts the ranker's sequence only: the padding metric reads it against its shape.
    similarity = pad_similarity(sequences, pad_id) if sequences[0].similarity_ids else None
    return ListBatch(input_ids, token_type_ids, position_ids, segment_ids, real, similarity)


def pad_similarity(
    sequences: Sequence[EncodedList], pad_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The similarity sequences padded to the longest of them: ids, positions, segments (-1 on padding)."""
    shape = (len(sequences), max(len(s.similarity_ids) for s in sequences))
    ids = np.full(shape, pad_id, dtype=np.int64)
    positions = np.zeros(shape, dtype=np.int64)
    segments = np.full(shape, PAD_SEGMENT, dtype=np.int64)
    for row, s in enumerate(sequences):
        n = len(s.similarity_ids)
        ids[row, :n] = s.similarity_ids
        positions[row, :n] = s.similarity_positions
        segments[row, :n] = s.similarity_segments
    return ids, positions, segments


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
