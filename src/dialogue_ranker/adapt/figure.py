"""``report.png``: every compared metric's change, adapted minus base, with its interval.

Two panels, the team's test lists and the regression suite; a row per set and metric, its point the
change and its bar the paired bootstrap interval. The sign is turned so that right is better for
every metric (ECE falls when it improves), and the regression panel marks the guard's limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a training host
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"worse": "#c0392b", "better": "#27ae60", "same": "#555555"}


def improvement(row: dict[str, Any], value: float | None) -> float | None:
    """``value`` (a difference or a bound) with its sign turned so that a positive one is better."""
    if value is None:
        return None
    return value if row["higher_is_better"] else -value


def panel(ax, rows: list[dict[str, Any]], title: str, max_drop: float | None) -> None:
    """One panel: a row per metric, the change and its interval."""
    labels = [f"{r['set']} / {r['metric']}" for r in rows]
    for y, row in enumerate(rows):
        change = improvement(row, row["difference"])
        low, high = improvement(row, row["low"]), improvement(row, row["high"])
        colour = COLOURS.get(row["verdict"], COLOURS["same"])
        if low is not None and high is not None:
            ax.plot([min(low, high), max(low, high)], [y, y], color=colour, linewidth=2)
        ax.plot([change], [y], "o", color=colour)
    ax.axvline(0.0, color="black", linewidth=0.8)
    if max_drop is not None:
        ax.axvline(-max_drop, color="#c0392b", linestyle="--", linewidth=0.8, label=f"guard: -{max_drop:g}")
        ax.legend(loc="best", fontsize=8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("adapted - base (right is better; ECE's sign turned)", fontsize=8)


def draw(comparison: dict[str, Any], path: Path, *, base: str, adapted: str) -> Path:
    """Write the figure to ``path``."""
    team, suite = comparison["team"], comparison["regression"]
    heights = [max(1, len(team)), max(1, len(suite))]
    fig, axes = plt.subplots(
        2, 1, figsize=(8, 1.5 + 0.3 * sum(heights)), gridspec_kw={"height_ratios": heights}, squeeze=False
    )
    level = f"{comparison['suite']['confidence']:.0%}"
    panel(axes[0][0], team, f"Team test lists ({level} paired bootstrap intervals)", None)
    panel(axes[1][0], suite, "Regression suite: what the base knew", comparison["guard"]["max_drop"])
    if not suite:
        axes[1][0].text(
            0.5, 0.5, "no set of the suite is present", ha="center", transform=axes[1][0].transAxes
        )
    fig.suptitle(f"{adapted} against {base}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
