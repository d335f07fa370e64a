r"""P@1 with and without statements, per domain: whether a bundle's statements help or hurt.

    ranker statement-effect --model models/dialogue-minilm-l6 \
        --lists persona-chat=runs/data/persona-chat.jsonl --lists taskmaster=runs/data/taskmaster.jsonl \
        --split dev --max-lists 300

For each ``--lists`` file (a domain), the lists of ``--split`` that have statements are scored twice
by the bundle (as ``ranker evaluate`` scores them, selector first): as they are, and with their
statements dropped. Candidates that only the statements make wrong (``contradicted``,
``situation-flip``, ... : :data:`.converters.statement_variants.STATEMENT_KINDS`) are left out of
both, and lists that mark relevant statements are skipped, so the two scorings rank the same
question and a model whose statements never hurt scores at least as well with them. Per domain:
the lists, P@1 with and without, their difference, and the share of lists whose top candidate
changed. ``--out`` writes the JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error, read_lists
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.domains import ListScorer, Scorer, held_out
from dialogue_ranker.evaluation.scoring import add_backend_arguments, scoring_runtime
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.training.converters.statement_variants import dropped


def paired_lists(lists: Sequence[RankingList]) -> tuple[list[RankingList], list[RankingList]]:
    """The lists with statements that do not decide them, and the same lists without statements.

    Both keep the same candidates: the statement-only negatives are left out of each. Lists with
    one candidate or none appropriate are left out (P@1 says nothing about them).
    """
    pairs = [
        (x, d)
        for x in lists
        if x.situations
        for d in [dropped(x)]
        if d is not None and len(d.candidates) > 1 and any(c.appropriate for c in d.candidates)
    ]
    return [dataclasses.replace(x, candidates=d.candidates) for x, d in pairs], [d for _, d in pairs]


def statement_effect(scorer: Scorer, lists: Sequence[RankingList]) -> dict[str, float | int | None]:
    """P@1 with and without statements on the same lists and candidates, and how often the top one moved."""
    with_statements, without = paired_lists(lists)
    if not with_statements:
        return {
            "lists": 0,
            "p_at_1_with": None,
            "p_at_1_without": None,
            "difference": None,
            "top_changed": None,
        }
    p_with = scorer.probabilities(with_statements)
    p_without = scorer.probabilities(without)
    hits_with, hits_without, changed = [], [], 0
    for x, a, b in zip(with_statements, p_with, p_without, strict=True):
        gains = [c.gain for c in x.candidates]
        hits_with.append(metrics.precision_at_1(a, gains))
        hits_without.append(metrics.precision_at_1(b, gains))
        changed += int(np.argmax(a) != np.argmax(b))
    with_mean, without_mean = float(np.mean(hits_with)), float(np.mean(hits_without))
    return {
        "lists": len(with_statements),
        "p_at_1_with": round(with_mean, 4),
        "p_at_1_without": round(without_mean, 4),
        "difference": round(with_mean - without_mean, 4),
        "top_changed": round(changed / len(with_statements), 4),
    }


def markdown(model: str, results: dict[str, dict]) -> str:
    """One table: a row per domain."""
    rows = [
        f"Statements on and off, `{model}`:",
        "",
        "| domain | lists | P@1 with | P@1 without | with - without | top changed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results.items():
        cells = (r["lists"], r["p_at_1_with"], r["p_at_1_without"], r["difference"], r["top_changed"])
        rows.append(f"| {name} | " + " | ".join("-" if v is None else str(v) for v in cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True, help="a model directory (bundle)")
    parser.add_argument(
        "--lists", action="append", required=True, help="NAME=FILE (repeatable): one domain each"
    )
    parser.add_argument("--split", choices=["train", "dev", "test", "all"], default="dev")
    parser.add_argument(
        "--max-lists", type=int, default=0, help="a seeded sample of this many lists per domain"
    )
    parser.add_argument("--seed", type=int, default=0)
    add_backend_arguments(parser)
    parser.add_argument("--out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    chosen = {}
    for entry in args.lists:
        name, _, path = entry.partition("=")
        if not path:
            parser.error(f"--lists takes NAME=FILE, got {entry!r}")
        with_statements = [x for x in read_lists(path) if x.situations]
        chosen[name] = held_out(with_statements, args.split, args.max_lists, args.seed)
    bundle = load_bundle(args.model).for_runtime(scoring_runtime(args))
    scorer = ListScorer(bundle, backend=args.backend, precision=args.precision, weights=args.openvino_weights)
    results = {name: statement_effect(scorer, lists) for name, lists in chosen.items()}
    print(json.dumps(results, indent=2))
    print(markdown(str(args.model), results))
    if args.out:
        args.out.write_text(
            json.dumps({"model": str(args.model), "split": args.split, "results": results}, indent=2)
        )
    return results


if __name__ == "__main__":
    exit_on_data_error(main)
