"""Whether the ranker's score of a Topical-Chat turn follows the turn's human rating.

    .venv/bin/python -m experiments.turn_ratings [--model models/dialogue-minilm-l6]

Topical-Chat rates every turn (Poor, Not Good, Passable, Good, Excellent); no training step reads
the ratings. This scores the true turn of each held-out list (dev and test groups of
``runs/data/topical-chat.jsonl``) alone, as a one-candidate request with the bundle's views, and
reports how often the scores order two turns with different ratings as the ratings do: over
every pair, over pairs within one conversation, and as the AUC of Good or Excellent turns against
the rest. It keeps every turn rated Passable or lower (about 900) and a seeded sample three times
that size of the others, so the run takes about 2 minutes on 2 cores.

The ratings grade human turns that all fit their context, across contexts; the agreement the
issue asks for orders system replies to one context. So this is a neighbour of that measure, not
the measure itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from export.checks import score_lists, session
from service.model_bundle import load_bundle
from training.domain_eval import group_split, within_context_auc
from training.metrics import ordered_pairs
from training.ranking_data import read_lists

CONVERSATIONS = Path("../shared/data/topical_chat/conversations")
SPLITS = ("valid_freq", "valid_rare", "test_freq", "test_rare")
GRADES = {"Poor": 0, "Not Good": 1, "Passable": 2, "Good": 3, "Excellent": 4}


def ratings() -> dict[tuple[str, str], int]:
    """(list group, turn text) -> the turn's rating on a 0-4 scale."""
    out = {}
    for split in SPLITS:
        for conv_id, conv in json.loads((CONVERSATIONS / f"{split}.json").read_text("utf-8")).items():
            for turn in conv["content"]:
                if turn.get("turn_rating") in GRADES:
                    out[(f"topical-chat-{conv_id}", turn["message"].strip())] = GRADES[turn["turn_rating"]]
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="models/dialogue-minilm-l6")
    p.add_argument("--lists", default="runs/data/topical-chat.jsonl")
    args = p.parse_args(argv)
    rated = ratings()
    turns = []  # (list, its true turn, the turn's rating)
    for x in read_lists(args.lists):
        if group_split(x.group) == "train":
            continue
        true = next(c for c in x.candidates if c.appropriate)
        if (x.group, true.text) in rated:
            turns.append((x, true, rated[(x.group, true.text)]))
    low = [t for t in turns if t[2] <= GRADES["Passable"]]
    high = [t for t in turns if t[2] > GRADES["Passable"]]
    picked = np.random.default_rng(0).choice(len(high), min(len(high), 3 * len(low)), replace=False)
    kept = low + [high[i] for i in sorted(picked)]
    print(
        f"{len(turns)} rated held-out turns ({len(low)} Passable or lower); scoring {len(kept)}", flush=True
    )

    bundle = load_bundle(args.model)
    encoder, sess = bundle.pair_encoder(), session(bundle.ranker.path)
    alone = [dataclasses.replace(x, candidates=(true,)) for x, true, _ in kept]
    logits = score_lists(sess, encoder, alone, views=bundle.views)
    s = np.asarray([z[0] for z in logits], dtype=np.float64)
    g = np.asarray([r for _, _, r in kept])
    agreeing, pairs = ordered_pairs(s, g)
    print(f"every pair: {agreeing / pairs:.3f} of {pairs} pairs ordered as the ratings")
    groups = np.array([x.group for x, _, _ in kept])
    within = [ordered_pairs(s[groups == k], g[groups == k]) for k in np.unique(groups)]
    agreeing, pairs = (sum(w[i] for w in within) for i in (0, 1))
    print(f"pairs within one conversation: {agreeing / pairs:.3f} of {pairs} pairs")
    good = g > GRADES["Passable"]
    auc = within_context_auc(s.tolist(), good.tolist(), (~good).tolist())
    print(f"AUC of Good or Excellent turns against the rest: {auc:.3f} ({good.sum()} and {(~good).sum()})")


if __name__ == "__main__":
    main()
