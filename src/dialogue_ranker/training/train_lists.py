"""The lists ``ranker train`` reads, and how one becomes the encoder's sequences.

Each ``--data`` file's train and dev parts (the evaluation CLI's group split), an epoch's batches by
the files' weights, and a list's sequences (situations shuffled and thinned, candidates sampled).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.data.ranking_data import DataError, RankingList, read_lists
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.serving.list_encoding import ListEncoder


@dataclass(frozen=True)
class Source:
    """One training file and its weight."""

    name: str
    path: Path
    weight: float


def load_splits(
    args: argparse.Namespace,
) -> tuple[dict[str, list[RankingList]], dict[str, list[RankingList]]]:
    """Train and dev lists per file."""
    train, dev = {}, {}
    rng = random.Random(args.seed if args.dev_seed is None else args.dev_seed)
    for source in args.data:
        if source.name in train:
            raise DataError(f"{source.path}: another --data file is also named {source.name!r}")
        lists = read_lists(source.path)
        train[source.name] = [x for x in lists if group_split(x.group) == "train"][: args.limit]
        held = [x for x in lists if group_split(x.group) == "dev"]
        if len(held) > args.dev_lists:
            held = rng.sample(held, args.dev_lists)
        dev[source.name] = held
        if not train[source.name] or not dev[source.name]:
            raise DataError(f"{source.path}: needs lists in both the train and dev parts of the group split")
    return train, dev


def epoch_batches(
    args: argparse.Namespace, train: dict[str, list[RankingList]], rng: random.Random
) -> list[list[RankingList]]:
    """One epoch: each file's share by its weight, batched within a file (similar lengths), shuffled."""
    batches = []
    for source in args.data:
        lists = train[source.name]
        whole, part = divmod(source.weight, 1.0)
        chosen = [x for _ in range(int(whole)) for x in rng.sample(lists, len(lists))]
        chosen += rng.sample(lists, round(part * len(lists)))
        batches += [chosen[i : i + args.batch_lists] for i in range(0, len(chosen), args.batch_lists)]
    rng.shuffle(batches)
    return batches


def encode(encoder: ListEncoder, x: RankingList, rng: random.Random | None = None, *, thinned: float = 0.0):
    """The list's sequences; with ``rng`` (training), situations shuffled and some lists thinned.

    In a ``thinned`` share of the lists that mark their relevant situations, half the others are
    dropped. Thinned lists show the ranker more clearly which situations decide the ranking; the rest keep
    every situation, as the service gives them (there is no selector in front of this ranker).
    """
    situations = list(x.situations)
    if rng is not None:
        if x.relevant_situations and rng.random() < thinned:
            relevant = set(x.relevant_situations)
            situations = [s for i, s in enumerate(situations) if i in relevant or rng.random() < 0.5]
        rng.shuffle(situations)
    return encoder.encode_request(x.context, situations, [c.text for c in x.candidates])


def sample_candidates(x: RankingList, n: int, rng: random.Random) -> RankingList:
    """``x`` with at most ``n`` candidates: its appropriate ones first, then sampled negatives.

    Design runs use it to train a per-pair cross-encoder, which pays a whole sequence per
    candidate, on a budget this CPU can give; both layouts then see the same candidates.
    """
    if len(x.candidates) <= n:
        return x
    good = [c for c in x.candidates if c.appropriate][: max(1, n - 1)]
    rest = [c for c in x.candidates if not c.appropriate]
    kept = good + rng.sample(rest, min(len(rest), n - len(good)))
    rng.shuffle(kept)
    return dataclasses.replace(x, candidates=tuple(kept))
