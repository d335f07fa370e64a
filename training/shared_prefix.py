"""The shared-prefix ranker in PyTorch: an encoder, a mask from segment ids, a logit per token.

See :mod:`service.list_encoding` for the layout. The graph takes ``input_ids``,
``token_type_ids``, ``position_ids`` and ``segment_ids`` and returns ``token_logits`` of shape
(sequences, length); a candidate's logit is the mean over its tokens (done outside the graph by
:func:`service.list_encoding.candidate_logits`, and by :func:`candidate_means` here in training).
A linear head on each token, then a mean, is a linear head on the mean-pooled candidate tokens:
the pooling all-MiniLM-L6-v2 was trained with.

A checkpoint directory holds the encoder (``save_pretrained``), ``head.pt`` and
``tokenizer.json``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModel

from service.list_encoding import PAD_SEGMENT, PREFIX_SEGMENT, EncodedList, ListEncoder

INPUT_NAMES = ("input_ids", "token_type_ids", "position_ids", "segment_ids")
OUTPUT_NAME = "token_logits"


def attention_bias(segment_ids: torch.Tensor, dtype: torch.dtype, *, full: bool = False) -> torch.Tensor:
    """Additive mask (sequences, 1, length, length): a token sees the prefix and its own segment.

    ``full``: every real token sees every real token (one candidate per sequence: a per-pair
    cross-encoder, whose context is read again with each candidate).
    """
    keys = segment_ids[:, None, :]
    queries = segment_ids[:, :, None]
    seen = (keys != PAD_SEGMENT) if full else ((keys == PREFIX_SEGMENT) | (keys == queries))
    # A padding query may see anything (its output is never read; its softmax stays finite).
    allowed = seen & ((keys != PAD_SEGMENT) | (queries == PAD_SEGMENT))
    zero = torch.zeros((), dtype=dtype, device=segment_ids.device)
    blocked = torch.tensor(torch.finfo(dtype).min, dtype=dtype, device=segment_ids.device)
    return torch.where(allowed, zero, blocked)[:, None, :, :]


class SharedPrefixRanker(torch.nn.Module):
    """Encoder plus a one-logit linear head applied to every token."""

    def __init__(
        self, encoder: torch.nn.Module, dropout: float = 0.1, *, full_attention: bool = False
    ) -> None:
        super().__init__()
        self.encoder = encoder
        # Per-pair design runs (one candidate per sequence, everything attends to everything).
        self.full_attention = full_attention
        self.dropout = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(encoder.config.hidden_size, 1)

    @classmethod
    def load(cls, path: str | Path, *, full_attention: bool = False) -> SharedPrefixRanker:
        """From a backbone directory (fresh head) or a checkpoint saved by :meth:`save`."""
        path = Path(path)
        encoder = AutoModel.from_pretrained(str(path), add_pooling_layer=False)
        model = cls(encoder, full_attention=full_attention)
        head = path / "head.pt"
        if head.exists():
            model.head.load_state_dict(torch.load(head, map_location="cpu"))
        return model

    def save(self, path: str | Path, tokenizer: str | Path) -> None:
        """Encoder, head and tokenizer into ``path``."""
        path = Path(path)
        self.encoder.save_pretrained(str(path))
        torch.save(self.head.state_dict(), path / "head.pt")
        shutil.copy(tokenizer, path / "tokenizer.json")

    def forward(self, input_ids, token_type_ids, position_ids, segment_ids):  # noqa: D102
        hidden = self.encoder(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            attention_mask=attention_bias(segment_ids, torch.float32, full=self.full_attention),
        ).last_hidden_state
        return self.head(self.dropout(hidden)).squeeze(-1)


def to_tensors(encoder: ListEncoder, sequences: Sequence[EncodedList], device: torch.device) -> dict:
    """Pad with the serving padder and move to ``device``."""
    batch = encoder.pad(sequences)
    return {name: torch.from_numpy(a).to(device) for name, a in batch.as_feeds(INPUT_NAMES).items()}


def candidate_means(token_logits: torch.Tensor, segment_ids: torch.Tensor, candidates: int) -> torch.Tensor:
    """(sequences, candidates) mean token logit per candidate segment; absent segments give 0."""
    ks = torch.arange(1, candidates + 1, device=segment_ids.device)
    member = (segment_ids[:, None, :] == ks[None, :, None]).to(token_logits.dtype)
    counts = member.sum(-1)
    return (member * token_logits[:, None, :]).sum(-1) / counts.clamp(min=1)


@torch.no_grad()
def score_requests(
    model: SharedPrefixRanker,
    encoder: ListEncoder,
    requests: Sequence[Sequence[EncodedList]],
    device: torch.device,
    *,
    batch_sequences: int = 16,
) -> list[list[float]]:
    """Candidate logits per request (its chunks scored separately, in order)."""
    model.eval()
    flat = [(r, s) for r, seqs in enumerate(requests) for s in seqs]
    order = sorted(range(len(flat)), key=lambda i: len(flat[i][1]))
    logits: dict[int, list[float]] = {}
    for start in range(0, len(order), batch_sequences):
        idx = order[start : start + batch_sequences]
        seqs = [flat[i][1] for i in idx]
        feeds = to_tensors(encoder, seqs, device)
        means = candidate_means(model(**feeds), feeds["segment_ids"], max(s.candidates for s in seqs))
        for row, i in enumerate(idx):
            logits[i] = means[row, : seqs[row].candidates].float().cpu().tolist()
    out: list[list[float]] = [[] for _ in requests]
    for i, (r, _) in enumerate(flat):
        out[r].extend(logits[i])
    return out
