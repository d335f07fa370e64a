"""A release suite's ``bank`` set: a bundle's served bank ranking on a dev bank, per query.

The dev bank and the ranking are ``ranker evaluate-bank``'s (:class:`~dialogue_ranker.evaluation.bank_eval.
BankEvaluation`): the bundle's own retriever finds each query's ``k`` nearest responses, its ranker
scores them as a bank request is scored, and the retriever's served fusion (``retriever.json``)
makes the final order. Per query: whether a good reply is first (R@1) and its reciprocal rank,
rows for a paired bootstrap against the other bundle on the same queries.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import DataError
from dialogue_ranker.evaluation.bank_eval import BankEvaluation, Dataset
from dialogue_ranker.evaluation.bank_fusion import fused
from dialogue_ranker.evaluation.bootstrap import Metric, ratio, ratio_rows
from dialogue_ranker.evaluation.release_suite import Scoring, SuiteSet, read_set
from dialogue_ranker.evaluation.retrieval import dev_bank
from dialogue_ranker.serving.model_bundle import find_retriever, load_retriever


def first_hits(scores: np.ndarray, hits: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Per query, the rank (0 first) of its first good reply in ``scores``' order; -1 when none is kept."""
    scores, hits = np.where(kept, scores, -np.inf), hits & kept
    ordered = np.take_along_axis(hits, np.argsort(-scores, axis=1, kind="stable"), axis=1)
    return np.where(ordered.any(axis=1), np.argmax(ordered, axis=1), -1)


def bank_rows(
    s: SuiteSet, bundle_dir: Path, *, scoring: Scoring, cache_dir: Path
) -> dict[str, tuple[Metric, np.ndarray]]:
    """The bundle's R@1 and reciprocal rank per sampled query of the set's dev bank.

    ``cache_dir`` keeps the bank's vectors per retriever (and logits per ranker graph) for the
    other bundle of the same check: give each check a fresh one, so nothing older is read.
    Raises :class:`DataError` when the bundle has no retriever.
    """
    found = find_retriever(bundle_dir)
    if found is None:
        raise DataError(f"bank set {s.name}: {bundle_dir} has no retriever (retriever/retriever.json)")
    bundle = scoring.bundle(bundle_dir)
    bank = dev_bank(read_set(s), every_candidate=s.bank_responses == "all")
    queries = range(len(bank.lists))
    sample = tuple(sorted(random.Random(s.seed).sample(queries, min(s.sample, len(queries)))))
    spec = load_retriever(found)
    evaluation = BankEvaluation(
        bundle, scoring.scorer(bundle), spec, k=s.k, cache_dir=cache_dir, threads=scoring.threads
    )
    try:
        _, retrieved = evaluation.score(Dataset(s.name, s.split, bank, sample))
    finally:
        evaluation.encoder.close()
    first = first_hits(fused(retrieved, spec.fusion), retrieved.hits, retrieved.kept)
    found_any = first >= 0
    return {
        "bank R@1": (ratio("bank R@1"), ratio_rows((first == 0).astype(float))),
        "bank MRR": (ratio("bank MRR"), ratio_rows(np.where(found_any, 1.0 / np.maximum(first + 1, 1), 0.0))),
    }
