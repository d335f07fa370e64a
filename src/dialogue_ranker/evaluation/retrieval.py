"""Retrieval from a response bank, measured: is a context's own reply first, or in the top k.

A dev bank is made from held-out ranking lists: every appropriate reply of the lists becomes a bank
response (duplicates by text kept once: "Nice chatting with you!" is one response however many
conversations end with it), and each list's context is a query whose right answers are its own
appropriate replies. The scores are any query x response similarity (the retrieval encoder's
cosine, a TF-IDF cosine, a fused score), so the same figures compare the untrained encoder, the
trained one and the final bank ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dialogue_ranker.data.ranking_data import RankingList


@dataclass(frozen=True)
class DevBank:
    """Queries (contexts), the bank's texts, and each query's right answers (bank indices)."""

    lists: tuple[RankingList, ...]
    texts: tuple[str, ...]
    answers: tuple[frozenset[int], ...]


def dev_bank(lists: Sequence[RankingList], *, every_candidate: bool = False) -> DevBank:
    """The bank of every appropriate reply of ``lists``, each list a query (lists with none are dropped).

    ``every_candidate``: the bank holds the lists' wrong candidates too (DailyDialog++'s adversarial
    replies, which reuse the context's words: the harder bank issue #43 measured).
    """
    index: dict[str, int] = {}
    kept, answers = [], []
    for x in lists:
        mine = set()
        for c in x.candidates:
            if c.appropriate:
                mine.add(index.setdefault(c.text.strip(), len(index)))
            elif every_candidate:
                index.setdefault(c.text.strip(), len(index))
        if mine:
            kept.append(x)
            answers.append(frozenset(mine))
    return DevBank(tuple(kept), tuple(index), tuple(answers))


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's ``k`` best columns, best first (``argpartition``, then a sort of the k)."""
    k = min(k, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def recall_metrics(
    scores: np.ndarray, answers: Sequence[frozenset[int]], ks: Sequence[int] = (1, 10)
) -> dict:
    """R@k for each k and MRR (over the first 100) of a (queries x bank) score matrix."""
    ranked = top_k(scores, max(100, *ks))
    first = []
    for row, right in zip(ranked, answers, strict=True):
        hits = [i for i, j in enumerate(row) if int(j) in right]
        first.append(hits[0] if hits else None)
    out: dict[str, float | int] = {"queries": len(first), "bank": int(scores.shape[1])}
    for k in ks:
        out[f"r_at_{k}"] = round(float(np.mean([f is not None and f < k for f in first])), 4)
    out["mrr"] = round(float(np.mean([0.0 if f is None else 1.0 / (f + 1) for f in first])), 4)
    return out


def tfidf_scores(bank: Sequence[str], queries: Sequence[str]) -> np.ndarray:
    """TF-IDF cosines (queries x bank), the vocabulary and weights fitted on the bank's texts."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer().fit(bank)
    scores = vectorizer.transform(queries) @ vectorizer.transform(bank).T
    return np.asarray(scores.todense(), dtype=np.float32)
