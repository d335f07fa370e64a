"""Per-domain evaluation on the generic format: its metrics and its split."""

from __future__ import annotations

import numpy as np
import pytest

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.evaluation.domains import evaluate, group_split, within_context_auc
from dialogue_ranker.evaluation.metrics import ordered_pairs
from dialogue_ranker.serving.tokenization import Turn


def ranking_list(*candidates: Candidate, group: str = "g") -> RankingList:
    return RankingList(context=(Turn("user", "hi"),), candidates=candidates, group=group)


def test_within_context_auc_counts_wins_and_half_ties() -> None:
    assert within_context_auc([0.9, 0.1, 0.5], [True, False, False], [False, True, True]) == 1.0
    assert within_context_auc([0.5, 0.5], [True, False], [False, True]) == 0.5
    assert within_context_auc([0.2, 0.9], [True, False], [False, False]) is None


def test_ordered_pairs_counts_only_pairs_whose_grades_differ() -> None:
    assert ordered_pairs([0.9, 0.5, 0.1], [2, 1, 0]) == (3.0, 3)
    assert ordered_pairs([0.1, 0.5, 0.9], [2, 1, 0]) == (0.0, 3)
    assert ordered_pairs([0.5, 0.5, 0.2], [1, 0, 0]) == (1.5, 2)  # a tie counts half
    assert ordered_pairs([0.3, 0.7], [1, 1]) == (0.0, 0)


def test_group_split_is_stable_and_about_15_15_70() -> None:
    parts = [group_split(f"dialogue-{i}") for i in range(4000)]
    assert parts == [group_split(f"dialogue-{i}") for i in range(4000)]
    shares = {p: parts.count(p) / len(parts) for p in ("train", "dev", "test")}
    assert shares["test"] == pytest.approx(0.15, abs=0.03) and shares["dev"] == pytest.approx(0.15, abs=0.03)


def test_the_metrics_of_one_dataset() -> None:
    ten = ranking_list(Candidate("true", 1, "human"), *(Candidate(f"neg {i}", 0, "random") for i in range(9)))
    graded = ranking_list(
        Candidate("best", 2),
        Candidate("ok", 1),
        Candidate("adv", 0, "adversarial"),
        Candidate("rand", 0, "random"),
    )
    probs = [np.array([0.9] + [0.1] * 9), np.array([0.4, 0.8, 0.6, 0.05])]
    result = evaluate([ten, graded], probs, threshold=0.5)
    assert result["lists"] == 2
    assert result["r1_of_10"] == 1.0  # the true turn is first of ten
    assert result["precision_at_1"] == 0.5  # "ok" outranks "best" in the graded list
    assert result["mrr"] == pytest.approx((1.0 + 1 / 3) / 2, abs=1e-4)  # "best" is third there
    assert result["auc_adversarial"] == 0.5  # of the two good ones only "ok" beats "adv"
    assert result["auc_random"] == 1.0
    # 9 of 9 pairs in the first list; in the graded one "best" loses to "ok" and "adv", and the two
    # grade-0 candidates make no pair: 3 of 5.
    assert result["pair_agreement"] == pytest.approx(12 / 14, abs=1e-4)
    assert 0.0 <= result["ece"] <= 1.0 and 0.0 <= result["abstention_accuracy"] <= 1.0


def test_the_situation_flip_metric_counts_the_best_reply_against_each_flipped_one() -> None:
    flipped = ranking_list(
        Candidate("best", 2),
        Candidate("ok", 1),
        Candidate("bad", 0),
        Candidate("their best", 0, "situation-flip"),
        Candidate("their other best", 0, "situation-flip"),
    )
    plain = ranking_list(Candidate("best", 2), Candidate("bad", 0))
    # "best" beats the first flipped reply, ties the second (half); "ok" outscoring both plays no part.
    result = evaluate([flipped, plain], [np.array([0.6, 0.9, 0.1, 0.5, 0.6]), np.array([0.9, 0.1])], 0.5)
    assert result["situation_flip"] == 0.75 and result["situation_flip_pairs"] == 2
    assert evaluate([plain], [np.array([0.9, 0.1])], 0.5)["situation_flip"] is None


def test_contradicted_replies_are_counted_apart_from_situation_flips() -> None:
    x = ranking_list(
        Candidate("best", 2),
        Candidate("bad", 0),
        Candidate("their best", 0, "situation-flip"),
        Candidate("a reason the statements deny", 0, "contradicted"),
    )
    result = evaluate([x], [np.array([0.6, 0.1, 0.5, 0.7])], 0.5)
    assert (result["situation_flip"], result["situation_flip_pairs"]) == (1.0, 1)
    assert (result["contradicted"], result["contradicted_pairs"]) == (0.0, 1)


def test_models_side_by_side_show_each_metric_and_the_difference() -> None:
    from dialogue_ranker.evaluation.domains import side_by_side

    old = {"sugar": {"precision_at_1": 0.75, "situation_flip": 0.7, "ece": None}}
    new = {"sugar": {"precision_at_1": 0.8, "situation_flip": 0.875, "ece": None}}
    table = side_by_side({"m 2.8.0": old, "m 2.9.0": new})
    assert "| sugar | precision_at_1 | 0.750 | 0.800 | +0.050 |" in table
    assert "| sugar | situation_flip | 0.700 | 0.875 | +0.175 |" in table
    assert "| ece |" not in table  # no model has it
