"""The context views' weights chosen on a team's own dev lists (``ranker export --fit-views-on``).

A bundle's views (:mod:`dialogue_ranker.serving.context_views`) were chosen for the shipped model's
data: 2.10.0's prior weight of 0.2 is there for DailyDialog++'s adversarial replies. A team's
lists may want others. On adapt run 17's bundle (persona chat; 300 of the team's test lists,
AMD EPYC Zen 5), its test P@1 was 0.530 at the base's 0.5 / 0.2 and 0.543 at 0.5 / 0: the prior
that helps against adversarial replies hides which reply fits a persona
(docs/research/2026-12-02-adapt-views-on-the-team.md).

Each dev list is scored once per view, with every view the grid may use; each grid point then only
recombines those logits (no graph run), so the fit costs one scoring of the dev lists. The point
with the best mean P@1 over the named files' dev lists wins (then nDCG@3); a tie keeps the weights
given (the base's), then the cheaper point (fewer views served).

Held files (``--views-hold``: an adapt run's replay files) keep what the given weights rank: a point
that lowers one of their dev P@1 by more than :data:`MAX_HOLD_DROP` against the given weights is
not chosen. Adapt run 35 (persona chat) chose the last turn alone (team dev P@1 0.592 against 0.547
at 0.25 / 0) and broke the forgetting guard on Topical-Chat (test R@1 -0.037 from the base; -0.006
at 0.25 / 0): docs/research/2026-12-06-attention-dropout.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.serving.context_views import ViewWeights, combine

#: The last-turn weights tried (with the one given); the prior's are 0 and the one given.
LAST_TURN_GRID = (0.0, 0.25, 0.5, 1.0)
#: The most a held file's dev P@1 may fall against the given weights (the adapt guard's drop).
MAX_HOLD_DROP = 0.02


def grid(given: ViewWeights) -> list[ViewWeights]:
    """The weights tried: every last-turn weight with no prior and with the given prior."""
    priors = sorted({0.0, given.prior})
    last_turns = sorted({*LAST_TURN_GRID, given.last_turn})
    return [dataclasses.replace(given, last_turn=lt, prior=p) for p in priors for lt in last_turns]


def scoring_weights(given: ViewWeights) -> ViewWeights:
    """Weights that make every view the grid needs be scored (their values are not used)."""
    return dataclasses.replace(given, last_turn=max(given.last_turn, 1.0))


def served(views: Sequence[np.ndarray], weights: ViewWeights) -> np.ndarray:
    """A list's logits under ``weights`` from its views' logits (every turn, last turn, prior).

    Views beyond what ``weights`` serve are dropped: a point with no prior reads two views, one
    with neither extra view reads the first.
    """
    if len(views) == 1 or not weights.adds_views:
        return views[0]
    used = list(views[:3] if weights.prior > 0 else views[:2])
    return combine(np.concatenate(used), len(used), weights)


def cost(weights: ViewWeights) -> int:
    """Views a multi-turn request is scored with under ``weights``."""
    return 1 + int(weights.adds_views) + int(weights.prior > 0)


def score_point(
    lists: Sequence[RankingList], logits: Sequence[Sequence[np.ndarray]], weights: ViewWeights
) -> dict[str, float]:
    """Mean P@1 and nDCG@3 of ``lists`` under ``weights``."""
    p1, ndcg = [], []
    for x, views in zip(lists, logits, strict=True):
        scores = served(views, weights).tolist()
        labels = [int(c.appropriate) for c in x.candidates]
        p1.append(metrics.precision_at_1(scores, labels))
        ndcg.append(metrics.ndcg_at_k(scores, [c.gain for c in x.candidates], 3))
    return {"precision_at_1": float(np.mean(p1)), "ndcg_at_3": float(np.mean(ndcg))}


def fit(
    names: Sequence[str],
    dev: dict[str, list[RankingList]],
    per_view: dict[str, list[list[np.ndarray]]],
    given: ViewWeights,
    hold: Sequence[str] = (),
    max_drop: float = MAX_HOLD_DROP,
) -> tuple[ViewWeights, dict]:
    """The grid point with the best P@1 on the dev lists of ``names``, and the table that chose it.

    ``per_view``: each dev list's logits view by view, scored with :func:`scoring_weights`.
    ``hold``: files whose dev P@1 may fall by at most ``max_drop`` against ``given``'s; a point
    that lowers one further is left out (the given point always stays in).
    The chosen weights keep ``given``'s prior centre (re-fitted by the caller when the prior stays).
    """
    lists = [x for n in names for x in dev[n]]
    logits = [v for n in names for v in per_view[n]]
    points = grid(given)
    rows = [{"last_turn_weight": p.last_turn, "prior_weight": p.prior} for p in points]
    rows = [row | score_point(lists, logits, p) for row, p in zip(rows, points, strict=True)]
    held = [held_p1(hold, dev, per_view, p) for p in points]
    # The grid holds the given point (grid() varies it), so its P@1 is read there, not scored again.
    floor = {n: p1 - max_drop for n, p1 in held[points.index(given)].items()}
    for row, p1 in zip(rows, held, strict=True):
        row["held"] = all(p1[n] >= floor[n] - 1e-9 for n in hold)  # the given point always holds

    def rank(i: int) -> tuple:
        keeps = points[i].last_turn == given.last_turn and points[i].prior == given.prior
        return (rows[i]["held"], rows[i]["precision_at_1"], rows[i]["ndcg_at_3"], keeps, -cost(points[i]))

    chosen = points[max(range(len(rows)), key=rank)]
    table = {
        "on": list(names),
        "lists": len(lists),
        "given": {"last_turn_weight": given.last_turn, "prior_weight": given.prior},
        "chosen": {"last_turn_weight": chosen.last_turn, "prior_weight": chosen.prior},
        "grid": [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
            | {f"{n} precision_at_1": round(p1[n], 4) for n in hold}
            for row, p1 in zip(rows, held, strict=True)
        ],
    }
    if hold:
        table["hold"] = {"files": list(hold), "max_drop": max_drop}
    return chosen, table


def held_p1(
    hold: Sequence[str],
    dev: dict[str, list[RankingList]],
    per_view: dict[str, list[list[np.ndarray]]],
    weights: ViewWeights,
) -> dict[str, float]:
    """Each held file's dev P@1 under ``weights``."""
    return {n: score_point(dev[n], per_view[n], weights)["precision_at_1"] for n in hold}
