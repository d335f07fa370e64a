"""A pull back to the start: how a fine-tune keeps the encoder near the weights it began from.

AdamW's weight decay pulls every weight toward zero; a fine-tune from a trained model is better
pulled toward where it started (L2-SP: Li, Grandvalet and Davoine, "Explicit inductive bias for
transfer learning with convolutional networks", 2018). With ``ranker train --anchor-weight W``, after
each optimiser step every encoder weight moves ``lr x W`` of its distance back to its start,
decoupled from Adam's moments as AdamW's own decay is. torch's optimisers decay only toward zero,
hence this step written here. The head is left free: a run re-centres its bias on the mix's base rate
(``train_loop.centre_bias``) before the first step.
"""

from __future__ import annotations

import torch


class Anchor:
    """The encoder's starting weights and the pull toward them."""

    def __init__(self, model: torch.nn.Module, weight: float) -> None:
        self.weight = weight
        self.start = {name: p.detach().clone() for name, p in model.encoder.named_parameters()}

    def pull(self, model: torch.nn.Module, lr: float) -> None:
        """Move each encoder weight ``lr x weight`` of the way back to its start (at most all of it)."""
        share = min(1.0, lr * self.weight)
        with torch.no_grad():
            for name, p in model.encoder.named_parameters():
                p.lerp_(self.start[name], share)
