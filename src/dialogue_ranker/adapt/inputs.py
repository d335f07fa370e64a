"""The team's lists: ranking-data files, or a directory of the service's request logs and feedback.

:func:`team_lists` is the one place ``ranker adapt`` reads ``--lists``. A JSONL file is read by
:func:`dialogue_ranker.data.ranking_data.read_lists`; a directory by
``dialogue_ranker.data.feedback_logs.read_lists_or_logs``, which joins the service's request logs
with their feedback labels (issue 59's logging half, added beside this command: until it is merged,
a directory is refused by name). What was read is recorded for the bundle's lineage: each path's
name, SHA-256 (a directory's over its files, in name order), lists and groups.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.data.ranking_data import DataError, RankingList, groups, read_lists

#: The module that reads a directory of request logs and feedback as ranking lists.
FEEDBACK_LOGS = "dialogue_ranker.data.feedback_logs"


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
        DataError: a bad file or line, or a directory while the logs reader is not in this checkout.
    """
    if not path.is_dir():
        return read_lists(path)
    try:
        from dialogue_ranker.data.feedback_logs import read_lists_or_logs  # type: ignore[import-not-found]
    except ImportError as e:
        if e.name != FEEDBACK_LOGS:
            raise
        raise DataError(
            f"--lists {path}: a directory of request logs and feedback is read by {FEEDBACK_LOGS}, "
            "which this checkout does not have yet; give ranking-data JSONL files instead"
        ) from None
    lists = list(read_lists_or_logs(path))
    if not lists:
        raise DataError(f"--lists {path}: the logs and feedback there give no labelled list")
    return lists


def digest(path: Path) -> str:
    """SHA-256 of a file, or of a directory's files (each one's relative name and bytes, in name order)."""
    sha = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            sha.update(str(file.relative_to(path)).encode("utf-8") + b"\0")
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()


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
        sources.append(Source(path, digest(path), len(found), len(groups(found))))
    return lists, sources
