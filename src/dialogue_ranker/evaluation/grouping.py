"""Score the items of many groups (candidates of many examples) in one pass, get them back per group."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def score_grouped(
    score_flat: Callable[[list[T]], np.ndarray], groups: Sequence[Sequence[T]]
) -> list[np.ndarray]:
    """``score_flat`` over every item of every group at once (so batches span groups), split per group."""
    if not groups:
        return []
    flat = [item for group in groups for item in group]
    scores = score_flat(flat) if flat else np.empty(0, dtype=np.float32)
    return np.split(scores, np.cumsum([len(group) for group in groups])[:-1])
