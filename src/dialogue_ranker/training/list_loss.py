"""The losses ``ranker train`` minimises, on lists scored in one forward pass.

A batch's lists are padded once (:class:`ListBatch`) so a student and its teachers read the same
sequences; :class:`ViewLogits` adds the last-turn view the service combines; the label loss is
ListNet over the gains plus a pointwise BCE on "appropriate", mixed with distillation when there
are teachers.
"""

from __future__ import annotations

import dataclasses

import torch

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.serving import context_views
from dialogue_ranker.serving.list_encoding import EncodedList, ListEncoder
from dialogue_ranker.training.backbone import device
from dialogue_ranker.training.distill import Ensemble, KeepTop, distillation_loss
from dialogue_ranker.training.shared_prefix import candidate_means, to_tensors
from dialogue_ranker.training.train_lists import encode, sample_candidates


def list_logits(model, encoder: ListEncoder, sequences: list[list[EncodedList]]) -> torch.Tensor:
    """(lists, widest list) candidate logits, each list's sequences in order; absent candidates 0."""
    return ListBatch(encoder, sequences).logits(model)


class ListBatch:
    """Lists' sequences padded once, to be scored by one model or several (a student and its teachers)."""

    def __init__(self, encoder: ListEncoder, sequences: list[list[EncodedList]]) -> None:
        self.encoder = encoder
        self.sequences = sequences
        self.flat = [s for seqs in sequences for s in seqs]
        self.feeds = to_tensors(encoder, self.flat, device())

    def logits(self, model) -> torch.Tensor:
        """(lists, widest list) candidate logits of ``model``; absent candidates 0."""
        # fp32 from here on, whatever precision the encoder ran in: the losses' masks and softmaxes.
        token_logits = model(**self.feeds).float()
        per_sequence = candidate_means(
            token_logits, self.feeds["segment_ids"], max(s.candidates for s in self.flat)
        )
        rows, start = [], 0
        for seqs in self.sequences:
            rows.append(torch.cat([per_sequence[start + i, : s.candidates] for i, s in enumerate(seqs)]))
            start += len(seqs)
        width = max(len(r) for r in rows)
        return torch.stack([torch.nn.functional.pad(r, (0, width - len(r))) for r in rows])

    def rows(self, kept: list[bool]) -> ListBatch:
        """The lists (rows) flagged in ``kept``, padded anew to their own longest sequence."""
        kept_sequences = [seqs for seqs, keep in zip(self.sequences, kept, strict=True) if keep]
        return ListBatch(self.encoder, kept_sequences)

    def present(self) -> torch.Tensor:
        """(lists, widest list): which entries of :meth:`logits`' rows are candidates."""
        counts = torch.tensor([sum(s.candidates for s in seqs) for seqs in self.sequences])
        return torch.arange(int(counts.max()))[None, :] < counts[:, None]


def served_logits(model, encoder: ListEncoder, batch: list[RankingList], args, rng) -> torch.Tensor:
    """The batch's candidate logits as the service combines them (one forward pass for every view)."""
    views = ViewLogits(encoder, batch, args, rng, last_turn=args.last_turn_weight > 0)
    return views.served(views.batch.logits(model), args.last_turn_weight)


class ViewLogits:
    """A batch's lists with every turn, then its multi-turn lists with their last turn alone.

    The sequences are encoded (situations shuffled and thinned) once, so a student and its teachers
    read the same ones.
    """

    def __init__(self, encoder: ListEncoder, batch: list[RankingList], args, rng, *, last_turn: bool) -> None:
        sequences = [encode(encoder, x, rng, thinned=args.thinned) for x in batch]
        views = [context_views.views(x.context, 1.0 if last_turn else 0.0) for x in batch]
        self.size = len(batch)
        self.multi = [row for row, v in enumerate(views) if len(v) > 1]
        last = [encode(encoder, dataclasses.replace(batch[r], context=views[r][-1]), rng) for r in self.multi]
        self.batch = ListBatch(encoder, sequences + last)

    def per_row(self, flags: list[bool]) -> torch.Tensor:
        """A flag per list as a flag per row of :attr:`batch` (a list's last-turn row shares its flag)."""
        return torch.tensor(flags + [flags[r] for r in self.multi], dtype=torch.bool)

    def best(self, batch: list[RankingList]) -> torch.Tensor:
        """:func:`top_grade` per row: a last-turn row has its list's."""
        full = top_grade(batch)
        return torch.cat([full, full[self.multi]])

    def served(self, logits: torch.Tensor, last_turn_weight: float) -> torch.Tensor:
        """Each list's logits as the service combines its views (``logits``: one row per view)."""
        full = logits[: self.size]
        if not self.multi or last_turn_weight <= 0:
            return full
        combined = full.clone()
        combined[self.multi] = context_views.mean(full[self.multi], logits[self.size :], last_turn_weight)
        return combined


def top_grade(batch: list[RankingList]) -> torch.Tensor:
    """(lists, widest list): each list's candidates of its highest grade, which P@1 counts right.

    None where no candidate is appropriate.
    """
    best = torch.zeros(len(batch), max(len(x.candidates) for x in batch), dtype=torch.bool)
    for row, x in enumerate(batch):
        gains = [c.gain for c in x.candidates]
        best[row, : len(gains)] = torch.tensor([g == max(gains) > 0 for g in gains])
    return best


def label_loss(logits: torch.Tensor, batch: list[RankingList], args) -> torch.Tensor:
    """ListNet over the labels' gains plus pointwise BCE on "appropriate" (candidates padded and masked).

    The BCE is weighted per list by its file (:func:`pointwise_weights`) and averaged over candidates.
    """
    width = logits.shape[1]
    present = torch.zeros(len(batch), width, dtype=torch.bool)
    gains = torch.zeros(len(batch), width)
    targets = torch.zeros(len(batch), width)
    for row, x in enumerate(batch):
        n = len(x.candidates)
        present[row, :n] = True
        gains[row, :n] = torch.tensor([c.gain for c in x.candidates])
        targets[row, :n] = torch.tensor(
            [float(c.label) if isinstance(c.label, float) else float(c.appropriate) for c in x.candidates]
        )
    present, gains, targets = present.to(logits.device), gains.to(logits.device), targets.to(logits.device)
    blocked = torch.finfo(logits.dtype).min
    target = torch.softmax((gains * args.tau).masked_fill(~present, blocked), dim=-1)
    log_p = torch.log_softmax(logits.masked_fill(~present, blocked), dim=-1)
    listnet = -(target * log_p).masked_fill(~present, 0.0).sum(-1).mean()
    weights = pointwise_weights(batch, args)
    if weights is None:  # one weight: the loss as every run before --pointwise-on computed it
        bce = torch.nn.functional.binary_cross_entropy_with_logits(logits[present], targets[present])
        return listnet + args.pointwise_weight * bce
    each = torch.nn.functional.binary_cross_entropy_with_logits(
        logits[present], targets[present], reduction="none"
    )
    per_candidate = torch.tensor(weights, device=logits.device)[:, None].expand_as(present)[present]
    return listnet + (per_candidate * each).mean()


def pointwise_weights(batch: list[RankingList], args) -> list[float] | None:
    """``--pointwise-on``: each list's BCE weight, by the ``--data`` file it was read from.

    None without ``--pointwise-on``: every list takes ``--pointwise-weight``.
    """
    given = dict(getattr(args, "pointwise_on", None) or ())
    if not given:
        return None
    by_path = {str(s.path): given[s.name] for s in args.data if s.name in given}
    return [by_path.get(list_file(x), args.pointwise_weight) for x in batch]


def list_file(x: RankingList) -> str:
    """The ``--data`` file a training list was read from (its origin is ``FILE:LINE``)."""
    return x.origin.rpartition(":")[0]


def data_files(args, names: list[str]) -> set[str]:
    """The paths of the ``--data`` files with these names (as :func:`list_file` reads a list's)."""
    return {str(s.path) for s in args.data if s.name in names}


def cut_files(args) -> set[str] | None:
    """The files whose lists ``--train-candidates`` cuts: ``--train-candidates-on``'s, or every one (None)."""
    names = getattr(args, "train_candidates_on", None)
    return data_files(args, names) if names else None


def cut_batch(batch: list[RankingList], args, rng) -> list[RankingList]:
    """``--train-candidates``: each list of a cut file with at most that many candidates, drawn afresh."""
    if not args.train_candidates:
        return batch
    cut = cut_files(args)
    return [
        sample_candidates(x, args.train_candidates, rng) if cut is None or list_file(x) in cut else x
        for x in batch
    ]


def loss_of(
    model, encoder: ListEncoder, batch: list[RankingList], args, rng, teachers: Ensemble | None = None
) -> torch.Tensor:
    """The label loss on the served logits; with ``teachers``, mixed with distillation on every view."""
    batch = cut_batch(batch, args, rng)
    # Teachers are matched on the last-turn view too, whether or not the labels are.
    views = ViewLogits(encoder, batch, args, rng, last_turn=args.last_turn_weight > 0 or teachers is not None)
    logits = views.batch.logits(model)
    served = views.served(logits, args.last_turn_weight)
    if teachers is None:
        return label_loss(served, batch, args)
    present = views.batch.present().to(logits.device)
    margin = getattr(args, "keep_top", 0.0)
    keep = KeepTop(views.best(batch).to(logits.device), margin) if margin > 0 else None
    shares = getattr(args, "distill_shares", None)
    if shares:  # each file its own mix: the taught mask below is not needed
        names = {str(s.path): s.name for s in args.data}
        per_list = [shares.get(names.get(list_file(x), ""), 0.0) for x in batch]
        target = teacher_targets(teachers, views.batch, views.per_row([s > 0 for s in per_list]), logits)
        return mixed_by_share(served, batch, args, (logits, target, present, keep), per_list, views.per_row)
    taught_lists, taught = None, None
    rows = torch.ones(len(views.batch.sequences), dtype=torch.bool)  # every row taught
    if args.distill_on:
        files = data_files(args, args.distill_on)
        taught_lists = [list_file(x) in files for x in batch]
        rows = views.per_row(taught_lists)
        taught = rows.to(logits.device)
    target = teacher_targets(teachers, views.batch, rows, logits)
    distilled = distillation_loss(logits, target, present, taught, keep)
    if getattr(args, "distill_replaces_labels", False) and taught_lists is not None:
        return taught_or_labelled(served, batch, args, distilled, taught_lists)
    return (1 - args.distill_weight) * label_loss(served, batch, args) + args.distill_weight * distilled


def teacher_targets(
    teachers: Ensemble, batch: ListBatch, rows: torch.Tensor, logits: torch.Tensor
) -> torch.Tensor:
    """The teachers' logits on the rows the distillation reads (``rows``), zero on the others.

    A batch of one file (``ranker train`` batches within a file) is either all taught or not at all:
    ``ranker adapt``'s batches of the team's own lists, which the base does not teach, run no
    teacher (an adapt-like step 2.44 s -> 2.29 s on a Zen 4). Every row taught is the one
    batch as padded for the student, so the targets are the same bits as the student's sequences give.
    """
    if bool(rows.all()):
        return teachers.logits(batch.logits)
    target = torch.zeros_like(logits, dtype=torch.float32)
    if bool(rows.any()):
        taught = teachers.logits(batch.rows(rows.tolist()).logits)
        target[rows.to(logits.device), : taught.shape[1]] = taught
    return target


def mixed_by_share(
    served: torch.Tensor,
    batch: list[RankingList],
    args,
    distill: tuple[torch.Tensor, torch.Tensor, torch.Tensor, KeepTop | None],
    shares: list[float],
    per_row,
) -> torch.Tensor:
    """``--distill-on NAME:SHARE``: each list learns ``(1 - SHARE) x`` its labels ``+ SHARE x`` the teachers.

    ``shares``: the teachers' share of each list (0 for a file not named: its labels alone);
    ``distill``: the student's and the teachers' logits per row, which entries are candidates, and
    ``--keep-top``'s hinge (None: off);
    ``per_row``: a flag per list as a flag per row. Each list counts once: the lists of one share
    form a group, and each group's mix is weighted by its share of the batch's lists.
    """
    logits, target, present, keep = distill
    loss = served.sum() * 0.0  # keeps the graph where no group has a term
    for share in sorted(set(shares)):
        members = [row for row, s in enumerate(shares) if s == share]
        part = len(members) / len(batch)
        if share < 1:
            labels = label_loss(served[members], [batch[row] for row in members], args)
            loss = loss + part * (1 - share) * labels
        if share > 0:
            rows = per_row([s == share for s in shares]).to(logits.device)
            loss = loss + part * share * distillation_loss(logits, target, present, rows, keep)
    return loss


def taught_or_labelled(
    served: torch.Tensor, batch: list[RankingList], args, distilled: torch.Tensor, taught_lists: list[bool]
) -> torch.Tensor:
    """``--distill-replaces-labels``: the taught lists' distillation loss, the others' label loss.

    Each list counts once: the two means are weighted by their share of the batch's lists.
    """
    share = sum(taught_lists) / len(batch)
    loss = share * distilled
    kept = [row for row, taught in enumerate(taught_lists) if not taught]
    if kept:
        loss = loss + (1 - share) * label_loss(served[kept], [batch[row] for row in kept], args)
    return loss
