"""``ranker train --lora-rank R``: the encoder learns a low-rank change to its weights, merged when saved.

A fine-tune on one team's lists (``ranker adapt``) moves every weight of the upper layers, and what
the base ranked wears away with them: runs 10 to 24 lost 0.02 to 0.04 of the regression suite with
three layers frozen (docs/research/). A low-rank update (LoRA: Hu et al., ICLR 2022) bounds the
change itself: each linear map of a transformer layer keeps its weight ``W`` and learns ``B A``
(rank ``R``) beside it, so the layer computes ``W + (alpha / R) B A``. Such fine-tunes learn less and
forget less than full ones (Biderman et al., "LoRA Learns Less and Forgets Less", TMLR 2024); the
head stays free.

peft's own :class:`~peft.LoraModel` injects the adapters into the encoder in place (the model's
module paths and forward are unchanged, so dev scoring, checkpoints and ``--resume`` see the same
model) and merges them back with ``merge_and_unload``: the saved ranker is a plain encoder, so the
export, the graph and serving speed are those of a full fine-tune. With ``--freeze-layers N`` the
first N layers get no adapter at all, and a step's backward pass still stops at layer N.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from peft import LoraConfig, LoraModel

from dialogue_ranker.data.ranking_data import DataError

#: The linear maps of a BERT layer that get an adapter: attention's query, key, value and output,
#: and the feed-forward pair.
TARGETS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
#: ``alpha / rank``: with alpha twice the rank, the update's scale is the same at every rank.
ALPHA_PER_RANK = 2.0


@dataclass
class LowRank:
    """The adapters of a model: how many weights they hold, and the wrapper that merges them."""

    tuner: LoraModel
    weights: int
    layers: list[int]

    def merge(self) -> None:
        """Fold every adapter into its layer's weight: the encoder is plain again, the same function."""
        self.tuner.merge_and_unload()


def add_adapters(model: torch.nn.Module, rank: int, *, frozen_layers: int = 0) -> LowRank | None:
    """Rank-``rank`` adapters on each encoder layer from ``frozen_layers`` on; other encoder weights frozen.

    ``rank`` 0: none (the model is left as it is); ``--lora-rank`` as parsed
    (``train_args.lora_rank`` refuses a negative one).

    Raises:
        DataError: no layer left above the frozen ones.
    """
    if rank == 0:
        return None
    count = len(model.encoder.encoder.layer)
    layers = list(range(frozen_layers, count))
    if not layers:
        raise DataError(
            f"--lora-rank with --freeze-layers {frozen_layers}: no layer of {count} is left to adapt"
        )
    # Full module paths: peft matches a target by its suffix, and "output.dense" alone would also
    # name attention's output and the pooler.
    targets = [f"encoder.layer.{i}.{t}" for i in layers for t in TARGETS]
    config = LoraConfig(r=rank, lora_alpha=ALPHA_PER_RANK * rank, lora_dropout=0.0, target_modules=targets)
    # In place: LoraModel swaps the named linear maps of model.encoder for adapted ones and leaves
    # only the adapters trainable there; the head, outside the encoder, keeps its gradients.
    tuner = LoraModel(model.encoder, config, "default")
    weights = sum(p.numel() for n, p in model.encoder.named_parameters() if "lora_" in n)
    return LowRank(tuner, weights, layers)
