"""Soft labels from a teacher bundle, for distilling it into a ranker without its cost.

    python -m experiments.soft_labels --teacher build/similarity-bundle \
        --lists runs/data/topical-chat-entity-fact.jsonl --out runs/data/distill-tc-ef.jsonl

A seeded sample of the file's train lists (``--train-lists``) and 400 of its dev lists, each
candidate's label replaced by ``mix x label + (1 - mix) x teacher P(appropriate)`` (a grade above 1
counts as 1). With ``mix`` 0.5 the true turn stays appropriate (0.5 or more) and every negative
stays inappropriate, while the teacher orders the negatives among themselves and sets how far below
the true turn each one is: ``training.train`` reads a float label as a soft target, for ListNet
(softmax of 3 x 2 x label) and for the pointwise loss. The teacher was the ``export --similarity``
bundle of 2.3.0's run (README, "Distilling the similarity"); the test split is never written.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from pathlib import Path

from service.model_bundle import load_bundle
from training.domain_eval import ListScorer, group_split
from training.ranking_data import RankingList, read_lists, write_lists

DEV_LISTS = 400


def soft_labelled(lists: list[RankingList], scorer: ListScorer, mix: float) -> list[RankingList]:
    """``lists`` with each label mixed with the teacher's calibrated probability."""
    out = []
    for start in range(0, len(lists), 200):
        chunk = lists[start : start + 200]
        for x, probs in zip(chunk, scorer.probabilities(chunk), strict=True):
            candidates = tuple(
                dataclasses.replace(c, label=round(mix * min(float(c.label), 1.0) + (1 - mix) * float(p), 4))
                for c, p in zip(x.candidates, probs, strict=True)
            )
            out.append(dataclasses.replace(x, candidates=candidates))
        print(f"{len(out)} of {len(lists)} lists", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", type=Path, required=True, help="model bundle whose probabilities teach")
    p.add_argument("--lists", type=Path, required=True, help="ranking-data file to relabel")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--train-lists", type=int, default=3000)
    p.add_argument("--mix", type=float, default=0.5, help="share of the original label")
    args = p.parse_args(argv)
    lists = read_lists(args.lists)
    rng = random.Random(0)
    train = [x for x in lists if group_split(x.group) == "train"]
    dev = [x for x in lists if group_split(x.group) == "dev"]
    chosen = rng.sample(train, min(args.train_lists, len(train))) + rng.sample(dev, min(DEV_LISTS, len(dev)))
    written = write_lists(args.out, soft_labelled(chosen, ListScorer(load_bundle(args.teacher)), args.mix))
    print(f"wrote {written} lists to {args.out}")
    return written


if __name__ == "__main__":
    main()
