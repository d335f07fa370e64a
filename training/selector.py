"""Statement selector: a cross-encoder on (context, statement) trained on SUGAR's gold indices.

Positives are the statements marked relevant (``s.gold.sents.indices``); negatives are the
other statements of the 12 and the extra distractors of the expanded list, so the selector
learns to reject the distractors the robustness curve adds.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from service.tokenization import EncodedPair, PairEncoder
from training.backbone import (
    chunks,
    load_cross_encoder,
    make_optimizer,
    optimizer_step,
    score_pairs,
    to_tensors,
)
from training.grouping import score_grouped
from training.sugar import SugarExample


@dataclass
class SelectorData:
    """Encoded (context, statement) pairs with relevance labels."""

    pairs: list[EncodedPair]
    labels: np.ndarray


def statement_pool(example: SugarExample) -> tuple[list[str], list[int]]:
    """All distinct statements of an example (the 12 plus the expanded ones) with gold labels."""
    gold = {example.statements[i] for i in example.gold} | {
        example.expanded[i] for i in example.expanded_gold
    }
    pool = list(dict.fromkeys([*example.statements, *example.expanded]))
    return pool, [int(s in gold) for s in pool]


def encode_selector_data(encoder: PairEncoder, examples: Sequence[SugarExample]) -> SelectorData:
    """One pair per (example, statement), statement as segment B, as the service encodes them."""
    pairs: list[EncodedPair] = []
    labels: list[int] = []
    for e in examples:
        pool, gold = statement_pool(e)
        pairs.extend(encoder.encode_request(e.turns, [], pool))
        labels.extend(gold)
    return SelectorData(pairs, np.asarray(labels, dtype=np.float32))


def train_selector(
    backbone: str,
    encoder: PairEncoder,
    train: SelectorData,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
) -> torch.nn.Module:
    """Fine-tune a (context, statement) relevance classifier with binary cross-entropy."""
    model = load_cross_encoder(backbone)
    steps = epochs * ((len(train.pairs) + batch_size - 1) // batch_size)
    optimizer, schedule = make_optimizer(model, lr=lr, total_steps=steps)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    rng = random.Random(seed)
    bar = tqdm(total=steps, desc="selector", unit="step")
    for _ in range(epochs):
        model.train()
        order = list(range(len(train.pairs)))
        rng.shuffle(order)
        for idx in chunks(order, batch_size):
            logits = model(**to_tensors(encoder, [train.pairs[i] for i in idx])).logits.squeeze(-1)
            target = torch.from_numpy(train.labels[list(idx)]).to(logits.device)
            loss = loss_fn(logits, target)
            optimizer_step(model, optimizer, schedule, loss)
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    return model


def selector_logits(
    model: torch.nn.Module, encoder: PairEncoder, examples: Sequence[SugarExample], setting: str
):
    """Per example, the selector's logits for the statements given in ``setting``."""
    per_example = [encoder.encode_request(e.turns, [], e.statements_for(setting)) for e in examples]
    return score_grouped(lambda flat: score_pairs(model, encoder, flat, batch_size=64), per_example)


def fit_relevance_calibration(logits: Sequence[np.ndarray], examples: Sequence[SugarExample]):
    """Platt map from the selector's logits on the 12 statements of each example to P(gold)."""
    from training.calibrate import fit_platt

    gold = [[int(i in e.gold) for i in range(len(e.statements))] for e in examples]
    return fit_platt(np.concatenate(logits), np.concatenate(gold))


def precision_recall(selected: Sequence[Sequence[int]], gold: Sequence[Sequence[int]]) -> dict[str, float]:
    """Micro-averaged selection precision, recall and F1 against the gold indices."""
    tp = sum(len(set(s) & set(g)) for s, g in zip(selected, gold, strict=True))
    n_sel = sum(len(s) for s in selected)
    n_gold = sum(len(g) for g in gold)
    precision = tp / n_sel if n_sel else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
