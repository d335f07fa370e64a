"""Ranker fine-tuning on SUGAR: listwise loss over the graded candidates plus a pointwise term.

The listwise term (ListNet: cross-entropy between softmax(logits) and softmax(labels * tau))
orders best > acceptable > bad inside an example. The pointwise term (binary cross-entropy on
"appropriate" = rated acceptable or best) anchors the logit's absolute level, so one threshold
can abstain across requests and the calibration map has something stable to fit.

Statements are augmented each epoch so the ranker tolerates the selector's mistakes: gold
statements are dropped at random, distractors are added at random, and the order is shuffled.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from service.tokenization import EncodedPair, PairEncoder
from training import metrics
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
class Augmentation:
    """Statement noise applied to training examples."""

    drop_gold: float = 0.1
    add_distractor: float = 0.15
    all_statements: float = 0.1
    #: With cross-fitted selections: how often a list uses them instead of noisy gold statements.
    selector_output: float = 0.7


def training_statements(
    example: SugarExample, rng: random.Random, aug: Augmentation, selected: Sequence[str] | None = None
) -> list[str]:
    """The statements of one training list.

    ``selected`` are the statements an out-of-fold selector kept for this example, most relevant
    first, as the service will pass them; used with probability ``aug.selector_output``.
    Otherwise a noisy version of the gold statements, shuffled.
    """
    if selected is not None and rng.random() < aug.selector_output:
        return list(selected)
    if rng.random() < aug.all_statements:
        chosen = list(example.statements)
    else:
        gold = [example.statements[i] for i in example.gold if rng.random() >= aug.drop_gold]
        gold_set = {example.statements[i] for i in example.gold} | {
            example.expanded[i] for i in example.expanded_gold
        }
        others = [s for s in dict.fromkeys([*example.statements, *example.expanded]) if s not in gold_set]
        chosen = gold + [s for s in others if rng.random() < aug.add_distractor]
    rng.shuffle(chosen)
    return chosen


def listwise_loss(logits: torch.Tensor, labels: torch.Tensor, *, tau: float, pointwise_weight: float):
    """ListNet over each example's candidates plus weighted BCE on appropriateness."""
    target = torch.softmax(labels * tau, dim=-1)
    listnet = -(target * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
    pointwise = torch.nn.functional.binary_cross_entropy_with_logits(logits, (labels >= 1).float())
    return listnet + pointwise_weight * pointwise


def encode_lists(
    encoder: PairEncoder, examples: Sequence[SugarExample], statements: Sequence[Sequence[str]]
) -> list[list[EncodedPair]]:
    """The candidate pairs of each example with the given statements."""
    return [
        encoder.encode_request(e.turns, s, e.candidates) for e, s in zip(examples, statements, strict=True)
    ]


def score_lists(model: torch.nn.Module, encoder: PairEncoder, lists: Sequence[Sequence[EncodedPair]]) -> list:
    """Logits per example, in candidate order."""
    return score_grouped(lambda flat: score_pairs(model, encoder, flat), lists)


def ranking_metrics(scores: Sequence[Sequence[float]], examples: Sequence[SugarExample]) -> dict[str, float]:
    """P@1, nDCG@3 and MRR on the examples with a bad candidate (the paper's protocol)."""
    rows = [(s, e.labels) for s, e in zip(scores, examples, strict=True) if e.has_bad]
    return {
        "precision_at_1": float(np.mean([metrics.precision_at_1(s, y) for s, y in rows])),
        "ndcg_at_3": float(np.mean([metrics.ndcg_at_k(s, y, 3) for s, y in rows])),
        "mrr": float(np.mean([metrics.reciprocal_rank(s, y) for s, y in rows])),
        "examples": len(rows),
    }


def train_ranker(
    backbone: str,
    encoder: PairEncoder,
    train: Sequence[SugarExample],
    dev: Sequence[SugarExample],
    dev_statements: Sequence[Sequence[str]],
    *,
    epochs: int,
    lr: float,
    batch_examples: int,
    tau: float,
    pointwise_weight: float,
    patience: int,
    seed: int,
    aug: Augmentation,
    max_steps: int | None = None,
    selections: dict[int, list[str]] | None = None,
) -> tuple[torch.nn.Module, list[dict]]:
    """Fine-tune with early stopping on dev nDCG@3; returns the best model and per-epoch history."""
    model = load_cross_encoder(backbone)
    steps_per_epoch = (len(train) + batch_examples - 1) // batch_examples
    total = epochs * steps_per_epoch if max_steps is None else min(max_steps, epochs * steps_per_epoch)
    optimizer, schedule = make_optimizer(model, lr=lr, total_steps=total)
    rng = random.Random(seed)
    dev_lists = encode_lists(encoder, dev, dev_statements)
    history: list[dict] = []
    best_state, best_ndcg, since_best, step = None, -1.0, 0, 0
    bar = tqdm(total=total, desc="ranker", unit="step")
    for epoch in range(epochs):
        model.train()
        order = list(range(len(train)))
        rng.shuffle(order)
        for idx in chunks(order, batch_examples):
            batch = [train[i] for i in idx]
            statements = [
                training_statements(e, rng, aug, selections.get(e.index) if selections else None)
                for e in batch
            ]
            lists = encode_lists(encoder, batch, statements)
            logits = model(**to_tensors(encoder, [p for pairs in lists for p in pairs])).logits.view(
                len(batch), -1
            )
            labels = torch.tensor([e.labels for e in batch], dtype=torch.float32, device=logits.device)
            loss = listwise_loss(logits, labels, tau=tau, pointwise_weight=pointwise_weight)
            optimizer_step(model, optimizer, schedule, loss)
            bar.update(1)
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")
            step += 1
            if step >= total:
                break
        dev_scores = score_lists(model, encoder, dev_lists)
        result = {"epoch": epoch + 1, "step": step, **ranking_metrics(dev_scores, dev)}
        history.append(result)
        tqdm.write(f"dev after epoch {epoch + 1}: {result}")
        if result["ndcg_at_3"] > best_ndcg:
            best_ndcg, since_best = result["ndcg_at_3"], 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            since_best += 1
            if since_best >= patience:
                break
        if step >= total:
            break
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    return model, history
