"""The project's written situated requests (``data/written_situations/``) as ranking lists.

SUGAR's replies come in its authors' two forms ("Sure, ..." accepts, "Sorry, but ... Shall I
...?" declines), so a ranker trained on them learns the form as much as the situation: a
declining reply in that form outranks a plain "Done, ..." even where nothing blocks the request
(``docs/research/2026-11-27-contradicted-reasons.md``). Each written scenario is one request under
two situations, one that blocks it and one that does not, with plainly worded replies of both
kinds; each situation gives one list in which its kind of reply is right (label 1) and the other
kind wrong (label 0), so only the statements tell them apart.

Each list's statements are its situation's, shuffled in among ``DISTRACTORS`` statements of other
scenarios (SUGAR's lists hold distractors too; ``relevant_situations`` marks the scenario's own),
and one other scenario's statement is added as a wrong reply (on some situation, not an answer).
Seeded: the same file gives the same lists. The group is the scenario's name, so a scenario's two
lists are on one side of the split.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.serving.tokenization import Turn

#: Other scenarios' statements shuffled into each list's situations.
DISTRACTORS = 4
GROUP_PREFIX = "written-situation: "


@dataclass(frozen=True)
class Scenario:
    """One written request, the statements that block it and those that do not, and replies of each kind."""

    name: str
    request: str
    blocked: tuple[str, ...]
    clear: tuple[str, ...]
    accept: tuple[str, ...]
    decline: tuple[str, ...]


def read_scenarios(path: Path) -> list[Scenario]:
    """The file's ``[[scenario]]`` tables.

    Raises:
        ValueError: a scenario lacks a field, has an empty one, or repeats another's name.
    """
    with path.open("rb") as f:
        tables = tomllib.load(f).get("scenario", [])
    scenarios, names = [], set()
    for i, table in enumerate(tables):
        where = f"{path}: scenario {i + 1} ({table.get('name', 'unnamed')})"
        texts = {}
        for field in ("blocked", "clear", "accept", "decline"):
            values = table.get(field)
            texts_only = isinstance(values, list) and all(isinstance(v, str) and v for v in values)
            if not values or not texts_only:
                raise ValueError(f"{where}: {field} must be a non-empty list of texts")
            texts[field] = tuple(values)
        name, request = table.get("name"), table.get("request")
        if not isinstance(name, str) or not name or not isinstance(request, str) or not request:
            raise ValueError(f"{where}: name and request must be non-empty texts")
        if name in names:
            raise ValueError(f"{where}: the name {name!r} is taken by an earlier scenario")
        names.add(name)
        scenarios.append(Scenario(name, request, **texts))
    if not scenarios:
        raise ValueError(f"{path}: no [[scenario]] tables")
    return scenarios


def convert_written_situations(path: Path, *, seed: int = 0) -> Iterator[RankingList]:
    """Two lists per scenario (blocked: a declining reply is right; clear: an accepting one)."""
    scenarios = read_scenarios(path)
    rng = random.Random(seed)
    for scenario in scenarios:
        own = set(scenario.blocked) | set(scenario.clear)
        # Unique, so a statement two scenarios share is not twice as likely to be drawn.
        others = list(
            dict.fromkeys(
                s for x in scenarios if x is not scenario for s in (*x.blocked, *x.clear) if s not in own
            )
        )
        if len(others) < DISTRACTORS + 1:
            raise ValueError(
                f"{path}: {scenario.name}: {len(others)} other scenarios' statements, "
                f"{DISTRACTORS + 1} needed (distractors and a wrong reply)"
            )
        for statements, right, wrong in (
            (scenario.blocked, scenario.decline, scenario.accept),
            (scenario.clear, scenario.accept, scenario.decline),
        ):
            drawn = rng.sample(others, DISTRACTORS + 1)
            situations = [*statements, *drawn[:DISTRACTORS]]
            rng.shuffle(situations)
            relevant = tuple(sorted(situations.index(s) for s in statements))
            candidates = [
                *(Candidate(t, 1, "written") for t in right),
                *(Candidate(t, 0, "written-opposite") for t in wrong),
                Candidate(drawn[DISTRACTORS], 0, "statement"),
            ]
            yield RankingList(
                (Turn("user", scenario.request),),
                tuple(candidates),
                GROUP_PREFIX + scenario.name,
                tuple(situations),
                relevant,
            )
