from __future__ import annotations

import numpy as np

from dialogue_ranker.serving.selection import choose_statements


def test_statements_over_the_threshold_are_kept_most_relevant_first() -> None:
    assert choose_statements(np.array([0.2, 0.9, 0.6, 0.7]), threshold=0.5, min_keep=1) == [1, 3, 2]


def test_at_least_min_keep_statements_are_kept() -> None:
    assert choose_statements(np.array([0.1, 0.3, 0.2]), threshold=0.5, min_keep=2) == [1, 2]


def test_min_keep_never_exceeds_the_statements_given() -> None:
    assert choose_statements(np.array([0.1]), threshold=0.5, min_keep=3) == [0]
