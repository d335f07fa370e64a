"""Distil an output ensemble of finished runs into the ranker being trained (``training.train --teacher``).

    ranker train --init runs/ranker-soup --teacher runs/ranker-open:0.5 \
        --teacher runs/ranker:0.5 --distill-weight 0.5 --data ... --out runs/ranker-distilled

Averaging two runs' logits per candidate (an output ensemble) ranks better than averaging their
weights, but costs an encoder pass per member (README "Training"). Distillation buys it at one
pass: the teachers score every training list with the student's own encoded sequences (the same
shuffled and thinned situations), their weighted logits are the targets, and the student learns
them beside the labels. Targets are matched per view: the full context and, for a multi-turn
list, its last turn alone, so the service's last-turn view (:mod:`serving.context_views`) combines
student logits that each stand for the teachers'.

Per list and view the loss is the cross-entropy from the teachers' softmax over the candidates to
the student's (ListNet with the teachers' logits as the target scores) plus a binary
cross-entropy toward the teachers' sigmoid, so the student keeps their scale as well as their
order. ``dialogue_ranker.training.train`` adds ``(1 - w) x`` its label loss to ``w x`` this.

``--keep-top MARGIN`` adds a hinge for each list whose teachers rank a right candidate first (one of
the list's highest grade, as P@1 counts it): the student's logit for it is held MARGIN above that of
its best candidate of a lower grade (:func:`keep_top_loss`). The softmax target says little about a
near tie, and a fine-tune's lost top-1 decisions are nearly all the base's near ties
(docs/research/2026-12-04-adapt-low-rank-and-statement-variants.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from dialogue_ranker.data.ranking_data import DataError
from dialogue_ranker.training.shared_prefix import (
    bundle_run_config,
    finished_run_config,
    load_run_for_scoring,
)


@dataclass(frozen=True)
class Teacher:
    """A finished run and its share of the ensemble's logit."""

    run: Path
    weight: float


def parse_teacher(text: str) -> Teacher:
    """``RUN:WEIGHT`` with a positive weight (the weights are normalised to sum to 1)."""
    path, sep, weight = text.rpartition(":")
    try:
        value = float(weight) if sep else -1.0
    except ValueError:
        value = -1.0
    if not path or value <= 0:
        raise argparse.ArgumentTypeError(f"--teacher takes RUN:WEIGHT with a positive weight, got {text!r}")
    return Teacher(Path(path), value)


def load_teacher(path: Path) -> tuple[dict, torch.nn.Module]:
    """A finished run, or a shipped bundle (a directory with ``metadata.json``) read back.

    A bundle's graph is dequantized (:func:`training.recover.dequantized_ranker`), so a stage
    on top of a shipped model can keep that model as its teacher where the stage's own lists
    say nothing new. Its config is the training configuration the bundle records.
    """
    if (path / "metadata.json").is_file():
        from dialogue_ranker.training.recover import dequantized_ranker

        config = bundle_run_config(path, "--teacher")
        model, _ = dequantized_ranker(path, head=config.get("head", "cosine"))
        return config, model
    config = finished_run_config(path, "--teacher")
    model, _ = load_run_for_scoring(path)
    return config, model


class Ensemble:
    """Frozen teacher runs whose weighted candidate logits are the targets."""

    def __init__(self, teachers: list[Teacher], encoding: dict, device: torch.device) -> None:
        total = sum(t.weight for t in teachers)
        self.members: list[tuple[torch.nn.Module, float]] = []
        self.configs: list[dict] = []
        for t in teachers:
            config, model = load_teacher(t.run)
            if config.get("layout", "shared-prefix") != "shared-prefix" or config["encoding"] != encoding:
                raise DataError(
                    f"--teacher {t.run}: encoded as {config['encoding']}, the student as {encoding}; "
                    "a teacher must read the student's sequences"
                )
            for p in model.parameters():
                p.requires_grad_(False)
            self.members.append((model.to(device).eval(), t.weight / total))
            self.configs.append({"run": str(t.run), "weight": t.weight / total, "config": config})

    @torch.no_grad()
    def logits(self, candidate_logits: Callable[[torch.nn.Module], torch.Tensor]) -> torch.Tensor:
        """The weighted sum of each member's ``candidate_logits(member)`` (fp32)."""
        return sum(w * candidate_logits(m).float() for m, w in self.members)  # type: ignore[return-value]


@dataclass(frozen=True)
class KeepTop:
    """``--keep-top``: which candidates are right (their list's highest grade), and the margin in logits."""

    right: torch.Tensor
    margin: float


def keep_top_loss(
    student: torch.Tensor, teacher: torch.Tensor, present: torch.Tensor, right: torch.Tensor, margin: float
) -> torch.Tensor:
    """The mean over lists of ``relu(margin - gap)``, where the teachers rank a right candidate first.

    ``gap``: the student's logit for the teachers' top candidate minus its best wrong candidate's
    (``right``: each list's highest grade; a lower grade is wrong, an acceptable reply under the best
    one included, as P@1 counts it). A list whose teachers' top is wrong, or that has no wrong
    candidate, adds zero: the hinge keeps what the teachers got right, not their mistakes.
    """
    blocked = torch.finfo(student.dtype).min
    top = teacher.masked_fill(~present, blocked).argmax(-1, keepdim=True)
    wrong = present & ~right
    held = right.gather(1, top).squeeze(1) & wrong.any(-1)
    gap = student.gather(1, top).squeeze(1) - student.masked_fill(~wrong, blocked).max(-1).values
    return (torch.relu(margin - gap) * held).sum() / len(student)


def distillation_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    present: torch.Tensor,
    taught: torch.Tensor | None = None,
    keep: KeepTop | None = None,
) -> torch.Tensor:
    """Listwise cross-entropy toward the teachers' softmax plus BCE toward their sigmoid.

    ``student``, ``teacher``: (lists, widest list) logits; ``present``: which entries are candidates;
    ``taught``: which lists are distilled (``--distill-on``; default all). None taught: zero.
    ``keep``: ``--keep-top``'s hinge added (:func:`keep_top_loss`).
    """
    if taught is not None:
        if not bool(taught.any()):
            return student.sum() * 0.0  # keeps the graph: the step still backpropagates its labels
        student, teacher, present = student[taught], teacher[taught], present[taught]
        keep = KeepTop(keep.right[taught], keep.margin) if keep else None
    blocked = torch.finfo(student.dtype).min
    target = torch.softmax(teacher.masked_fill(~present, blocked), dim=-1)
    log_p = torch.log_softmax(student.masked_fill(~present, blocked), dim=-1)
    listwise = -(target * log_p).masked_fill(~present, 0.0).sum(-1).mean()
    pointwise = torch.nn.functional.binary_cross_entropy_with_logits(
        student[present], torch.sigmoid(teacher[present])
    )
    if keep is None or keep.margin <= 0:
        return listwise + pointwise
    return listwise + pointwise + keep_top_loss(student, teacher, present, keep.right, keep.margin)
