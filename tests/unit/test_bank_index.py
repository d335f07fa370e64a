"""Exact search over int8 rows: the nearest rows, best first, as a float reference finds them."""

from __future__ import annotations

import numpy as np

from dialogue_ranker.serving.banks.index import BLOCK_ROWS, ExactIndex, QuantizedVectors


def unit_rows(count: int, dim: int = 48, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_int8_rows_keep_each_vector_within_rounding() -> None:
    vectors = unit_rows(500, dim=384)
    quantized = QuantizedVectors.from_float(vectors)
    restored = quantized.codes.astype(np.float32) * quantized.scales[:, None]
    cosines = np.sum(restored * vectors, axis=1) / np.linalg.norm(restored, axis=1)
    assert quantized.codes.dtype == np.int8 and quantized.nbytes == 500 * 384 + 500 * 4
    assert np.min(cosines) > 0.999


def test_search_finds_the_k_nearest_rows_best_first_across_blocks() -> None:
    # More rows than a block holds: the block boundary must not lose or reorder rows.
    vectors = unit_rows(BLOCK_ROWS + 1000)
    index = ExactIndex(QuantizedVectors.from_float(vectors))
    query = vectors[BLOCK_ROWS + 7] + 0.3 * unit_rows(1, seed=1)[0]
    query /= np.linalg.norm(query)
    rows, cosines = index.search(query, 20)
    quantized = index.vectors
    reference = (quantized.codes.astype(np.float64) * quantized.scales[:, None].astype(np.float64)) @ query
    assert rows[0] == BLOCK_ROWS + 7
    assert list(rows) == list(np.argsort(-reference, kind="stable")[:20])
    assert np.allclose(cosines, reference[rows], atol=1e-5) and np.all(np.diff(cosines) <= 0)
    # The int8 rows find what float32 rows would: the same 20.
    assert set(rows) == set(np.argsort(-(vectors @ query))[:20])


def test_k_beyond_the_bank_returns_every_row() -> None:
    vectors = unit_rows(5)
    rows, cosines = ExactIndex(QuantizedVectors.from_float(vectors)).search(vectors[2], 50)
    assert sorted(rows) == [0, 1, 2, 3, 4] and rows[0] == 2 and len(cosines) == 5
