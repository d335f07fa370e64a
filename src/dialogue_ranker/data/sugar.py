"""SUGAR (situated proactive response selection) examples, splits and input settings.

Otani et al., "A Textual Dataset for Situated Proactive Response Selection", ACL 2023,
CC BY-SA 4.0. Each example is one ranking request: a user request ``u``, 12 situational
statements (some relevant, marked by ``s.gold.sents.indices``), and three candidate responses
rated 0 (bad), 1 (acceptable) or 2 (best).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.serving.tokenization import Turn

ATTRIBUTION = (
    "SUGAR: Otani et al., 'A Textual Dataset for Situated Proactive Response Selection', "
    "ACL 2023, data release v4.1.1, CC BY-SA 4.0 (derived in part from ConceptNet 5, "
    "CC BY-SA 4.0, and ATOMIC, CC BY 4.0)."
)
#: Input settings of the paper, plus the distractor-robustness ones built from ``s.expanded``.
SETTINGS = ("u", "u+S1", "u+S")
DISTRACTOR_COUNTS = (5, 10, 15)
SPLITS = ("train", "dev", "test")
#: How SUGAR examples are grouped for the train/dev/test split (:func:`sugar_group`).
GROUPINGS = ("example", "request")


@dataclass(frozen=True)
class SugarExample:
    """One SUGAR example as a ranking request with graded labels."""

    index: int
    request: str
    statements: tuple[str, ...]
    gold: tuple[int, ...]
    candidates: tuple[str, ...]
    labels: tuple[int, ...]
    expanded: tuple[str, ...]
    expanded_gold: tuple[int, ...]
    expanded_distractors: dict[int, tuple[int, ...]]
    #: ``yes`` when the situation lets the assistant do what is asked, ``no`` when it calls for
    #: declining (every candidate of an example shares its example's polarity).
    polarity: str = "yes"

    @property
    def turns(self) -> list[Turn]:
        """The context: the user's request as one turn."""
        return [Turn("user", self.request)]

    @property
    def best_reply(self) -> str:
        """The first of the candidates rated highest."""
        return self.candidates[self.labels.index(max(self.labels))]

    @property
    def has_bad(self) -> bool:
        """Whether a candidate is rated bad (the paper's test examples all have one)."""
        return 0 in self.labels

    def statements_for(self, setting: str) -> list[str]:
        """The statements given as input in a setting: ``u``, ``u+S1``, ``u+S`` or ``d5``/``d10``/``d15``.

        ``u+S1`` is the gold statements only; ``dN`` is the gold statements plus N distractors
        from the expanded list, in the dataset's order.
        """
        if setting == "u":
            return []
        if setting == "u+S1":
            return [self.statements[i] for i in sorted(self.gold)]
        if setting == "u+S":
            return list(self.statements)
        if setting.startswith("d") and int(setting[1:]) in self.expanded_distractors:
            keep = set(self.expanded_gold) | set(self.expanded_distractors[int(setting[1:])])
            return [s for i, s in enumerate(self.expanded) if i in keep]
        raise ValueError(f"unknown input setting {setting!r}")

    def gold_flags(self, setting: str) -> list[int]:
        """1 for each statement of ``statements_for(setting)`` that is relevant (gold), else 0."""
        gold = {self.statements[i] for i in self.gold} | {self.expanded[i] for i in self.expanded_gold}
        return [int(s in gold) for s in self.statements_for(setting)]


def _parse(row: dict) -> SugarExample:
    candidates = [row["r"]] + [d["r"] for d in row["r.distractors"]]
    labels = [int(row["r.label"])] + [int(d["r.label"]) for d in row["r.distractors"]]
    return SugarExample(
        index=int(row["index"]),
        request=row["u"],
        statements=tuple(row["s.sents"]),
        gold=tuple(int(i) for i in row["s.gold.sents.indices"]),
        candidates=tuple(candidates),
        labels=tuple(labels),
        expanded=tuple(row.get("s.expanded.sents", ())),
        expanded_gold=tuple(int(i) for i in row.get("s.expanded.gold.sents.indices", ())),
        polarity=str(row.get("polarity", "yes")),
        expanded_distractors={
            n: tuple(int(i) for i in row[f"s.expanded.dist.sents.indices.{n}"])
            for n in DISTRACTOR_COUNTS
            if f"s.expanded.dist.sents.indices.{n}" in row
        },
    )


def load_sugar(path: str | Path) -> list[SugarExample]:
    """Read a SUGAR JSONL file."""
    with open(path, encoding="utf-8") as f:
        return [_parse(json.loads(line)) for line in f if line.strip()]


def split_indices(
    examples: Sequence[SugarExample], *, seed: int, dev_fraction: float = 0.15, test_fraction: float = 0.15
) -> dict[str, list[int]]:
    """A seeded train/dev/test split of example ids (stable for a given seed and file)."""
    ids = sorted(e.index for e in examples)
    random.Random(seed).shuffle(ids)
    n_test = round(len(ids) * test_fraction)
    n_dev = round(len(ids) * dev_fraction)
    return {
        "test": sorted(ids[:n_test]),
        "dev": sorted(ids[n_test : n_test + n_dev]),
        "train": sorted(ids[n_test + n_dev :]),
    }


def sugar_group(example: SugarExample, group_by: str = "example") -> str:
    """The split group of an example: itself (models up to 2.8.0) or its request text.

    By request, every example of a request falls on one side of the split, so dev and test hold
    requests the model has not trained on (the ``[xxx]`` slots are kept as they are).
    """
    if group_by == "example":
        return f"sugar-{example.index}"
    if group_by == "request":
        return f"sugar-request: {example.request}"
    raise ValueError(f"group_by must be one of {', '.join(GROUPINGS)}, not {group_by!r}")


def select(examples: Sequence[SugarExample], ids: Sequence[int]) -> list[SugarExample]:
    """The examples whose index is in ``ids``, in file order."""
    wanted = set(ids)
    return [e for e in examples if e.index in wanted]
