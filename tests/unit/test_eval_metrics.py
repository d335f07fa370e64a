"""Evaluation metrics against values computed by hand."""

import math

import pytest

from dialogue_ranker.evaluation import metrics


def test_precision_at_1_hits_when_top_candidate_has_best_rating():
    assert metrics.precision_at_1([0.1, 0.9, 0.5], [0, 2, 1]) == 1.0
    assert metrics.precision_at_1([0.9, 0.1, 0.5], [0, 2, 1]) == 0.0


def test_precision_at_1_counts_ties_for_best_rating():
    assert metrics.precision_at_1([0.2, 0.7, 0.1], [2, 2, 0]) == 1.0


def test_ndcg_at_3_uses_ratings_as_gains():
    # Ranked ratings 0, 1, 2: DCG = 0 + 1/log2(3) + 2/log2(4); ideal 2, 1, 0: 2 + 1/log2(3).
    expected = (1 / math.log2(3) + 1.0) / (2.0 + 1 / math.log2(3))
    assert metrics.ndcg_at_k([0.9, 0.1, 0.5], [0, 2, 1], 3) == pytest.approx(expected)
    assert metrics.ndcg_at_k([0.1, 0.9, 0.5], [0, 2, 1], 3) == pytest.approx(1.0)


def test_reciprocal_rank_of_first_best_rated_candidate():
    assert metrics.reciprocal_rank([0.9, 0.1, 0.5], [0, 2, 1]) == pytest.approx(1 / 3)
    assert metrics.reciprocal_rank([0.9, 0.1, 0.5], [1, 2, 2]) == pytest.approx(1 / 2)


def test_expected_calibration_error_over_equal_width_bins():
    # One item in each of four bins: |0.1-0|, |0.2-1|, |0.8-1|, |0.9-1|, averaged.
    assert metrics.expected_calibration_error([0.1, 0.2, 0.8, 0.9], [0, 1, 1, 1]) == pytest.approx(0.3)
    assert metrics.expected_calibration_error([0.25, 0.25, 0.25, 0.25], [1, 0, 0, 0]) == pytest.approx(0.0)


def test_abstention_accuracy_scores_full_and_bad_only_sets():
    probs = [[0.9, 0.2, 0.1], [0.4, 0.6, 0.3], [0.9, 0.8, 0.7]]
    labels = [[2, 0, 0], [2, 0, 1], [1, 1, 2]]  # the third has no bad candidate: not counted
    # Example 1: full set keeps (0.9), bad-only abstains (0.2): 2/2. Example 2: full keeps (0.6),
    # bad-only does not abstain (0.6 >= 0.5): 1/2.
    assert metrics.abstention_accuracy(probs, labels, 0.5) == pytest.approx(0.75)


def test_best_abstention_threshold_lies_in_the_optimal_interval():
    probs = [[0.9, 0.2, 0.1], [0.4, 0.6, 0.3]]
    labels = [[2, 0, 0], [2, 0, 1]]
    threshold, accuracy = metrics.best_abstention_threshold(probs, labels)
    assert accuracy == pytest.approx(0.75)
    assert 0.2 < threshold <= 0.6
