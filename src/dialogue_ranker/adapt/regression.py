"""The regression suite: what the base knew, scored on both bundles with paired bootstrap intervals.

A suite is ``ranker release-check``'s format (:mod:`dialogue_ranker.evaluation.release_suite`);
``data/adapt-regression-suite.toml`` is the default, small enough to score both bundles in a couple
of minutes on 2 cores. Its sets are scored by release-check's own machinery
(:func:`dialogue_ranker.evaluation.release_check.check`); a set whose file is absent is left out and
named (the recipe's data stage writes them). The guard holds when no ranking metric of any set drops
by more than :data:`dialogue_ranker.adapt.guard.MAX_DROP` (ECE and abstention are the calibration's,
read in the report but not the guard's). A set too small to tell such a drop from one item's change
(fewer than :data:`RESOLVING_ITEMS` items: one of the 52 hand-made requests is 0.019 on its own) is
held to its interval instead, as ``ranker release-check`` holds every set: worse beyond it breaks the
guard.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dialogue_ranker.adapt.guard import MAX_DROP
from dialogue_ranker.evaluation import release_suite as rs
from dialogue_ranker.evaluation.release_check import Row, check

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SUITE = REPO / "data" / "adapt-regression-suite.toml"
#: Metrics that are not the ranking (the calibration's): reported, not guarded.
NOT_RANKING = ("ece", "abstention_accuracy")
#: Items a row needs for its point difference to be held to :data:`MAX_DROP`: one item of 100 moves
#: a share by 0.01, half the limit. A smaller set's row is held to its interval.
RESOLVING_ITEMS = 100


def load_present(
    path: Path, root: Path, limit: int | None, fraction: float = 1.0
) -> tuple[rs.Suite, list[str]]:
    """The suite with its present sets, and the absent ones.

    ``limit``: at most that many lists each; ``fraction``: each set with a ``max_lists`` cut to that
    share of it (the budget's plan, :attr:`dialogue_ranker.adapt.budget.Plan.suite_fraction`).

    Raises:
        dialogue_ranker.evaluation.release_suite.SuiteError: the suite file cannot be read, or a
            present set's file is not the one the suite froze.
    """
    suite = rs.load_suite(path, root)
    present = [s for s in suite.sets if s.file.is_file()]
    absent = [f"{s.name} ({s.file})" for s in suite.sets if not s.file.is_file()]
    if fraction < 1:
        present = [
            dataclasses.replace(s, max_lists=max(1, round(s.max_lists * fraction))) if s.max_lists else s
            for s in present
        ]
    if limit:
        present = [dataclasses.replace(s, max_lists=min(s.max_lists or limit, limit)) for s in present]
    suite = dataclasses.replace(suite, sets=tuple(present))
    rs.check_files(suite)
    return suite, absent


def lists_files(path: Path, root: Path) -> list[Path]:
    """The files of the suite's ``lists`` sets (the replay's default candidates)."""
    return [s.file for s in rs.load_suite(path, root).sets if s.kind == "lists"]


def score(suite: rs.Suite, *, adapted: Path, base: Path, threads: int) -> list[Row]:
    """Every present set's rows: ``adapted`` as the candidate, ``base`` as the shipped bundle."""
    if not suite.sets:
        return []
    return list(check(suite, adapted, base, scorings=[rs.Scoring(threads=threads)]))


def is_ranking(row: Row) -> bool:
    """Whether the row's metric is a ranking one (the guard's)."""
    return row.metric.name not in NOT_RANKING


def resolves(row: Row) -> bool:
    """Whether the row has the items to be held to :data:`MAX_DROP` (else to its interval)."""
    return row.interval.items >= RESOLVING_ITEMS


def breaks(row: Row) -> bool:
    """Whether the row breaks the guard (never a calibration row).

    A ranking metric breaks it when it dropped by more than :data:`MAX_DROP` on a set that resolves
    such a drop, or is worse beyond its interval on one that does not.
    """
    if not is_ranking(row):
        return False
    return row.interval.difference < -MAX_DROP if resolves(row) else row.failed


def broken(rows: list[Row]) -> list[str]:
    """The rows that break the guard, as ``set / metric (-0.031)``.

    A small set's also names its items and ``beyond its interval``.
    """
    return [
        f"{r.set} / {r.metric.name} ({r.interval.difference:+.3f}"
        + ("" if resolves(r) else f", {r.interval.items} items, beyond its interval")
        + ")"
        for r in rows
        if breaks(r)
    ]
