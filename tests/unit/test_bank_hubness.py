"""A bank response's hubness: its mean cosine with its nearest other responses, centred on the bank."""

from __future__ import annotations

import numpy as np
import pytest

from dialogue_ranker.serving.banks.hubness import hubness
from dialogue_ranker.serving.banks.index import QuantizedVectors


def unit(rows: np.ndarray) -> QuantizedVectors:
    rows = np.asarray(rows, dtype=np.float32)
    return QuantizedVectors.from_float(rows / np.linalg.norm(rows, axis=1, keepdims=True))


GENERIC = 40


def clustered(n: int, seed: int = 0) -> QuantizedVectors:
    """A generic reply said ``GENERIC`` ways (rows 0 to 39, close together), then replies of their own."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, 32))
    rows[:GENERIC] = rows[0] + 0.2 * rng.standard_normal((GENERIC, 32))
    return unit(rows)


def test_the_generic_reply_said_many_ways_is_a_hub_and_the_values_are_centred() -> None:
    values = hubness(clustered(400), neighbours=10)
    assert values.dtype == np.float32 and values.shape == (400,)
    assert values[:GENERIC].min() > values[GENERIC:].max()
    assert abs(float(values.mean())) < 1e-6


def test_a_response_is_not_its_own_neighbour() -> None:
    # Rows 0 and 1 are the same text's vector, row 2 is orthogonal to both, row 3 halfway.
    vectors = unit(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    values = hubness(vectors, neighbours=1)
    nearest = np.array([1.0, 1.0, np.sqrt(0.5), np.sqrt(0.5)])  # each one's nearest *other* row
    np.testing.assert_allclose(values, nearest - nearest.mean(), atol=0.02)


def test_a_bank_no_larger_than_the_neighbours_has_no_hubs() -> None:
    five = unit(np.random.default_rng(0).standard_normal((5, 8)))
    np.testing.assert_array_equal(hubness(five, neighbours=5), np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError, match="neighbours 0 is not >= 1"):
        hubness(five, neighbours=0)


def test_a_sampled_reference_keeps_the_order_of_hubs_and_is_the_same_each_time() -> None:
    vectors = clustered(3000)
    full = hubness(vectors, neighbours=10)
    sampled = hubness(vectors, neighbours=10, reference_rows=1000)
    np.testing.assert_array_equal(sampled, hubness(vectors, neighbours=10, reference_rows=1000))
    assert np.corrcoef(full, sampled)[0, 1] > 0.9 and int(np.argmax(sampled)) < GENERIC
