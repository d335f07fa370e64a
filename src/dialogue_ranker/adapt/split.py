"""The team's lists split by group (dialogue) into train, dev and test, as ``ranker train`` splits them.

The split is :func:`dialogue_ranker.evaluation.domains.group_split` (a stable SHA-1 hash of the
``group``: 70% train, 15% dev, 15% test), the one every command of the project uses: ``ranker
train`` reads the same train and dev parts from the team's file, ``ranker evaluate --split test``
the same test part, and no dialogue is ever cut between two parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dialogue_ranker.data.ranking_data import DataError, RankingList, groups
from dialogue_ranker.evaluation.domains import DEV_SHARE, TEST_SHARE, group_split

#: Groups each part needs: train something, choose the epoch and fit the map on dev, compare on test.
MIN_GROUPS = {"train": 4, "dev": 2, "test": 2}
PARTS = ("train", "dev", "test")
RULE = (
    f"stable SHA-1 hash of the group: {1 - DEV_SHARE - TEST_SHARE:.0%} train, {DEV_SHARE:.0%} dev, "
    f"{TEST_SHARE:.0%} test"
)


@dataclass(frozen=True)
class TeamSplit:
    """The team's lists by part."""

    train: list[RankingList]
    dev: list[RankingList]
    test: list[RankingList]

    def part(self, name: str) -> list[RankingList]:
        """The lists of ``train``, ``dev`` or ``test``."""
        return {"train": self.train, "dev": self.dev, "test": self.test}[name]

    def counts(self) -> dict[str, dict[str, int]]:
        """Lists and groups per part (what the report and the lineage state)."""
        return {p: {"lists": len(self.part(p)), "groups": len(groups(self.part(p)))} for p in PARTS}


def split_team(lists: Sequence[RankingList]) -> TeamSplit:
    """The lists by part of the group split.

    Raises:
        DataError: a part has fewer groups than :data:`MIN_GROUPS` asks (the message gives the counts).
    """
    parts: dict[str, list[RankingList]] = {p: [] for p in PARTS}
    for x in lists:
        parts[group_split(x.group)].append(x)
    split = TeamSplit(**parts)
    counts = split.counts()
    if any(counts[p]["groups"] < MIN_GROUPS[p] for p in PARTS):
        have = ", ".join(f"{counts[p]['groups']} {p}" for p in PARTS)
        need = ", ".join(f"{n} {p}" for p, n in MIN_GROUPS.items())
        raise DataError(
            f"the team's lists come from {len(groups(lists))} groups (dialogues): {have} by the group "
            f"hash; ranker adapt needs at least {need} groups (to train, to choose the epoch and fit the "
            "calibration, to compare the bundles). Label lists from more dialogues (the `group` field "
            "names the dialogue), or fit the calibration alone with `ranker calibrate`, which needs none"
        )
    return split
