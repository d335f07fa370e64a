"""The benchmark report's outputs: one markdown file (table and notes) and one PNG plot."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Point:
    """One measured system at one concurrency level."""

    system: str
    concurrency: int
    pairs_per_s: float
    #: Every request's latency in seconds (NaN-free; a level with no successful request has none).
    latencies_s: tuple[float, ...]
    #: Requests that got no scores (an HTTP error such as 429 or 504); not in pairs/s or latencies.
    failed: int = 0

    def latency_ms(self, percentile: float) -> float:
        """A request-latency percentile in ms (NaN when no request succeeded)."""
        if not self.latencies_s:
            return float("nan")
        return float(np.percentile(np.asarray(self.latencies_s) * 1000, percentile))


@dataclass(frozen=True)
class Section:
    """A titled block of markdown lines under the table."""

    title: str
    lines: Sequence[str]


def _systems(points: Sequence[Point]) -> list[str]:
    return list(dict.fromkeys(p.system for p in points))


def markdown_table(points: Sequence[Point], *, limit_pairs_per_s: float | None) -> str:
    """One row per point, systems in first-seen order; each system's best pairs/s in bold."""
    best = {s: max(p.pairs_per_s for p in points if p.system == s) for s in _systems(points)}
    lines = [
        "| system | concurrency | pairs/s | p50 ms | p95 ms | p99 ms | failed | share of FP32 limit |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in sorted(points, key=lambda p: (_systems(points).index(p.system), p.concurrency)):
        rate = f"{p.pairs_per_s:.1f}"
        if p.pairs_per_s == best[p.system] and len([q for q in points if q.system == p.system]) > 1:
            rate = f"**{rate}**"
        share = f"{p.pairs_per_s / limit_pairs_per_s:.0%}" if limit_pairs_per_s else "n/a"
        cells = [rate, *(f"{p.latency_ms(q):.1f}" for q in (50, 95, 99)), str(p.failed), share]
        lines.append(f"| {p.system} | {p.concurrency} | {' | '.join(cells)} |")
    return "\n".join(lines)


def write_plot(points: Sequence[Point], path: Path, *, limit_pairs_per_s: float | None) -> None:
    """Throughput and p95 latency against concurrency, one line per system."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a benchmark host
    import matplotlib.pyplot as plt

    fig, (rate_ax, p95_ax) = plt.subplots(1, 2, figsize=(12, 4.8))
    levels = sorted({p.concurrency for p in points})
    for system in _systems(points):
        mine = sorted((p for p in points if p.system == system), key=lambda p: p.concurrency)
        xs = [p.concurrency for p in mine]
        rate_ax.plot(xs, [p.pairs_per_s for p in mine], marker="o", label=system)
        p95_ax.plot(xs, [p.latency_ms(95) for p in mine], marker="o", label=system)
    if limit_pairs_per_s:
        rate_ax.axhline(limit_pairs_per_s, color="grey", linestyle="--", label="FP32 limit")
    for ax, ylabel in ((rate_ax, "pairs/s"), (p95_ax, "request p95 latency (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("concurrency (see the report for each system's meaning)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    rate_ax.set_ylim(bottom=0)
    rate_ax.set_title("throughput")
    # Latencies span orders of magnitude between 1 and 64 clients.
    p95_ax.set_yscale("log")
    p95_ax.set_title("p95 request latency")
    rate_ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(
    markdown_path: Path,
    plot_path: Path,
    *,
    title: str,
    points: Sequence[Point],
    limit_pairs_per_s: float | None,
    sections: Sequence[Section],
) -> None:
    """Write the markdown report (table, the plot's link, then the sections) and the plot.

    Raises:
        ValueError: no points to report.
    """
    if not points:
        raise ValueError("nothing was measured")
    write_plot(points, plot_path, limit_pairs_per_s=limit_pairs_per_s)
    # A relative link, so the report renders wherever the results folder is moved together.
    link = Path(os.path.relpath(plot_path.resolve(), markdown_path.resolve().parent)).as_posix()
    parts = [f"# {title}", "", markdown_table(points, limit_pairs_per_s=limit_pairs_per_s), ""]
    parts += [f"![throughput and p95 latency vs concurrency]({link})", ""]
    for section in sections:
        parts += [f"## {section.title}", "", *section.lines, ""]
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text("\n".join(parts))
