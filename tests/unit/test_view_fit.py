"""Context views chosen on a team's dev lists: the grid, the views each point reads, the choice."""

from __future__ import annotations

import numpy as np

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.export import view_fit
from dialogue_ranker.serving.context_views import ViewWeights, combine
from dialogue_ranker.serving.tokenization import Turn

BASE = ViewWeights(last_turn=0.5, prior=0.2, prior_centre=-2.6)
TURNS = (Turn("user", "I have two dogs."), Turn("bot", "Nice!"), Turn("user", "What do you do?"))


def a_list(right: int, candidates: int = 3) -> RankingList:
    labels = [int(i == right) for i in range(candidates)]
    return RankingList(TURNS, tuple(Candidate(f"reply {i}", y) for i, y in enumerate(labels)), group="g")


def test_the_grid_tries_each_last_turn_weight_with_and_without_the_given_prior() -> None:
    points = view_fit.grid(BASE)
    assert {(p.last_turn, p.prior) for p in points} == {
        (lt, p) for lt in (0.0, 0.25, 0.5, 1.0) for p in (0.0, 0.2)
    }
    assert all(p.prior_centre == BASE.prior_centre for p in points)
    # A base with no prior is given no prior to try; an odd weight of its own is tried too.
    own = view_fit.grid(ViewWeights(last_turn=0.7))
    assert {p.prior for p in own} == {0.0} and 0.7 in {p.last_turn for p in own}


def test_each_point_reads_only_the_views_it_serves() -> None:
    full, last, prior = np.array([1.0, 0.0]), np.array([0.0, 2.0]), np.array([-3.0, -1.0])
    views = [full, last, prior]
    assert view_fit.served(views, ViewWeights()) is full
    no_prior = ViewWeights(last_turn=0.5)
    np.testing.assert_allclose(
        view_fit.served(views, no_prior), combine(np.concatenate([full, last]), 2, no_prior)
    )
    np.testing.assert_allclose(view_fit.served(views, BASE), combine(np.concatenate(views), 3, BASE))
    # A one-turn list has one view whatever the weights.
    assert view_fit.served([full], BASE) is full
    assert [view_fit.cost(w) for w in (ViewWeights(), no_prior, BASE)] == [1, 2, 3]


def test_the_point_with_the_best_dev_p1_is_chosen_and_its_table_recorded() -> None:
    # The full context ranks a wrong reply first; the last turn alone ranks the right one first,
    # by enough that only a last-turn weight of 1 lifts it; the prior pulls back toward wrong.
    lists = [a_list(right=1) for _ in range(4)]
    per_view = [[np.array([1.0, 0.0, -1.0]), np.array([0.0, 1.5, -1.0]), np.array([0.0, -2.0, 0.0])]] * 4
    chosen, table = view_fit.fit(["team"], {"team": lists}, {"team": per_view}, BASE)
    assert (chosen.last_turn, chosen.prior) == (1.0, 0.0)
    assert chosen.prior_centre == BASE.prior_centre
    assert table["on"] == ["team"] and table["lists"] == 4
    assert table["given"] == {"last_turn_weight": 0.5, "prior_weight": 0.2}
    assert table["chosen"] == {"last_turn_weight": 1.0, "prior_weight": 0.0}
    by_point = {(r["last_turn_weight"], r["prior_weight"]): r["precision_at_1"] for r in table["grid"]}
    assert by_point[(1.0, 0.0)] == 1.0 and by_point[(0.5, 0.2)] == 0.0 and len(by_point) == 8


def test_a_tie_keeps_the_given_weights() -> None:
    # Every view ranks alike: every point ties, and the base's own weights stay.
    lists = [a_list(right=0) for _ in range(3)]
    views = [np.array([2.0, 0.0, -1.0])] * 3
    chosen, _ = view_fit.fit(["team"], {"team": lists}, {"team": [views] * 3}, BASE)
    assert (chosen.last_turn, chosen.prior) == (BASE.last_turn, BASE.prior)


def test_the_fit_reads_only_the_files_named() -> None:
    # The team's list wants the last turn at weight 1; the other file's wants the full context alone
    # (its last turn points at a wrong reply), and at equal P@1 the cheaper point: no prior.
    team, other = [a_list(right=1)], [a_list(right=0)]
    per_view = {
        "team": [[np.array([1.0, 0.0, -1.0]), np.array([0.0, 1.5, -1.0]), np.array([0.0, -2.0, 0.0])]],
        "other": [[np.array([1.0, 0.9, 0.0]), np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 0.0])]],
    }
    dev = {"team": team, "other": other}
    chosen, table = view_fit.fit(["team"], dev, per_view, BASE)
    assert (chosen.last_turn, chosen.prior, table["lists"]) == (1.0, 0.0, 1)
    chosen, table = view_fit.fit(["other"], dev, per_view, BASE)
    assert (chosen.last_turn, chosen.prior, table["lists"]) == (0.0, 0.0, 1)


def test_a_point_that_lowers_a_held_file_beyond_the_drop_is_not_chosen() -> None:
    # The team wants the last turn alone (weight 1); at that point the held file's lists, which the
    # full context ranks right and the last turn wrong, fall from P@1 1.0 to 0.0 against the given
    # weights: the best point that keeps them is chosen instead, and the table says which held.
    team = [a_list(right=1)]
    team_views = [np.array([1.0, 0.0, -1.0]), np.array([0.0, 1.5, -1.0]), np.array([0.0, -2.0, 0.0])]
    held = [a_list(right=0) for _ in range(4)]
    held_views = [np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.5, 0.0]), np.array([0.0, 0.0, 0.0])]
    dev = {"team": team, "replay": held}
    per_view = {"team": [team_views], "replay": [held_views] * 4}
    chosen, table = view_fit.fit(["team"], dev, per_view, BASE)
    assert (chosen.last_turn, chosen.prior) == (1.0, 0.0)  # unheld: the team's best
    chosen, table = view_fit.fit(["team"], dev, per_view, BASE, hold=["replay"])
    assert chosen.last_turn < 1.0
    by_point = {(r["last_turn_weight"], r["prior_weight"]): r for r in table["grid"]}
    assert by_point[(1.0, 0.0)]["held"] is False and by_point[(1.0, 0.0)]["replay precision_at_1"] == 0.0
    assert by_point[(0.5, 0.2)]["held"] is True and by_point[(0.5, 0.2)]["replay precision_at_1"] == 1.0
    assert table["hold"] == {"files": ["replay"], "max_drop": view_fit.MAX_HOLD_DROP}
    # A drop within the allowance is no bar: allowing the whole of P@1, the team's best wins again.
    chosen, _ = view_fit.fit(["team"], dev, per_view, BASE, hold=["replay"], max_drop=1.0)
    assert (chosen.last_turn, chosen.prior) == (1.0, 0.0)
