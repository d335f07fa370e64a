"""``ranker train --freeze-layers N``: the embeddings and the encoder's first N layers kept as they start.

A fine-tune of a trained ranker on one team's lists (``ranker adapt``) moves every weight, and what
the base knew wears away with them. The lower layers of a BERT-style encoder carry the most
general features (the upper ones the task's), so freezing them keeps part of that knowledge
without a forward pass of replay. It also makes a step cheaper: nothing below layer N needs a
gradient, so the backward pass stops there. Written here because the parameters' own
``requires_grad_`` is all it takes: no adapter library is needed for a frozen prefix.
"""

from __future__ import annotations

import torch

from dialogue_ranker.data.ranking_data import DataError


def freeze(model: torch.nn.Module, layers: int) -> int:
    """Freeze the embeddings and the first ``layers`` transformer layers; the weights frozen (0: none).

    Raises:
        DataError: more layers than the encoder has.
    """
    if layers <= 0:
        return 0
    blocks = model.encoder.encoder.layer
    if layers > len(blocks):
        raise DataError(f"--freeze-layers {layers}: the encoder has {len(blocks)} layers")
    frozen = [model.encoder.embeddings, *blocks[:layers]]
    for module in frozen:
        module.requires_grad_(False)
    return sum(p.numel() for module in frozen for p in module.parameters())
