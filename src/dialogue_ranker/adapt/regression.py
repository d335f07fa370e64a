"""The regression suite: what the base knew, scored on both bundles with paired bootstrap intervals.

A suite is ``ranker release-check``'s format (:mod:`dialogue_ranker.evaluation.release_suite`);
``data/adapt-regression-suite.toml`` is the default, small enough to score both bundles in a couple
of minutes on 2 cores. Its sets are scored by release-check's own machinery
(:func:`dialogue_ranker.evaluation.release_check.check`); a set whose file is absent is left out and
named (the recipe's data stage writes them). The guard holds when no ranking metric of any set drops
by more than :data:`dialogue_ranker.adapt.guard.MAX_DROP` (ECE and abstention are the calibration's,
read in the report but not the guard's).
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


def load_present(path: Path, root: Path, limit: int | None) -> tuple[rs.Suite, list[str]]:
    """The suite with its present sets (``limit``: at most that many lists each), and the absent ones.

    Raises:
        dialogue_ranker.evaluation.release_suite.SuiteError: the suite file cannot be read, or a
            present set's file is not the one the suite froze.
    """
    suite = rs.load_suite(path, root)
    present = [s for s in suite.sets if s.file.is_file()]
    absent = [f"{s.name} ({s.file})" for s in suite.sets if not s.file.is_file()]
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
    return list(check(suite, adapted, base, threads=threads))


def is_ranking(row: Row) -> bool:
    """Whether the row's metric is a ranking one (the guard's)."""
    return row.metric.name not in NOT_RANKING


def broken(rows: list[Row]) -> list[str]:
    """The ranking rows that dropped by more than :data:`MAX_DROP`, as ``set / metric (-0.031)``."""
    return [
        f"{r.set} / {r.metric.name} ({r.interval.difference:+.3f})"
        for r in rows
        if is_ranking(r) and r.interval.difference < -MAX_DROP
    ]
