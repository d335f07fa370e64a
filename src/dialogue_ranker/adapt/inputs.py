"""The team's lists: ranking-data files, or a directory of the service's request logs and feedback.

:func:`team_lists` is the one place ``ranker adapt`` reads ``--lists``. A JSONL file is read by
:func:`dialogue_ranker.data.ranking_data.read_lists`; a directory by
:func:`dialogue_ranker.data.feedback_logs.read_lists_or_logs`, which joins the service's request
logs with their feedback labels. What was read is recorded for the bundle's lineage: each path's
name, SHA-256 (a directory's over its files, in name order), lists and groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.data.feedback_logs import lists_digest, read_lists_or_logs
from dialogue_ranker.data.ranking_data import DataError, RankingList, groups


@dataclass(frozen=True)
class Source:
    """One ``--lists`` path as read: its name, digest, and how many lists and groups it gave."""

    path: Path
    sha256: str
    lists: int
    groups: int

    def to_dict(self) -> dict[str, str | int]:
        """The lineage entry (the name, not the path: a path says where it was on one machine)."""
        return {"file": self.path.name, "sha256": self.sha256, "lists": self.lists, "groups": self.groups}


def lists_at(path: Path) -> list[RankingList]:
    """The lists of one ``--lists`` path (a file, or a directory of logs and feedback).

    Raises:
        DataError: a bad file or line, or logs without texts (the message says which).
    """
    lists = read_lists_or_logs(path)
    if path.is_dir() and not lists:
        raise DataError(f"--lists {path}: the logs and feedback there give no labelled list")
    return lists


def team_lists(paths: Sequence[Path]) -> tuple[list[RankingList], list[Source]]:
    """Every list of every ``--lists`` path, in order, and what each path gave.

    Raises:
        DataError: as :func:`lists_at`, or the same path given twice.
    """
    resolved = [p.resolve() for p in paths]
    if len(set(resolved)) < len(resolved):
        raise DataError("--lists: the same path is given twice (its lists would count double)")
    lists: list[RankingList] = []
    sources = []
    for path in paths:
        found = lists_at(path)
        lists += found
        sources.append(Source(path, lists_digest(path), len(found), len(groups(found))))
    return lists, sources
