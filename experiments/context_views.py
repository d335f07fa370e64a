"""Which contexts to score a multi-turn request with: the table behind the last-turn view.

    .venv/bin/python -m experiments.context_views [--model models/dialogue-minilm-l6]

Scores each list of Topical-Chat dev and test (600 each, the evaluation CLI's seeded sample and
split), Topical-Chat entity-fact dev (300), SUGAR test and DailyDialog++ dev with the bundle's
graph under four contexts: every turn, the last turn alone, none (a bare "." turn: the reply's
own prior) and the last two turns. Then it prints P@1, MRR and, for DailyDialog++, the
within-context AUC against adversarial and random replies, for each view and for weighted means
of their logits (the view weights the bundle could carry in ``views``). A one-turn list is scored
with every turn alone, as the service scores it (before model 2.8.0 the mixes with the prior
scored one-turn lists with it too: the SUGAR column of the 2.6.0 table). Ranks only: no calibration
is involved. About 8 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

import numpy as np

from export.checks import score_sequences, session
from service.list_encoding import ListEncoder
from service.model_bundle import load_bundle
from training import metrics
from training.domain_eval import held_out, within_context_auc
from training.ranking_data import RankingList, read_lists

DATA = "runs/data"
#: (name, file, split, lists): the evaluation CLI's split; DailyDialog++ is evaluation data only.
SETS = (
    ("topical-chat dev", "topical-chat.jsonl", "dev", 600),
    ("topical-chat test", "topical-chat.jsonl", "test", 600),
    ("entity-fact dev", "topical-chat-entity-fact.jsonl", "dev", 300),
    ("sugar test", "sugar.jsonl", "test", 600),
    ("dailydialog++ dev", "dailydialog-pp.jsonl", "all", 1028),
)
#: Weighted sums of the views' logits (full, last, none, last two); rank order is all that is read.
MIXES = (
    (1, 0, 0, 0),  # each view alone
    (0, 1, 0, 0),
    (0, 0, 1, 0),
    (0, 0, 0, 1),
    *((1, last, 0, 0) for last in (0.25, 0.5, 0.75, 1)),  # the last-turn view's weight
    (1, 0, 0.25, 0),
    *((1, 0.5, prior, 0) for prior in (0.1, 0.15, 0.2, 0.25, 0.3)),  # a little of the reply's prior
    (1, 0.75, 0.2, 0),
    (1, 1, 0.5, 0),
    *((1, 0, 0, two) for two in (0.5, 1)),  # the last two turns instead of the last one
    (1, 0.25, 0, 0.25),
)
VIEWS = ("full", "last", "none", "last two")


def view_logits(sess, encoder: ListEncoder, lists: Sequence[RankingList], view: str) -> list[np.ndarray]:
    """Candidate logits per list with every turn (``full``), the last one or two, or a bare ``none``."""
    requests = []
    for x in lists:
        turns = {
            "full": x.context,
            "last": x.context[-1:],
            "last two": x.context[-2:],
            "none": tuple(dataclasses.replace(t, text=".") for t in x.context[-1:]),
        }[view]
        requests.append(encoder.encode_request(turns, x.situations, [c.text for c in x.candidates]))
    return [np.asarray(z, dtype=np.float64) for z in score_sequences(sess, encoder, requests)]


def line(lists: Sequence[RankingList], logits: Sequence[np.ndarray]) -> str:
    """P@1 and MRR, and the AUCs where lists name adversarial and random replies."""
    gains = [[c.gain for c in x.candidates] for x in lists]
    p1 = np.mean([metrics.precision_at_1(z, g) for z, g in zip(logits, gains, strict=True)])
    mrr = np.mean([metrics.reciprocal_rank(z, g) for z, g in zip(logits, gains, strict=True)])
    out = f"P@1 {p1:.3f} MRR {mrr:.3f}"
    for kind in ("adversarial", "random"):
        aucs = [
            within_context_auc(
                z,
                [c.appropriate for c in x.candidates],
                [c.generator == kind and not c.appropriate for c in x.candidates],
            )
            for x, z in zip(lists, logits, strict=True)
        ]
        kept = [a for a in aucs if a is not None]
        if kept:
            out += f" AUC-{kind} {np.mean(kept):.3f}"
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="models/dialogue-minilm-l6")
    args = p.parse_args(argv)
    bundle = load_bundle(args.model)
    encoder = bundle.pair_encoder()
    assert isinstance(encoder, ListEncoder), "a shared-prefix bundle is needed"
    sess = session(bundle.ranker.path)
    for name, file, split, n in SETS:
        lists = held_out(read_lists(f"{DATA}/{file}"), split, n)
        views = [view_logits(sess, encoder, lists, v) for v in VIEWS]
        turns = np.mean([len(x.context) for x in lists])
        print(f"{name}: {len(lists)} lists, {turns:.2f} turns on average", flush=True)
        for mix in MIXES:
            mixed = [
                sum(w * z for w, z in zip(mix, zs, strict=True)) if len(x.context) > 1 else zs[0]
                for x, zs in zip(lists, zip(*views, strict=True), strict=True)
            ]
            label = " + ".join(f"{w:g} {v}" for w, v in zip(mix, VIEWS, strict=True) if w)
            print(f"  {label}: {line(lists, mixed)}", flush=True)


if __name__ == "__main__":
    main()
