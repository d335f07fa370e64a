r"""Evaluate a model directory per dataset on ranking lists in the generic format, as the service scores.

    ranker evaluate --model models/dialogue-minilm-l6 \
        --lists topical-chat=runs/data/topical-chat.jsonl --lists ddpp=runs/data/dailydialog-pp.jsonl \
        --split test --max-lists 500

Per dataset: Precision@1, nDCG@3 and MRR (grades as gains), R@1 of 10 on lists of exactly ten
candidates with one appropriate (Topical-Chat's), the within-context AUC of appropriate
candidates against ``adversarial`` and against ``random`` ones where lists name them
(DailyDialog++'s), the share of candidate pairs with different grades that the scores order as
the grades do (pooled over the dataset's pairs; on SUGAR's human ratings 0/1/2 it is the
agreement-with-human-ratings measure of response-rating studies), ECE of the calibrated scores
and abstention accuracy at the model's threshold. Statements go through the bundle's selector
first, as in the service.

``--split`` keeps the lists whose group falls in that part of :func:`group_split` (a stable hash
of the group, so training and evaluation agree without a split file); ``all`` keeps every list
(for data no model trains on, such as DailyDialog++). ``--max-lists`` takes a seeded sample.
``--run`` scores a training run directory in PyTorch instead, before any export (its own
calibration and threshold; ``ranker evaluate --run runs/ranker-open --split test
...``): a way to compare runs trained elsewhere, e.g. on a GPU, without exporting each; a bundle's
int8 figures differ from its run's by up to about 0.02 (2.4.0: Topical-Chat R@1 0.193 against
0.210, DailyDialog++ 0.792 against 0.798).

``--model`` repeated scores each model on the same lists and ends with a table of the models side
by side (a row per dataset and metric, and the last model's difference from the first): how a
new model version is compared with the shipped one.

``--out`` writes the results as JSON; ``ranker card`` renders a bundle's ``eval-*.json`` files
into its model card.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error, read_lists
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.grouping import score_grouped
from dialogue_ranker.evaluation.scoring import (
    add_backend_arguments,
    runtime_label,
    score,
    score_lists,
    scoring_runtime,
    session,
)
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.serving.model_bundle import ModelBundle, load_bundle

#: Shares of groups in dev and test under :func:`group_split` (the rest is train).
DEV_SHARE, TEST_SHARE = 0.15, 0.15


def group_bucket(group: str) -> float:
    """A group's place in [0, 1], by a stable hash (SHA-1, never Python's ``hash``)."""
    return int(hashlib.sha1(group.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF


def group_split(group: str) -> str:
    """``train``, ``dev`` or ``test`` for a group, by :func:`group_bucket`."""
    bucket = group_bucket(group)
    if bucket < TEST_SHARE:
        return "test"
    return "dev" if bucket < TEST_SHARE + DEV_SHARE else "train"


def held_out(
    lists: Sequence[RankingList], split: str, max_lists: int = 0, seed: int = 0
) -> list[RankingList]:
    """The lists of ``split``, a seeded sample of ``max_lists`` when more (0: all).

    ``split`` is a part of the group split, ``all`` (every list), or parts joined by ``+``
    (``dev+test``: either, in the file's order). The evaluation tables' selection: experiments that
    score the same sets call this too, so their figures are on the same lists.
    """
    parts = set(split.split("+"))
    kept = [x for x in lists if split == "all" or group_split(x.group) in parts]
    return random.Random(seed).sample(kept, max_lists) if max_lists and len(kept) > max_lists else kept


def within_context_auc(
    scores: Sequence[float], positive: Sequence[bool], negative: Sequence[bool]
) -> float | None:
    """P(a positive outscores a negative) in one list (ties count half); None without both kinds."""
    pos = [s for s, p in zip(scores, positive, strict=True) if p]
    neg = [s for s, n in zip(scores, negative, strict=True) if n]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


class ListScorer:
    """Calibrated scores of ranking lists with a bundle's graph, as the service scores them."""

    def __init__(
        self,
        bundle: ModelBundle,
        *,
        threads: int = 2,
        backend: str = "onnx",
        precision: str = "auto",
        weights: str = "auto",
    ) -> None:
        self.bundle = bundle
        self.batch_size = bundle.serving_sub_batch_pairs or 16
        runtime = {"threads": threads, "backend": backend, "precision": precision, "weights": weights}
        self.ranker = session(bundle.ranker.path, **runtime)
        self.encoder = bundle.pair_encoder()

    def statements(self, lists: Sequence[RankingList]) -> list[list[str]]:
        """The situations each list gives the ranker: every one, in order, as the service does."""
        return [list(x.situations) for x in lists]

    def probabilities(self, lists: Sequence[RankingList]) -> list[np.ndarray]:
        """Calibrated P(appropriate) per candidate, per list."""
        return [np.asarray(self.bundle.calibration(z)) for z in self.logits(lists)]

    def logits(self, lists: Sequence[RankingList]) -> list[np.ndarray]:
        """The ranker's logit per candidate (the views combined), per list."""
        if self.bundle.shared_prefix:  # every situation to the ranker, one sequence per call per view
            encoder = self.bundle.pair_encoder()
            assert isinstance(encoder, ListEncoder)
            return score_lists(self.ranker, encoder, lists, views=self.bundle.views)
        statements = self.statements(lists)
        groups = [
            self.encoder.encode_request(x.context, s, [c.text for c in x.candidates])
            for x, s in zip(lists, statements, strict=True)
        ]
        encoder, ranker = self.encoder, self.ranker
        return score_grouped(lambda pairs: score(ranker, encoder, pairs, batch_size=self.batch_size), groups)


def pairs_won(x: RankingList, p: np.ndarray, generator: str) -> tuple[float, int]:
    """Pairs won by the list's best reply (its first top-graded one) against its ``generator`` ones.

    ``situation-flip``: the same request's replies for the opposite situation; ``contradicted``:
    those whose reason a statement of the list says the other way.
    """
    against = [s for s, c in zip(p, x.candidates, strict=True) if c.generator == generator]
    if not against:
        return 0.0, 0
    gains = [c.gain for c in x.candidates]
    best = float(p[gains.index(max(gains))])
    return sum((best > s) + 0.5 * (best == s) for s in against), len(against)


def evaluate(
    lists: Sequence[RankingList], probs: Sequence[np.ndarray], threshold: float
) -> dict[str, float | int | None]:
    """The metrics of one dataset."""
    p1, ndcg, mrr, r1_of_10, auc_adv, auc_rand = [], [], [], [], [], []
    flat_p, flat_y, grades = [], [], []
    agreeing, pairs = 0.0, 0
    flips_won, flips = 0.0, 0
    contradictions_won, contradictions = 0.0, 0
    for x, p in zip(lists, probs, strict=True):
        gains = [c.gain for c in x.candidates]
        appropriate = [c.appropriate for c in x.candidates]
        flat_p.extend(p.tolist())
        flat_y.extend(int(a) for a in appropriate)
        grades.append([int(a) for a in appropriate])
        if max(gains) > 0:
            p1.append(metrics.precision_at_1(p, gains))
            ndcg.append(metrics.ndcg_at_k(p, gains, 3))
            mrr.append(metrics.reciprocal_rank(p, gains))
        agree, n = metrics.ordered_pairs(p, gains)
        agreeing, pairs = agreeing + agree, pairs + n
        if len(x.candidates) == 10 and sum(appropriate) == 1:
            r1_of_10.append(float(appropriate[int(np.argmax(p))]))
        for kind, out in (("adversarial", auc_adv), ("random", auc_rand)):
            value = within_context_auc(
                p, appropriate, [c.generator == kind and not c.appropriate for c in x.candidates]
            )
            if value is not None:
                out.append(value)
        won, n = pairs_won(x, p, "situation-flip")
        flips_won, flips = flips_won + won, flips + n
        won, n = pairs_won(x, p, "contradicted")
        contradictions_won, contradictions = contradictions_won + won, contradictions + n

    def mean(values: list[float]) -> float | None:
        return round(float(np.mean(values)), 4) if values else None

    return {
        "lists": len(lists),
        "precision_at_1": mean(p1),
        "ndcg_at_3": mean(ndcg),
        "mrr": mean(mrr),
        "r1_of_10": mean(r1_of_10),
        "auc_adversarial": mean(auc_adv),
        "auc_random": mean(auc_rand),
        "pair_agreement": round(agreeing / pairs, 4) if pairs else None,
        "situation_flip": round(flips_won / flips, 4) if flips else None,
        "situation_flip_pairs": flips,
        "contradicted": round(contradictions_won / contradictions, 4) if contradictions else None,
        "contradicted_pairs": contradictions,
        "ece": round(metrics.expected_calibration_error(flat_p, flat_y), 4),
        "abstention_accuracy": round(
            metrics.abstention_accuracy([q.tolist() for q in probs], grades, threshold), 4
        ),
    }


COLUMNS = (
    "precision_at_1",
    "ndcg_at_3",
    "mrr",
    "r1_of_10",
    "auc_adversarial",
    "auc_random",
    "pair_agreement",
    "situation_flip",
    "contradicted",
    "ece",
    "abstention_accuracy",
)


def markdown(model: str, results: dict[str, dict]) -> str:
    """One table: a row per dataset."""
    head = (
        "| dataset | lists | P@1 | nDCG@3 | MRR | R@1 of 10 | AUC adv. | AUC random | pairs agreed |"
        " situation flip | contradicted | ECE | abstention acc. |"
    )
    rows = [f"Model `{model}`.", "", head, "|" + " --- |" * 13]
    for name, r in results.items():  # files written before a column existed show it empty
        cells = ["-" if r.get(c) is None else f"{r[c]:.3f}" for c in COLUMNS]
        rows.append(f"| {name} | {r['lists']} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


class Scorer(Protocol):
    """What scores lists for :func:`main`: a bundle's :class:`ListScorer`, or a training run's."""

    threshold: float

    def probabilities(self, lists: Sequence[RankingList]) -> list[np.ndarray]:
        """Calibrated P(appropriate) per candidate, per list."""
        ...


def main(
    argv: list[str] | None = None, *, run_scorer: Callable[[Path, float], Scorer] | None = None
) -> dict[str, dict]:
    """The CLI; ``run_scorer`` scores ``--run`` directories.

    The training package passes it in: evaluation imports nothing of training.
    """
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        type=Path,
        action="append",
        help="a model directory (bundle), scored as the service does; repeat it to compare models on the "
        "same lists (a table per model, then one side by side)",
    )
    source.add_argument(
        "--run", type=Path, help="a training run directory, scored in PyTorch before export (needs torch)"
    )
    parser.add_argument("--lists", action="append", required=True, help="NAME=FILE (repeatable)")
    parser.add_argument("--split", choices=["train", "dev", "test", "all"], default="test")
    parser.add_argument(
        "--max-lists", type=int, default=0, help="a seeded sample of this many lists per dataset"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--last-turn-weight",
        type=float,
        default=0.0,
        help="with --run: score multi-turn lists with the last-turn view too, as a bundle exported with "
        "this weight would (a bundle's own weight is in its metadata)",
    )
    add_backend_arguments(parser)
    parser.add_argument("--out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    if args.run and run_scorer is None:
        parser.error("--run needs the training package: run it as `ranker evaluate --run`")
    if args.run and not (args.run / "calibration.json").is_file():
        parser.error(f"--run: {args.run} is not a finished training run (no calibration.json)")
    chosen = {}  # every file is read before the model loads: a bad line fails at once
    for entry in args.lists:
        name, _, path = entry.partition("=")
        if not path:
            parser.error(f"--lists takes NAME=FILE, got {entry!r}")
        chosen[name] = held_out(read_lists(path), args.split, args.max_lists, args.seed)
    if args.out and args.model and len(args.model) > 1:
        parser.error("--out writes one model's results: give one --model")
    scored = {}
    for scorer, model_id, threshold in scorers(args, run_scorer):
        results = {name: evaluate(x, scorer.probabilities(x), threshold) for name, x in chosen.items()}
        print(json.dumps(results, indent=2))
        print(markdown(model_id, results))
        scored[model_id] = results
    if len(scored) > 1:
        print(side_by_side(scored))
    if args.out:
        args.out.write_text(
            json.dumps({"model": model_id, "split": args.split, "results": results}, indent=2)
        )
    return results


def scorers(
    args: argparse.Namespace, run_scorer: Callable[[Path, float], Scorer] | None
) -> Iterator[tuple[Scorer, str, float]]:
    """Each model's scorer, name and threshold, one at a time (a model's sessions go before the next)."""
    if args.run:
        assert run_scorer is not None
        scorer: Scorer = run_scorer(args.run, args.last_turn_weight)
        yield scorer, f"run {args.run}", scorer.threshold
        return
    for path in args.model:
        bundle = load_bundle(path).for_runtime(scoring_runtime(args))
        list_scorer = ListScorer(
            bundle, backend=args.backend, precision=args.precision, weights=args.openvino_weights
        )
        yield list_scorer, runtime_label(bundle, args), bundle.threshold


def side_by_side(scored: dict[str, dict[str, dict]]) -> str:
    """One row per dataset and metric, a column per model, and the last model's difference from the first."""
    models = list(scored)
    head = "| dataset | metric | " + " | ".join(f"`{m}`" for m in models) + " | last - first |"
    rows = [head, "|" + " --- |" * (len(models) + 3)]
    for name in scored[models[0]]:
        for column in COLUMNS:
            values = [scored[m][name].get(column) for m in models]
            if all(v is None for v in values):
                continue
            cells = ["-" if v is None else f"{v:.3f}" for v in values]
            first, last = values[0], values[-1]
            delta = "-" if first is None or last is None else f"{last - first:+.3f}"
            rows.append(f"| {name} | {column} | " + " | ".join(cells) + f" | {delta} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    exit_on_data_error(main)
