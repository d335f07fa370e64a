"""Pair encoding shared by training, export, evaluation and serving.

A ranking pair is (context turns, situational statements, candidate). Segment A holds the
speaker-tagged context followed by the statements; segment B holds the candidate:

    [CLS] speaker: turn ... speaker: latest turn [SEP] statement ... statement [SEP] candidate [SEP]

When a pair is over the model's length the candidate and the latest turn are kept whole and
the oldest turns go first, then the statements from the end of the list (the request's
order is their priority). Training
and serving both call :class:`PairEncoder`, so a model never sees at serving time an input
laid out differently from the ones it was trained on.

This module needs only ``tokenizers`` and ``numpy``: it must stay importable without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

DEFAULT_SPEAKER = "user"


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of the conversation context."""

    speaker: str
    text: str


@dataclass(frozen=True, slots=True)
class EncodedPair:
    """Token ids of one (context + statements, candidate) pair, before padding."""

    input_ids: list[int]
    token_type_ids: list[int]
    #: How many context turns and statements made it into the pair (the rest were truncated).
    turns_kept: int
    statements_kept: int
    candidate_truncated: bool = False

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def outputs(self) -> int:
        """Logits this pair yields: one."""
        return 1

    def output_tokens(self) -> list[int]:
        """The tokens each logit reads: the pair's."""
        return [len(self.input_ids)]


@dataclass(frozen=True, slots=True)
class Batch:
    """A padded batch ready for a backend: int64 arrays of shape (pairs, length)."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray
    #: Real tokens in the batch, for the padding-ratio metric.
    real_tokens: int = field(default=0)

    @property
    def shape(self) -> tuple[int, int]:
        """(pairs, padded length)."""
        return (int(self.input_ids.shape[0]), int(self.input_ids.shape[1]))

    def as_feeds(self, input_names: Sequence[str]) -> dict[str, np.ndarray]:
        """The arrays keyed by model input name (only those the model takes)."""
        arrays = {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "token_type_ids": self.token_type_ids,
        }
        return {name: arrays[name] for name in input_names}

    def readout(self, output: np.ndarray) -> np.ndarray:
        """The graph's output as one logit per pair, float32 of shape (pairs,)."""
        return np.asarray(output, dtype=np.float32).reshape(self.shape[0], -1)[:, 0]


def turn_text(turn: Turn) -> str:
    """A context turn as the model reads it: ``speaker: text``."""
    return f"{turn.speaker.strip() or DEFAULT_SPEAKER}: {turn.text}"


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a ``tokenizer.json`` (a file, or a directory that contains one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))
    # Padding and truncation are done here, by rule, not by the tokenizer's own settings.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def special_id(tokenizer: Tokenizer, token: str) -> int:
    """The id of a special token such as ``[CLS]``; ValueError when the tokenizer lacks it."""
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise ValueError(f"tokenizer has no {token} token")
    return token_id


def token_ids(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Each text's token ids, without special tokens."""
    if not texts:
        return []
    return [e.ids for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def context_segment(
    turn_ids: list[list[int]],
    latest: list[int],
    statement_ids: list[list[int]],
    budget: int,
    *,
    cls_id: int,
    sep_id: int,
) -> tuple[list[int], int, int]:
    """``[CLS] older turns, latest turn [SEP] statements [SEP]`` and how many turns and statements it kept.

    ``latest`` is the latest turn as it will stand (the caller may have cut it); ``budget`` is what
    remains for the statements, the [SEP] before them and the older turns. Statements go in first,
    in the caller's priority order, then older turns from the newest back. The pair layout's
    segment A and the shared-prefix layout's prefix are both this segment.
    """
    kept_statements: list[list[int]] = []
    for ids in statement_ids:
        cost = len(ids) + (1 if not kept_statements and turn_ids else 0)  # the [SEP], paid once
        if cost > budget:
            break
        kept_statements.append(ids)
        budget -= cost
    kept_older: list[list[int]] = []
    for ids in reversed(turn_ids[:-1]):
        if len(ids) > budget:
            break
        kept_older.append(ids)
        budget -= len(ids)
    kept_older.reverse()
    segment = [cls_id]
    for ids in [*kept_older, latest]:
        segment.extend(ids)
    if kept_statements and turn_ids:
        segment.append(sep_id)
    for ids in kept_statements:
        segment.extend(ids)
    segment.append(sep_id)
    return segment, len(kept_older) + (1 if turn_ids else 0), len(kept_statements)


class PairEncoder:
    """Turns (turns, statements, candidates) into model inputs under a length budget."""

    def __init__(self, tokenizer: Tokenizer, *, max_length: int) -> None:
        if max_length < 16:
            raise ValueError(f"max_length must be at least 16, got {max_length}")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.cls_id = special_id(tokenizer, "[CLS]")
        self.sep_id = special_id(tokenizer, "[SEP]")
        self.pad_id = special_id(tokenizer, "[PAD]")

    @classmethod
    def from_file(cls, path: str | Path, *, max_length: int) -> PairEncoder:
        """Build an encoder from a ``tokenizer.json`` file or the directory holding it."""
        return cls(load_tokenizer(path), max_length=max_length)

    def encode_request(
        self,
        turns: Sequence[Turn],
        statements: Sequence[str],
        candidates: Sequence[str],
        max_candidate_tokens: int | None = None,
    ) -> list[EncodedPair]:
        """Encode one pair per candidate, sharing the context's tokenization across them.

        ``max_candidate_tokens`` cuts each candidate to its first that many tokens first (a rerank
        client's ``max_tokens_per_doc``).
        """
        turn_ids = token_ids(self.tokenizer, [turn_text(t) for t in turns])
        statement_ids = token_ids(self.tokenizer, statements)
        candidate_ids = token_ids(self.tokenizer, candidates)
        if max_candidate_tokens is not None:
            candidate_ids = [ids[:max_candidate_tokens] for ids in candidate_ids]
        return [self._assemble(turn_ids, statement_ids, ids) for ids in candidate_ids]

    def encode(self, turns: Sequence[Turn], statements: Sequence[str], candidate: str) -> EncodedPair:
        """Encode a single pair."""
        return self.encode_request(turns, statements, [candidate])[0]

    def _assemble(
        self,
        turn_ids: list[list[int]],
        statement_ids: list[list[int]],
        candidate_ids: list[int],
    ) -> EncodedPair:
        # [CLS] A [SEP] B [SEP], plus one [SEP] between turns and statements when both exist.
        budget = self.max_length - 3
        candidate_truncated = False
        latest = turn_ids[-1] if turn_ids else []
        # The candidate and the latest turn are only cut when together they cannot fit at all:
        # the latest turn gives up its oldest tokens first, then the candidate its tail.
        if len(candidate_ids) + len(latest) > budget:
            room_for_latest = max(budget - len(candidate_ids), min(len(latest), budget // 2))
            latest = latest[len(latest) - room_for_latest :] if room_for_latest > 0 else []
            if len(candidate_ids) > budget - len(latest):
                candidate_ids = candidate_ids[: budget - len(latest)]
                candidate_truncated = True
        budget -= len(candidate_ids) + len(latest)
        segment_a, turns_kept, statements_kept = context_segment(
            turn_ids, latest, statement_ids, budget, cls_id=self.cls_id, sep_id=self.sep_id
        )
        segment_b = [*candidate_ids, self.sep_id]
        return EncodedPair(
            input_ids=segment_a + segment_b,
            token_type_ids=[0] * len(segment_a) + [1] * len(segment_b),
            turns_kept=turns_kept,
            statements_kept=statements_kept,
            candidate_truncated=candidate_truncated,
        )

    def pad(self, pairs: Sequence[EncodedPair], *, pad_to: int | None = None) -> Batch:
        """Pad pairs to the longest one (or to ``pad_to``) as int64 arrays."""
        return pad_pairs(pairs, self.pad_id, pad_to=pad_to)


class TemplatePairEncoder:
    """Pairs laid out by the tokenizer's own template, for cross-encoders trained elsewhere.

    A Hugging Face cross-encoder was trained on ``tokenizer(query, document)``: its special tokens
    and segment ids come from the ``post_processor`` saved in its ``tokenizer.json`` (BERT's
    ``[CLS] A [SEP] B [SEP]``, RoBERTa's ``<s> A </s></s> B </s>``...). So here segment A is the
    context's texts (no speaker tags) followed by the statements, one per line, segment B is the
    candidate, and the tokenizer lays them out exactly as ``transformers`` does. Over the length
    limit, segment A loses its oldest tokens first; when the candidate alone is too long, both are
    cut (longest first). Same interface as :class:`PairEncoder`.
    """

    def __init__(self, tokenizer: Tokenizer, *, max_length: int, pad_token: str) -> None:
        pad_id = tokenizer.token_to_id(pad_token)
        if pad_id is None:
            raise ValueError(f"tokenizer has no pad token {pad_token!r}")
        self.pad_id = pad_id
        self.max_length = max_length
        self.tokenizer = tokenizer
        # Two copies, because truncation is a setting of the tokenizer object.
        self._keep_candidate = Tokenizer.from_str(tokenizer.to_str())
        self._keep_candidate.enable_truncation(max_length, strategy="only_first", direction="left")
        self._cut_both = Tokenizer.from_str(tokenizer.to_str())
        self._cut_both.enable_truncation(max_length, strategy="longest_first")

    @classmethod
    def from_file(cls, path: str | Path, *, max_length: int, pad_token: str) -> TemplatePairEncoder:
        """Build an encoder from a ``tokenizer.json`` file or the directory holding it."""
        return cls(load_tokenizer(path), max_length=max_length, pad_token=pad_token)

    def encode_request(
        self,
        turns: Sequence[Turn],
        statements: Sequence[str],
        candidates: Sequence[str],
        max_candidate_tokens: int | None = None,
    ) -> list[EncodedPair]:
        """One pair per candidate."""
        first = "\n".join([*(turn.text for turn in turns), *statements])
        pairs = []
        for candidate in candidates:
            if max_candidate_tokens is not None:
                candidate = self._cut(candidate, max_candidate_tokens)
            try:
                encoding = self._keep_candidate.encode(first, candidate)
                truncated = False
            except Exception:  # the candidate alone does not fit: tokenizers refuses only_first
                encoding = self._cut_both.encode(first, candidate)
                truncated = True
            pairs.append(
                EncodedPair(
                    input_ids=list(encoding.ids),
                    token_type_ids=list(encoding.type_ids),
                    turns_kept=len(turns),
                    statements_kept=len(statements),
                    candidate_truncated=truncated,
                )
            )
        return pairs

    def encode(self, turns: Sequence[Turn], statements: Sequence[str], candidate: str) -> EncodedPair:
        """Encode a single pair."""
        return self.encode_request(turns, statements, [candidate])[0]

    def _cut(self, text: str, tokens: int) -> str:
        offsets = self.tokenizer.encode(text, add_special_tokens=False).offsets
        return text if len(offsets) <= tokens else text[: offsets[tokens - 1][1]]

    def pad(self, pairs: Sequence[EncodedPair], *, pad_to: int | None = None) -> Batch:
        """Pad pairs to the longest one (or to ``pad_to``) as int64 arrays."""
        return pad_pairs(pairs, self.pad_id, pad_to=pad_to)


def pad_pairs(pairs: Sequence[EncodedPair], pad_id: int, *, pad_to: int | None = None) -> Batch:
    """Pad pairs to the longest one (or to ``pad_to``) as int64 arrays."""
    if not pairs:
        raise ValueError("cannot pad an empty batch")
    length = max(len(p) for p in pairs)
    if pad_to is not None:
        if pad_to < length:
            raise ValueError(f"pad_to={pad_to} is shorter than the longest pair ({length})")
        length = pad_to
    input_ids = np.full((len(pairs), length), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(pairs), length), dtype=np.int64)
    token_type_ids = np.zeros((len(pairs), length), dtype=np.int64)
    real = 0
    for row, pair in enumerate(pairs):
        n = len(pair)
        input_ids[row, :n] = pair.input_ids
        attention_mask[row, :n] = 1
        token_type_ids[row, :n] = pair.token_type_ids
        real += n
    return Batch(input_ids, attention_mask, token_type_ids, real_tokens=real)


#: Either encoder: the project's dialogue layout, or a foreign tokenizer's own pair template.
AnyPairEncoder = PairEncoder | TemplatePairEncoder
