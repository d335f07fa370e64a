r"""``ranker release-check``: a candidate bundle against the shipped one on a frozen suite, every set gated.

    ranker release-check --candidate runs/my-model/bundle --shipped models/dialogue-minilm-l6 \
        [--suite data/release-suite.toml] [--out-md runs/my-model/release-check.md]

Both bundles are scored on the same sets (:mod:`dialogue_ranker.evaluation.release_suite`): each
domain's test lists (ranking metrics, the situation flip, ECE, abstention), the hand-made requests
and the dev bank. For every set and metric the table gives both values, the difference and its
paired bootstrap interval (:mod:`dialogue_ranker.evaluation.bootstrap`: the same items resampled
together for both models, the suite's seed, ``resamples`` draws, default 1,000; 95%).

The release is refused (exit status 1) when any row is worse beyond its interval: the whole
interval of the difference on the worse side of zero (for ECE, lower is better), or, where no
interval is drawn (fewer than the suite's ``min_items``, 10, items count toward the metric), worse
by more than its ``margin`` (0.01). One better number
cannot hide a worse one: every row is gated on its own, and the failing rows are named. Exit
status 0: released; 2: a bad suite, a missing or changed set file, or a bad option.

``--out-md`` writes the table as markdown, for the model's changelog. ``--backend onnx,openvino``
(``--precision``) scores both bundles on each runtime named, each with its own map for it, and
gates every row on each: the runtimes do an int8 graph's arithmetic differently (ONNX Runtime's
int8 products, which saturate without VNNI; OpenVINO f32 on dequantized weights).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dialogue_ranker.data.machine import read_cpu
from dialogue_ranker.data.ranking_data import DataError
from dialogue_ranker.evaluation import release_suite as rs
from dialogue_ranker.evaluation.bootstrap import Interval, Metric, paired_interval, ratio, ratio_rows
from dialogue_ranker.evaluation.handmade import load_cases, rank_cases
from dialogue_ranker.evaluation.scoring import add_backend_arguments
from dialogue_ranker.serving.model_bundle import find_retriever

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SUITE = REPO / "data" / "release-suite.toml"


@dataclass(frozen=True)
class Row:
    """One set's metric: both models' values, the interval of the difference, and the verdict."""

    set: str
    metric: Metric
    interval: Interval
    failed: bool

    @property
    def verdict(self) -> str:
        """``worse`` (refuses the release), ``better`` (beyond the interval the other way), or ``same``."""
        if self.failed:
            return "**worse**"
        gain = self.interval.difference if self.metric.higher_is_better else -self.interval.difference
        low, high = self.interval.low, self.interval.high
        beyond = (low > 0) if self.metric.higher_is_better else (high < 0)
        return "better" if gain > 0 and beyond else "same"


def is_worse(metric: Metric, interval: Interval, margin: float) -> bool:
    """The gate: worse beyond the interval (all of it on the worse side of 0).

    Where there is no interval (NaN: no resample held an item the metric counts): worse by more
    than ``margin``.
    """
    if math.isnan(interval.low) or math.isnan(interval.high):
        if math.isnan(interval.candidate) or math.isnan(interval.shipped):
            return False  # the items give the metric nothing to count: nothing to compare
        loss = interval.shipped - interval.candidate
        return (loss if metric.higher_is_better else -loss) > margin
    return interval.high < 0 if metric.higher_is_better else interval.low > 0


def gate(set_name: str, metric: Metric, shipped: np.ndarray, candidate: np.ndarray, suite: rs.Suite) -> Row:
    """One row: the paired interval of ``metric`` on both models' rows, and whether it refuses.

    Fewer than the suite's ``min_items`` items counting toward the metric get no interval (a
    bootstrap of a handful says little): the margin decides.
    """
    counted = int(((shipped != 0) | (candidate != 0)).any(axis=1).sum())
    if counted < suite.min_items:
        value = paired_interval(metric, shipped, candidate, resamples=1, seed=suite.seed)
        interval = dataclasses.replace(value, low=math.nan, high=math.nan)
    else:
        interval = paired_interval(
            metric,
            shipped,
            candidate,
            resamples=suite.resamples,
            seed=suite.seed,
            confidence=suite.confidence,
        )
    return Row(set_name, metric, interval, is_worse(metric, interval, suite.margin))


def set_rows(
    s: rs.SuiteSet, bundle_dir: Path, *, scoring: rs.Scoring, cache_dir: Path
) -> dict[str, tuple[Metric, np.ndarray]]:
    """One bundle's rows on one set, per metric (``cache_dir``: the check's own, for bank vectors)."""
    if s.kind == "handmade":
        cases = load_cases(s.file)
        openvino = {"precision": scoring.precision, "weights": scoring.openvino_weights}
        answers = rank_cases(bundle_dir, cases, backend=scoring.backend, openvino=openvino)
        hits = [float(answers[c.name]["top"] == c.picked_id) for c in cases]
        return {"ranked as a person would": (ratio("ranked as a person would"), ratio_rows(hits))}
    if s.kind == "bank":
        from dialogue_ranker.evaluation.release_bank import bank_rows  # loads retrievers: only when asked

        return bank_rows(s, bundle_dir, scoring=scoring, cache_dir=cache_dir)
    lists = rs.read_set(s)
    rows = rs.score_lists(scoring.bundle(bundle_dir), lists, scoring)
    metrics = rs.list_metrics()
    return {name: (metrics[name], rows[name]) for name in (s.metrics or rs.supported(rows))}


def check_bundles(suite: rs.Suite, bundles: dict[str, Path]) -> None:
    """Refuse at once a bundle that lacks what a set needs (a bank set: a retriever), not after scoring."""
    banks = [s.name for s in suite.sets if s.kind == "bank"]
    if not banks:
        return
    for flag, bundle in bundles.items():
        if find_retriever(bundle) is None:
            raise DataError(
                f"{flag} {bundle} has no retriever (retriever/retriever.json), which the suite's bank "
                f"set(s) {', '.join(banks)} rank with: copy or fit one into the bundle"
            )


def check(
    suite: rs.Suite, candidate: Path, shipped: Path, *, scorings: Sequence[rs.Scoring]
) -> Iterator[Row]:
    """Every set's rows, set by set (both bundles scored on a set before the next), on each runtime.

    With more than one runtime a row's set is named with its runtime (``sugar (openvino f32)``):
    each runtime does an int8 graph's arithmetic its own way, and a candidate must hold on every one.
    """
    # A fresh cache per check: the release compares what each bundle computes now, nothing kept.
    with tempfile.TemporaryDirectory(prefix="release-check-") as cache:
        for s in suite.sets:
            started = time.perf_counter()
            for scoring in scorings:
                kept = Path(cache) / runtime_tag(scoring)  # a runtime's own bank logits
                ours = set_rows(s, candidate, scoring=scoring, cache_dir=kept)
                theirs = set_rows(s, shipped, scoring=scoring, cache_dir=kept)
                label = s.name if len(scorings) == 1 else f"{s.name} ({runtime_tag(scoring)})"
                for name, (metric, rows) in ours.items():
                    if name in theirs:
                        yield gate(label, metric, theirs[name][1], rows, suite)
            print(f"{s.name}: scored in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def markdown(rows: list[Row], suite: rs.Suite) -> str:
    """The table: a row per set and metric, the failing ones marked."""
    level = f"{suite.confidence:.0%}"
    lines = [
        f"| set | metric | items | shipped | candidate | difference | {level} interval | verdict |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        i = r.interval
        span = "-" if math.isnan(i.low) else f"[{i.low:+.3f}, {i.high:+.3f}]"
        name = r.metric.name + ("" if r.metric.higher_is_better else " (lower is better)")
        lines.append(
            f"| {r.set} | {name} | {i.items} | {i.shipped:.3f} | {i.candidate:.3f} | {i.difference:+.3f} "
            f"| {span} | {r.verdict} |"
        )
    return "\n".join(lines) + "\n"


def runtime_tag(scoring: rs.Scoring) -> str:
    """``onnx`` or ``openvino f32``: a runtime as a row's set names it."""
    return scoring.runtime.replace("-", " ")


def runtime_name(scorings: Sequence[rs.Scoring]) -> str:
    """How the report names the runtimes both bundles were scored with."""
    spelled = {"onnx": "ONNX Runtime", "openvino": "OpenVINO"}
    names = [spelled[sc.backend] + runtime_tag(sc).removeprefix(sc.backend) for sc in scorings]
    maps = "" if names == ["ONNX Runtime"] else " (each bundle with its own map for each)"
    return " and ".join(names) + maps


def report(
    rows: list[Row],
    suite: rs.Suite,
    candidate: str,
    shipped: str,
    seconds: float,
    runtime: str = "ONNX Runtime",
) -> str:
    """The markdown for the changelog: what was compared, how, the table, and the decision."""
    failed = [f"{r.set} / {r.metric.name}" for r in rows if r.failed]
    decision = (
        f"**Refused**: worse beyond the interval on {len(failed)} row(s): {', '.join(failed)}."
        if failed
        else "**Passed**: no set is worse beyond its interval."
    )
    return (
        f"Release check of `{candidate}` against `{shipped}` on `{suite.path.name}` "
        f"({len(suite.sets)} sets): paired bootstrap, {suite.resamples} resamples, seed {suite.seed}, "
        f"{suite.confidence:.0%} intervals of candidate - shipped; where none is drawn (under "
        f"{suite.min_items} items), worse by more than {suite.margin:g} refuses. Scored by {runtime}; "
        f"{seconds:.0f} s on {read_cpu().model}.\n\n" + markdown(rows, suite) + "\n" + decision + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    """The CLI: returns 0 when the release passes; exits 1 when refused, 2 for a bad suite or set file."""
    try:
        return _main(argv)
    except DataError as e:  # the suite's file, set and field, not a traceback
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidate", type=Path, required=True, help="the bundle to release")
    p.add_argument("--shipped", type=Path, required=True, help="the bundle it would replace")
    p.add_argument("--suite", type=Path, default=DEFAULT_SUITE, help="the frozen suite (TOML)")
    p.add_argument("--root", type=Path, default=REPO, help="where the suite's relative paths start")
    p.add_argument("--out-md", type=Path, help="also write the table and the decision as markdown here")
    p.add_argument("--threads", type=int, default=2, help="the runtime's threads")
    add_backend_arguments(p, several=True)
    args = p.parse_args(argv)
    for flag, path in (("--candidate", args.candidate), ("--shipped", args.shipped)):
        if not path.is_dir():
            p.error(f"{flag} {path}: not a bundle directory")
    suite = rs.load_suite(args.suite, args.root)
    rs.check_files(suite)  # before any model loads: a missing set fails at once
    check_bundles(suite, {"--candidate": args.candidate, "--shipped": args.shipped})
    started = time.perf_counter()
    scorings = [rs.Scoring(b, args.precision, args.openvino_weights, args.threads) for b in args.backend]
    rows = list(check(suite, args.candidate, args.shipped, scorings=scorings))
    seconds = time.perf_counter() - started
    text = report(rows, suite, str(args.candidate), str(args.shipped), seconds, runtime_name(scorings))
    print(text)
    if args.out_md:
        args.out_md.write_text(text)
    if any(r.failed for r in rows):
        raise SystemExit(1)
    return 0


if __name__ == "__main__":
    main()
