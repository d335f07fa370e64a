"""``ranker train --attention-dropout P``: the dropout on the encoder's attention probabilities.

all-MiniLM-L6-v2 comes with 0.1 there. On a CPU it is most of a training step: with dropout on its
attention, PyTorch's scaled-dot-product attention cannot take its fused kernel, so every layer
writes out each head's (length x length) probabilities and draws a random mask over them. Measured
on a Zen 4's 2 cores (bf16 autocast, eight persona lists of five candidates, both views): a forward
and backward pass of the whole encoder took 3.15 s with it and 1.63 s without, where the dropout on
the hidden states (kept) costs little (docs/research/2026-12-06-attention-dropout.md). Written
here because the modules' own ``Dropout`` is all it takes: transformers sets it once, from the
config, when the model is built, and the attention reads its ``p`` at every call.
"""

from __future__ import annotations

import torch

from dialogue_ranker.data.ranking_data import DataError


def set_attention_dropout(model: torch.nn.Module, p: float) -> int:
    """Set the dropout of every self-attention block's probabilities to ``p``; the blocks set.

    Raises:
        DataError: an encoder with no self-attention block of that form (the flag would do nothing).
    """
    blocks = [m for m in model.modules() if type(m).__name__.endswith("SelfAttention")]
    blocks = [m for m in blocks if isinstance(getattr(m, "dropout", None), torch.nn.Dropout)]
    if not blocks:
        raise DataError("--attention-dropout: this encoder has no self-attention block with its own dropout")
    for block in blocks:
        block.dropout.p = p
    return len(blocks)
