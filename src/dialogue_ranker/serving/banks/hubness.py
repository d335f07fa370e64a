"""A bank response's hubness: how close it sits to the bank's other responses.

In a bank of thousands, generic replies ("That sounds great!", "Sure, why not?") are near almost
any query: they are *hubs* of the embedding space (Radovanovic et al., 2010), and both the cosine
and the ranker rate them high for contexts they do not answer in particular (issue #43). The
correction is CSLS's (Conneau et al., 2018): a response's mean cosine with its ``neighbours``
nearest responses in the bank says how much of its cosine with a query is owed to its being
generic, and the fusion subtracts it (:mod:`dialogue_ranker.serving.fusion`). Responses stand in
for queries here: in a dialogue bank each reply is also a turn some query ends with, and no query
log is needed.

Cost: every row against a seeded sample of at most ``REFERENCE_ROWS`` rows, block by block
(``BLOCK_ROWS`` x reference cosines in memory at once), so it grows linearly with the bank. Each
row's own column is excluded. The values are centred on the bank's mean, so a bank's typical
response and a request's own candidates (hubness 0) keep the fused score's scale.
"""

from __future__ import annotations

import numpy as np

from dialogue_ranker.serving.banks.index import QuantizedVectors

#: Rows a response is compared with (a seeded sample when the bank is larger): 10,000 gave the
#: same dev-bank figures as the whole 10,121-row bank, and keeps a 100,000-row bank to seconds.
REFERENCE_ROWS = 10_000
#: Rows whose cosines with the reference are held at once: 1,024 x 10,000 float32 = 41 MB.
BLOCK_ROWS = 1024


def hubness(vectors: QuantizedVectors, neighbours: int, *, reference_rows: int = REFERENCE_ROWS,
            seed: int = 0) -> np.ndarray:  # fmt: skip
    """Each row's mean cosine with its ``neighbours`` nearest other rows, less the bank's mean (float32).

    A bank of ``neighbours`` rows or fewer has no hubs to tell apart: all zeros.
    """
    rows = vectors.rows
    if neighbours < 1:
        raise ValueError(f"neighbours {neighbours} is not >= 1")
    if rows <= neighbours:
        return np.zeros(rows, dtype=np.float32)
    sample = np.arange(rows) if rows <= reference_rows else np.sort(
        np.random.default_rng(seed).choice(rows, size=reference_rows, replace=False)
    )  # fmt: skip
    reference = np.ascontiguousarray(_widened(vectors, sample).T)
    column_of = np.full(rows, -1, dtype=np.int64)
    column_of[sample] = np.arange(len(sample))
    out = np.empty(rows, dtype=np.float32)
    for start in range(0, rows, BLOCK_ROWS):
        block = _widened(vectors, np.arange(start, min(start + BLOCK_ROWS, rows))) @ reference
        mine = column_of[start : start + len(block)]
        inside = np.flatnonzero(mine >= 0)
        block[inside, mine[inside]] = -np.inf  # a row is not its own neighbour
        nearest = np.partition(block, -neighbours, axis=1)[:, -neighbours:]
        out[start : start + len(block)] = nearest.mean(axis=1)
    out -= out.mean()
    return out


def _widened(vectors: QuantizedVectors, rows: np.ndarray) -> np.ndarray:
    """The given rows as float32 vectors (a block at a time: the bank is never widened whole)."""
    return vectors.codes[rows].astype(np.float32) * vectors.scales[rows, None]
