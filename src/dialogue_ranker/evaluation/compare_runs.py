"""Dev metrics of several ``training.train`` runs side by side, grouped by design, with their spread.

    ranker compare runs/design/shared-prefix-s13 runs/design/shared-prefix-s14 \
        runs/design/pair-s13 runs/design/pair-s14

A design is the run's layout (``encoding.kind`` in its ``config.json``) and token head (``head``);
its seeds are averaged.
Per dev file it prints each seed's P@1 and nDCG@3 (the kept epoch, from ``metrics.json``), their
mean, and the standard error of P@1 on that many dev lists (binomial, ``sqrt(p(1-p)/n)``), then
each design's mean against the first design's: a difference within one standard error is not a
difference these dev sets can show.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

#: The metrics compared, as ``metrics.json`` names them.
METRICS = ("precision_at_1", "ndcg_at_3")


def design_of(run: Path) -> str:
    """The run's layout (``shared-prefix``, ``pair-design-run``...), and its head when not linear.

    Runs made before ``--head`` existed have no ``head`` in their config: they are linear.
    """
    config = json.loads((run / "config.json").read_text())
    head = config.get("head", "linear")
    return str(config["encoding"]["kind"]) + ("" if head == "linear" else f", {head} head")


def dev_metrics(run: Path) -> dict[str, dict]:
    """Per dev file: the kept epoch's metrics."""
    return json.loads((run / "metrics.json").read_text())["dev"]


def standard_error(p: float, n: int) -> float:
    """Binomial standard error of a proportion ``p`` over ``n`` lists."""
    return math.sqrt(p * (1.0 - p) / n) if n else float("nan")


def table(runs: list[Path]) -> list[str]:
    """Markdown rows: one per design and dev file, then the differences to the first design."""
    by_design: dict[str, list[dict[str, dict]]] = defaultdict(list)
    for run in runs:
        by_design[design_of(run)].append(dev_metrics(run))
    files = sorted({name for results in by_design.values() for r in results for name in r})
    lines = [
        "| design | dev file | seeds | P@1 per seed | P@1 mean | SE of P@1 | nDCG@3 per seed | nDCG@3 mean |",
        "| --- | --- | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    means: dict[tuple[str, str], dict[str, float]] = {}
    for design, results in by_design.items():
        for name in files:
            rows = [r[name] for r in results if name in r]
            if not rows:
                continue
            mean = {m: sum(r[m] for r in rows) / len(rows) for m in METRICS}
            means[design, name] = {**mean, "se": standard_error(mean["precision_at_1"], rows[0]["lists"])}
            per_seed = {m: ", ".join(f"{r[m]:.3f}" for r in rows) for m in METRICS}
            lines.append(
                f"| {design} | {name} ({rows[0]['lists']} lists) | {len(rows)} "
                f"| {per_seed['precision_at_1']} | {mean['precision_at_1']:.3f} "
                f"| {means[design, name]['se']:.3f} | {per_seed['ndcg_at_3']} | {mean['ndcg_at_3']:.3f} |"
            )
    first = next(iter(by_design))
    for design in list(by_design)[1:]:
        for name in files:
            if (first, name) not in means or (design, name) not in means:
                continue
            a, b = means[first, name], means[design, name]
            gap = a["precision_at_1"] - b["precision_at_1"]
            lines.append(
                f"- {name}: {first} minus {design}: P@1 {gap:+.3f} ({gap / b['se']:+.1f} standard errors), "
                f"nDCG@3 {a['ndcg_at_3'] - b['ndcg_at_3']:+.3f}."
            )
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run directories of training.train")
    runs = parser.parse_args(argv).runs
    unfinished = [str(r) for r in runs if not all((r / f).exists() for f in ("config.json", "metrics.json"))]
    if unfinished:
        parser.error(f"not a finished training run (no config.json or metrics.json): {', '.join(unfinished)}")
    lines = table(runs)
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
