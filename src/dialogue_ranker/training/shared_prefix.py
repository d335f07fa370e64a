"""The shared-prefix ranker in PyTorch: an encoder, a mask from segment ids, a logit per token.

See :mod:`dialogue_ranker.serving.list_encoding` for the layout. The graph takes ``input_ids``,
``token_type_ids``, ``position_ids`` and ``segment_ids`` and returns ``token_logits`` of shape
(sequences, length); a candidate's logit is the mean over its tokens (done outside the graph by
:func:`serving.list_encoding.candidate_logits`, and by :func:`candidate_means` here in training).
A linear head on each token, then a mean, is a linear head on the mean-pooled candidate tokens:
the pooling all-MiniLM-L6-v2 was trained with.

The cosine head adds ``scale x cos(token, mean of the prefix tokens)`` to each token's linear
logit. all-MiniLM-L6-v2 was trained to put a reply's mean-pooled embedding near its context's, so
this term ranks replies before any fine-tuning (DailyDialog++ dev, shared-prefix mask, no
training: AUC 0.755 against adversarial and 0.81 against random negatives), and fine-tuning
starts from that geometry instead of from a random head that has to relearn it from a few
thousand lists. The cosine is a Mul and a ReduceSum in the graph, never a MatMul, so dynamic
int8 quantisation leaves it in fp32.

A checkpoint directory holds the encoder (``save_pretrained``), ``head.pt``, ``cosine.pt``
(the cosine head's scale; absent for a linear head) and ``tokenizer.json``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModel

from dialogue_ranker.data.ranking_data import DataError
from dialogue_ranker.serving.list_encoding import PAD_SEGMENT, PREFIX_SEGMENT, EncodedList, ListEncoder

INPUT_NAMES = ("input_ids", "token_type_ids", "position_ids", "segment_ids")
OUTPUT_NAME = "token_logits"
#: Token-logit heads (``dialogue_ranker.training.train --head``).
HEADS = ("cosine", "linear")
#: The cosine head's initial scale: a cosine gap of 0.1 between two replies is a logit gap of 2.
COSINE_SCALE = 20.0


def attention_bias(
    segment_ids: torch.Tensor, dtype: torch.dtype, *, full: bool = False, blocks: bool = False
) -> torch.Tensor:
    """Additive mask (sequences, 1, length, length): a token sees the prefix and its own segment.

    ``full``: every real token sees every real token (one candidate per sequence: a per-pair
    cross-encoder, whose context is read again with each candidate). ``blocks``: a token sees its
    own segment only, the prefix included (separate sentences in one row, as a sentence encoder
    would read each alone).
    """
    keys = segment_ids[:, None, :]
    queries = segment_ids[:, :, None]
    if full:
        seen = keys != PAD_SEGMENT
    else:
        seen = (keys == queries) if blocks else ((keys == PREFIX_SEGMENT) | (keys == queries))
    # A padding query may see anything (its output is never read; its softmax stays finite).
    allowed = seen & ((keys != PAD_SEGMENT) | (queries == PAD_SEGMENT))
    zero = torch.zeros((), dtype=dtype, device=segment_ids.device)
    blocked = torch.tensor(torch.finfo(dtype).min, dtype=dtype, device=segment_ids.device)
    return torch.where(allowed, zero, blocked)[:, None, :, :]


class SharedPrefixRanker(torch.nn.Module):
    """Encoder plus a one-logit head applied to every token (linear, or linear plus cosine)."""

    #: The graph inputs, in ``forward``'s order (a wrapper with more inputs declares its own).
    input_names = INPUT_NAMES

    def __init__(
        self,
        encoder: torch.nn.Module,
        dropout: float = 0.1,
        *,
        full_attention: bool = False,
        head: str = "linear",
    ) -> None:
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        self.encoder = encoder
        # Per-pair design runs (one candidate per sequence, everything attends to everything).
        self.full_attention = full_attention
        self.dropout = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(encoder.config.hidden_size, 1)
        self.cosine_scale: torch.nn.Parameter | None = None
        if head == "cosine":
            self.cosine_scale = torch.nn.Parameter(torch.tensor(COSINE_SCALE))
            # The linear part starts at zero: the fresh model ranks by the cosine alone.
            torch.nn.init.zeros_(self.head.weight)

    @property
    def head_kind(self) -> str:
        """``linear`` or ``cosine``."""
        return "linear" if self.cosine_scale is None else "cosine"

    @classmethod
    def load(
        cls, path: str | Path, *, full_attention: bool = False, head: str = "linear"
    ) -> SharedPrefixRanker:
        """From a backbone directory (fresh ``head``) or a checkpoint saved by :meth:`save`.

        A checkpoint's own head kind wins over ``head``.
        """
        path = Path(path)
        encoder = AutoModel.from_pretrained(str(path), add_pooling_layer=False)
        linear, cosine = path / "head.pt", path / "cosine.pt"
        if linear.exists():
            head = "cosine" if cosine.exists() else "linear"
        model = cls(encoder, full_attention=full_attention, head=head)
        if linear.exists():
            model.head.load_state_dict(torch.load(linear, map_location="cpu"))
        if model.cosine_scale is not None and cosine.exists():
            model.cosine_scale.data.copy_(torch.load(cosine, map_location="cpu"))
        return model

    def save(self, path: str | Path, tokenizer: str | Path) -> None:
        """Encoder, head and tokenizer into ``path``."""
        path = Path(path)
        self.encoder.save_pretrained(str(path))
        torch.save(self.head.state_dict(), path / "head.pt")
        if self.cosine_scale is not None:
            torch.save(self.cosine_scale.detach().clone(), path / "cosine.pt")
        shutil.copy(tokenizer, path / "tokenizer.json")

    def forward(self, input_ids, token_type_ids, position_ids, segment_ids):  # noqa: D102
        hidden = self.encoder(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            attention_mask=attention_bias(segment_ids, torch.float32, full=self.full_attention),
        ).last_hidden_state
        logits = self.head(self.dropout(hidden)).squeeze(-1)
        if self.cosine_scale is not None:
            logits = logits + self.cosine_scale * prefix_cosine(hidden, segment_ids)
        return logits


def prefix_cosine(hidden: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
    """(sequences, length) cosine of each token's state with its sequence's mean prefix state.

    Written as Mul and ReduceSum (not matmul/einsum) so that dynamic quantisation, which
    quantises MatMul nodes, leaves it alone.
    """
    prefix = (segment_ids == PREFIX_SEGMENT).to(hidden.dtype)[:, :, None]
    mean = (hidden * prefix).sum(1) / prefix.sum(1).clamp(min=1.0)
    unit = mean / mean.norm(dim=-1, keepdim=True).clamp(min=1e-6)
    tokens = hidden / hidden.norm(dim=-1, keepdim=True).clamp(min=1e-6)
    return (tokens * unit[:, None, :]).sum(-1)


def to_tensors(
    encoder: ListEncoder,
    sequences: Sequence[EncodedList],
    device: torch.device,
    names: Sequence[str] = INPUT_NAMES,
) -> dict:
    """Pad with the serving padder and move to ``device`` (``names``: the model's inputs)."""
    batch = encoder.pad(sequences)
    return {name: torch.from_numpy(a).to(device) for name, a in batch.as_feeds(names).items()}


def candidate_means(token_logits: torch.Tensor, segment_ids: torch.Tensor, candidates: int) -> torch.Tensor:
    """(sequences, candidates) mean token logit per candidate segment; absent segments give 0."""
    ks = torch.arange(1, candidates + 1, device=segment_ids.device)
    member = (segment_ids[:, None, :] == ks[None, :, None]).to(token_logits.dtype)
    counts = member.sum(-1)
    return (member * token_logits[:, None, :]).sum(-1) / counts.clamp(min=1)


@torch.no_grad()
def score_requests(
    model: torch.nn.Module,
    encoder: ListEncoder,
    requests: Sequence[Sequence[EncodedList]],
    device: torch.device,
    *,
    batch_sequences: int = 16,
) -> list[list[float]]:
    """Candidate logits per request (its chunks scored separately, in order).

    ``model``: a :class:`SharedPrefixRanker`, or a wrapper of one with its own ``input_names``.
    """
    model.eval()
    flat = [(r, s) for r, seqs in enumerate(requests) for s in seqs]
    order = sorted(range(len(flat)), key=lambda i: len(flat[i][1]))
    logits: dict[int, list[float]] = {}
    for start in range(0, len(order), batch_sequences):
        idx = order[start : start + batch_sequences]
        seqs = [flat[i][1] for i in idx]
        feeds = to_tensors(encoder, seqs, device, model.input_names)
        means = candidate_means(model(**feeds), feeds["segment_ids"], max(s.candidates for s in seqs))
        for row, i in enumerate(idx):
            logits[i] = means[row, : seqs[row].candidates].float().cpu().tolist()
    out: list[list[float]] = [[] for _ in requests]
    for i, (r, _) in enumerate(flat):
        out[r].extend(logits[i])
    return out


def run_encoder(run: str | Path, config: dict) -> ListEncoder:
    """A run's encoder as training used it: its recorded budgets, the chunk budgets lifted.

    One sequence per list; one per candidate for the pair layout.
    """
    encoding = config["encoding"]
    return ListEncoder.from_file(
        Path(run) / "ranker",
        max_prefix_tokens=int(encoding["max_prefix_tokens"]),
        max_candidate_tokens=int(encoding["max_candidate_tokens"]),
        max_chunk_tokens=1 << 16,
        max_chunk_candidates=1 if config.get("layout") == "pair" else 1 << 10,
    )


def finished_run_config(run: str | Path, option: str) -> dict:
    """A finished run's ``config.json``; a directory that is not one is refused naming ``option``."""
    run = Path(run)
    if not (run / "config.json").is_file() or not (run / "ranker" / "head.pt").is_file():
        raise DataError(
            f"{option} {run}: not a finished run directory (needs config.json and ranker/head.pt)"
        )
    return json.loads((run / "config.json").read_text())


def bundle_run_config(bundle: str | Path, option: str) -> dict:
    """The training configuration a shipped bundle records (``metadata.json``); refused naming ``option``.

    It holds the encoding, head and layout as a run's ``config.json`` does, so a bundle can stand
    where a run would (``--init-bundle``, a ``--teacher``).
    """
    bundle = Path(bundle)
    metadata_path = bundle / "metadata.json"
    if not metadata_path.is_file() or not (bundle / "tokenizer.json").is_file():
        raise DataError(f"{option} {bundle}: not a model directory (needs metadata.json and tokenizer.json)")
    metadata = json.loads(metadata_path.read_text())
    config = dict(metadata.get("training_config") or {})
    if (metadata.get("encoding") or {}).get("kind") != "shared-prefix":
        raise DataError(f"{option} {bundle}: not a shared-prefix ranker bundle")
    config["bundle"] = {"path": str(bundle), "version": metadata.get("version")}
    return config


def load_run_for_scoring(run: str | Path) -> tuple[SharedPrefixRanker, ListEncoder]:
    """A finished run's model (eval mode, on the training device) and its encoder."""
    from dialogue_ranker.training.backbone import device

    run = Path(run)
    config = json.loads((run / "config.json").read_text())
    pair = config.get("layout") == "pair"
    model = SharedPrefixRanker.load(run / "ranker", full_attention=pair).to(device()).eval()
    return model, run_encoder(run, config)
