"""The evaluation phase: the base and adapted bundles on the team's test lists and the regression suite.

Both bundles score the same lists as the service does (ONNX Runtime, every view, each bundle's own
map and threshold), and every metric gets the paired bootstrap interval of adapted minus base
(:mod:`dialogue_ranker.evaluation.bootstrap`, drawn by ``ranker release-check``'s
:func:`~dialogue_ranker.evaluation.release_check.gate` with the suite's resamples, seed and level).
The rows go to ``comparison.json``, which the report is written from.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dialogue_ranker.adapt import budget, regression
from dialogue_ranker.adapt.layout import Layout
from dialogue_ranker.data.ranking_data import RankingList, read_lists, write_lists
from dialogue_ranker.evaluation import release_suite as rs
from dialogue_ranker.evaluation.domains import held_out
from dialogue_ranker.evaluation.release_check import Row, gate
from dialogue_ranker.serving.model_bundle import load_bundle

TEAM_SET = "team test"
#: The team's metrics: ranking (P@1, MRR, R@1 of 10 where lists have ten candidates and one right),
#: then calibration (ECE, abstention accuracy at each bundle's threshold).
TEAM_METRICS = ("precision_at_1", "mrr", "r1_of_10", "ndcg_at_3", "ece", "abstention_accuracy")


def team_rows(
    lists: list[RankingList], *, adapted: Path, base: Path, suite: rs.Suite, threads: int
) -> list[Row]:
    """Both bundles' rows on the team's test lists, a row per metric the lists support."""
    scoring = rs.Scoring(threads=threads)
    ours = rs.score_lists(load_bundle(adapted), lists, scoring)
    theirs = rs.score_lists(load_bundle(base), lists, scoring)
    metrics = rs.list_metrics()
    supported = set(rs.supported(ours))
    return [gate(TEAM_SET, metrics[m], theirs[m], ours[m], suite) for m in TEAM_METRICS if m in supported]


def row_dict(row: Row) -> dict[str, Any]:
    """A row as ``comparison.json`` keeps it (NaN bounds, where no interval is drawn, as null)."""
    i = row.interval
    return {
        "set": row.set,
        "metric": row.metric.name,
        "higher_is_better": row.metric.higher_is_better,
        "items": i.items,
        "base": i.shipped,
        "adapted": i.candidate,
        "difference": i.difference,
        "low": None if math.isnan(i.low) else i.low,
        "high": None if math.isnan(i.high) else i.high,
        "verdict": row.verdict.strip("*"),
        "ranking": regression.is_ranking(row),
        "breaks_guard": regression.breaks(row),
    }


def team_test_lists(
    args: argparse.Namespace, layout: Layout, prepared: dict[str, Any], seconds: float
) -> list[RankingList]:
    """The team's test sample: the plan's, or a larger one where the time left fits more.

    The plan sized it before training; a run that ends early leaves time the plan could not count
    on. A smoke run (``--limit``) keeps the plan's. A larger sample is drawn as the plan's was (the
    same seed, from the test part, whose size prepare recorded) and written over
    ``layout.team_test``, so that the file is what was scored; the team's lists are read again only
    then.
    """
    planned = read_lists(layout.team_test)
    if args.limit:
        return planned
    count = budget.test_lists_that_fit(
        seconds,
        seconds_per_list=prepared["plan"]["seconds_per_list"],
        planned=len(planned),
        available=prepared["split"]["counts"]["test"]["lists"],
    )
    if count <= len(planned):
        return planned
    grown = held_out(read_lists(layout.team), "test", count, args.seed)
    write_lists(layout.team_test, grown)
    print(f"evaluate: the time left fits {count} team test lists (the plan's: {len(planned)})", flush=True)
    return grown


def run_comparison(
    args: argparse.Namespace,
    layout: Layout,
    base: Path,
    prepared: dict[str, Any],
    seconds_left: Callable[[], float],
) -> dict[str, Any]:
    """Score both bundles, write ``comparison.json``; returns the guard's verdict and the suite's settings.

    The suite first, then the team's test lists, as many as the budget left fits (``seconds_left``:
    the budget's clock; ``prepared``: prepare's facts).
    """
    fraction = prepared["plan"].get("suite_fraction", 1.0)
    suite, absent = regression.load_present(args.regression_suite, args.suite_root, args.limit, fraction)
    print(f"evaluate: regression suite {suite.path.name}, {len(suite.sets)} sets", flush=True)
    suite_rows = regression.score(suite, adapted=layout.bundle, base=base, threads=args.threads)
    test = team_test_lists(args, layout, prepared, seconds_left())
    print(f"evaluate: {len(test)} team test lists, both bundles", flush=True)
    team = team_rows(test, adapted=layout.bundle, base=base, suite=suite, threads=args.threads)
    broken = regression.broken(suite_rows)
    guarded = any(regression.is_ranking(r) for r in suite_rows)
    comparison = {
        "suite": {
            "file": str(suite.path),
            "sets": [s.name for s in suite.sets],
            "absent": absent,
            "resamples": suite.resamples,
            "seed": suite.seed,
            "confidence": suite.confidence,
            "min_items": suite.min_items,
            "fraction": fraction,
        },
        "team": [row_dict(r) for r in team],
        "regression": [row_dict(r) for r in suite_rows],
        # held: None when no ranking metric of the suite could be scored (every set absent).
        "guard": {
            "max_drop": regression.MAX_DROP,
            "resolving_items": regression.RESOLVING_ITEMS,
            "broken": broken,
            "held": (not broken) if guarded else None,
        },
    }
    layout.comparison.write_text(json.dumps(comparison, indent=2) + "\n")
    return {"team_lists": len(test), "guard": comparison["guard"]}
