"""Dev banks scored as the service scores a bank request: the library behind ``ranker evaluate-bank``.

A :class:`Dataset` is a dev bank and its sampled queries; :class:`BankEvaluation` embeds the bank
with one retriever (kept as the service keeps it, int8 rows and hubness), retrieves each query's
``k`` nearest responses and has the bundle's ranker score them (every view); :func:`fitted_fusion`
fits the served fusion on them and :func:`write_fusion` stores it in ``retriever.json``. The
command (arguments, tables) is :mod:`dialogue_ranker.evaluation.bank_eval`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.evaluation import bank_fusion
from dialogue_ranker.evaluation.bank_fusion import Retrieved
from dialogue_ranker.evaluation.domains import ListScorer
from dialogue_ranker.evaluation.retrieval import DevBank, recall_metrics, tfidf_scores
from dialogue_ranker.evaluation.scoring import view_logits
from dialogue_ranker.serving import context_views
from dialogue_ranker.serving.banks.bank_file import Bank, BankEntry
from dialogue_ranker.serving.banks.cache import EmbeddingCache
from dialogue_ranker.serving.banks.encoder import TextEncoder, file_sha256
from dialogue_ranker.serving.banks.hubness import hubness
from dialogue_ranker.serving.banks.index import QuantizedVectors
from dialogue_ranker.serving.banks.text_vectors import assemble, text_digests
from dialogue_ranker.serving.cpu import available_cpus
from dialogue_ranker.serving.fusion import Fusion
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.serving.model_bundle import RETRIEVER_FILE, ModelBundle, RetrieverSpec
from dialogue_ranker.serving.repeats import repeat_key


@dataclass(frozen=True)
class Dataset:
    """A dev bank and the queries drawn from it."""

    name: str
    split: str
    bank: DevBank
    queries: tuple[int, ...]
    #: Other queries of the bank (``--check-sample``): the fitted fusion is measured on them too.
    check: tuple[int, ...] = ()


class BankEvaluation:
    """One bundle's ranker and one retriever over the datasets; the bank vectors kept per retriever."""

    def __init__(
        self,
        bundle: ModelBundle,
        scorer: ListScorer,
        spec: RetrieverSpec,
        *,
        k: int,
        cache_dir: Path,
        threads: int | None = None,
        runtime: str = "onnx",
    ) -> None:
        self.bundle, self.scorer, self.spec = bundle, scorer, spec
        #: The runtime that computes the ranker's logits (``onnx``, ``openvino-bf16``...).
        self.runtime = runtime
        #: Responses retrieved per query, then ranked.
        self.k = k
        #: The bank vectors and the ranker's logits are kept here.
        self.cache_dir = cache_dir
        threads = threads or available_cpus()
        self.encoder = TextEncoder(spec, query_threads=threads, bulk_threads=threads)
        self.encoder.start()
        self.cache = EmbeddingCache(cache_dir)
        #: What the ranker's logits depend on besides the lists: its graph and views.
        self.ranker_identity = f"{file_sha256(bundle.ranker.path)}/{json.dumps(bundle.views.to_dict())}"
        if runtime != "onnx":  # another runtime's logits differ slightly (ONNX Runtime's keep their old key)
            self.ranker_identity += f"/{runtime}"
        #: Each bank's rows and their hubness, once per dataset (its sampled and check queries share them).
        self._banks: dict[str, tuple[QuantizedVectors, np.ndarray]] = {}

    def vectors(self, data: Dataset) -> QuantizedVectors:
        """The bank's int8 rows, from ``--cache-dir`` when kept there, as the service keeps them."""
        texts = data.bank.texts
        digest = hashlib.sha256(b"".join(t.encode() + b"\0" for t in texts)).hexdigest()
        entries = tuple(BankEntry(str(i), t) for i, t in enumerate(texts))
        name = f"{data.name}-{self.encoder.identity[:8]}"  # one file per retriever: a save drops the others
        bank = Bank(name, self.cache_dir / f"{name}.jsonl", entries, digest)
        identity = self.encoder.identity
        digests = text_digests(texts, identity)
        kept = self.cache.load(bank, identity, self.encoder.dim)
        if kept is not None and kept.same_rows(digests):
            return kept.vectors
        started = time.perf_counter()
        # Only the texts the cache does not hold are embedded (a bank grown by a few responses).
        made = assemble(texts, digests, kept, self.encoder.embed_all, dim=self.encoder.dim)
        print(f"  {data.name}: {made.embedded:,} of {len(texts):,} responses embedded in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)  # fmt: skip
        self.cache.save(bank, identity, made.vectors)
        return made.vectors.vectors

    def retrieve(
        self, data: Dataset, vectors: QuantizedVectors
    ) -> tuple[dict[str, float], np.ndarray, np.ndarray, np.ndarray]:
        """Retrieval alone over the bank's ``vectors``; each query's k nearest rows, cosines, which are kept.

        A response that repeats a turn of the query's context is masked, as the service masks it
        (``ranking.mask_repeats``): never ranked, so never found by retrieval alone either.
        """
        lists = [data.bank.lists[i] for i in data.queries]
        queries = self.encoder.embed_queries([x.context for x in lists], bulk=True)
        cosines = (queries @ vectors.codes.astype(np.float32).T) * vectors.scales[None, :]
        repeated = np.zeros(cosines.shape, dtype=bool)
        rows_by_key: dict[str, list[int]] = {}
        for row, text in enumerate(data.bank.texts):
            rows_by_key.setdefault(repeat_key(text), []).append(row)
        for i, x in enumerate(lists):
            for turn in x.context:
                repeated[i, rows_by_key.get(repeat_key(turn.text) or "\0", [])] = True
        whole = recall_metrics(
            np.where(repeated, -np.inf, cosines), [data.bank.answers[i] for i in data.queries]
        )
        k = min(self.k, cosines.shape[1])
        best = np.argpartition(-cosines, k - 1, axis=1)[:, :k]
        values = np.take_along_axis(cosines, best, axis=1)
        order = np.lexsort((best, -values), axis=1)  # as the service: ties go to the earlier row
        rows = np.take_along_axis(best, order, axis=1)
        kept = ~np.take_along_axis(repeated, rows, axis=1)
        return whole, rows, np.take_along_axis(cosines, rows, axis=1), kept

    def bank(self, data: Dataset) -> tuple[QuantizedVectors, np.ndarray]:
        """The bank's rows (:meth:`vectors`) and each row's hubness as the service computes it."""
        if data.name not in self._banks:
            vectors = self.vectors(data)
            self._banks[data.name] = vectors, hubness(vectors, Fusion().hubness_neighbours)
        return self._banks[data.name]

    def score(self, data: Dataset) -> tuple[dict[str, float], Retrieved]:
        """Retrieval alone, and the k nearest responses scored by the ranker as a bank request is."""
        vectors, hubs = self.bank(data)
        whole, rows, cosines, kept = self.retrieve(data, vectors)
        lists = []
        for query, row in zip(data.queries, rows, strict=True):
            x, answers = data.bank.lists[query], data.bank.answers[query]
            candidates = tuple(Candidate(data.bank.texts[j], int(j in answers)) for j in row)
            lists.append(RankingList(x.context, candidates, x.group, x.situations))
        logits, views = self.logits(lists, data.name)
        hits = np.array([[c.label == 1 for c in x.candidates] for x in lists], dtype=bool)
        return whole, Retrieved(cosines.astype(np.float32), logits, views, hits & kept, kept, hubs[rows])

    def logits(self, lists: list[RankingList], name: str) -> tuple[np.ndarray, np.ndarray]:
        """The ranker's logits (views combined, as served) and each view's (NaN: not scored), per list.

        Kept in ``--cache-dir`` under a digest of the ranker's graph, its views and the lists, so a
        rerun (``--write`` after a look at the tables) does not rank again.
        """
        digest = hashlib.sha256(f"views/1/{self.ranker_identity}".encode())
        for x in lists:
            digest.update(json.dumps(x.to_json(), sort_keys=True).encode())
        path = self.cache_dir / f"logits-{name}-{digest.hexdigest()[:24]}.npz"
        if path.is_file():
            with np.load(path) as kept:
                return kept["logits"], kept["views"]
        logits, views = self._rank(lists, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, logits=logits, views=views)
        return logits, views

    def _rank(self, lists: list[RankingList], name: str) -> tuple[np.ndarray, np.ndarray]:
        k = len(lists[0].candidates)
        by_views = np.full((len(lists), 3, k), np.nan, dtype=np.float32)
        if not self.bundle.shared_prefix:
            return np.stack(self.scorer.logits(lists)), by_views
        encoder = self.bundle.pair_encoder()
        assert isinstance(encoder, ListEncoder)
        views, out, started = self.bundle.views, [], time.perf_counter()
        for i, x in enumerate(lists):
            by_view = view_logits(self.scorer.ranker, encoder, x, views)
            out.append(context_views.combine(np.concatenate(by_view), len(by_view), views))
            by_views[i, : len(by_view)] = by_view
            if (i + 1) % 50 == 0:
                seconds = time.perf_counter() - started
                print(f"  {name}: {i + 1} of {len(lists)} lists ranked ({seconds:.0f} s)", file=sys.stderr)
        return np.stack(out).astype(np.float32), by_views


def tfidf(data: Dataset) -> dict[str, float]:
    """TF-IDF of the last turn against each response, over the whole bank (the issue's first row)."""
    lists = [data.bank.lists[i] for i in data.queries]
    scores = tfidf_scores(data.bank.texts, [x.context[-1].text for x in lists])
    return recall_metrics(scores, [data.bank.answers[i] for i in data.queries])


def fitted_fusion(
    scored: dict[str, Retrieved], fit_on: Sequence[str], bundle: ModelBundle, calibration: str
) -> tuple[Fusion, dict[str, Any]]:
    """The fusion fitted on ``fit_on``: its weight, centre and (``calibration`` ``bank``) its own map."""
    fitting = [scored[name] for name in fit_on]
    centre = bank_fusion.centre_of(fitting)
    fitted, _ = bank_fusion.fit_weights(fitting, centre)
    fusion = dataclasses.replace(fitted, ranker=bundle.model_id)
    own_map, own_threshold = bank_fusion.bank_map(bank_fusion.pooled(fitting), fusion)
    with_own = dataclasses.replace(fusion, calibration=own_map, threshold=own_threshold)
    checks = {
        name: bank_fusion.calibration_rows(x, with_own, bundle.calibration, bundle.threshold)
        for name, x in scored.items()
    }
    return (with_own if calibration == "bank" else fusion), checks


def served_name(fusion: Fusion) -> str:
    """The fitted fusion's row name."""
    return f"served: {bank_fusion.linear_name(fusion.cosine_weight, fusion.hubness_weight)}"


def write_fusion(directory: Path, fusion: Fusion, spec: RetrieverSpec) -> Path:
    """Store ``fusion`` and the query's last-turn weight in the retriever's ``retriever.json``.

    The rest of the file stays as it was.
    """
    path = directory / RETRIEVER_FILE
    meta = json.loads(path.read_text())
    meta["fusion"] = fusion.to_dict()
    meta.setdefault("query", {"turns": spec.query_turns})["last_turn_weight"] = spec.last_turn_weight
    path.write_text(json.dumps(meta, indent=2) + "\n")
    return path
