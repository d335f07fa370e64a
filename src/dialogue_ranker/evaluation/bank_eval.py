r"""``ranker evaluate-bank``: retrieval alone, the ranker alone and fused scores on dev banks, side by side.

    ranker evaluate-bank --model models/dialogue-minilm-l6 \
        --lists ddpp=runs/data/ddpp-dev.jsonl --split ddpp=all \
        --lists topical-chat=runs/data/topical-chat.jsonl --split topical-chat=dev \
        --bank-responses topical-chat=appropriate \
        --retriever models/dialogue-minilm-l6/retriever --retriever runs/retriever-trained \
        --sample 300 --k 50 [--write]

A dev bank is made of a dataset's held-out lists (:func:`dialogue_ranker.evaluation.retrieval.dev_bank`):
every candidate text (``--bank-responses all``, the default: wrong replies too, as issue #43's
DailyDialog++ bank) or their good replies only (``appropriate``). ``--sample`` of its lists are
the queries; a query is right when it finds one of its own good replies. For each
``--retriever`` (the bundle's own by default) the bank and the queries are embedded by the
service's encoder code (ONNX Runtime, the retriever's ``query.turns``), the bank kept as the
service keeps it (int8 rows), the ``--k`` nearest responses taken (a repeat of a context turn
masked, as served), and the bundle's ranker scores them as the service scores a bank request
(every view, the request's situations). Then, side by side: R@1, R@10 and MRR of TF-IDF and of
retrieval alone (over the whole bank), of the ranker alone over the k, and of each fusion
(:mod:`dialogue_ranker.evaluation.bank_fusion`); the ECE and abstention accuracy of the fused
scores under the bundle's calibration map and under a map fitted on them.

The served fusion, ``logit + w * (cosine - centre) - h * hubness``, is fitted per retriever on the
``--fit-on`` datasets (every one by default): the weights of best MRR (their mean; ``h`` a multiple
of ``w``), and the centre, the mean cosine of their retrieved responses; the hubness is each bank
response's, computed as the service computes it (:mod:`dialogue_ranker.serving.banks.hubness`). A
table shows what the weights fitted on each dataset alone give on the others. ``--write`` stores it
in each retriever's ``retriever.json`` (``fusion``); with ``--calibration bank``, with a map and
threshold fitted on the fused scores, which bank requests then use instead of the bundle's. Not by
default: a dev bank's labels count another conversation's reply that fits as wrong, so a map fitted
on them reads nearly every bank response as unlikely and the service would abstain on nearly every
request.

The fusion belongs to the ranker it was fitted with: rerun this command with ``--write``
whenever the bundle's ranker changes. The bank's vectors (per retriever) and the ranker's logits
(per ranker graph and lists) are kept in ``--cache-dir``, so a rerun with the same ranker costs
seconds and one with a new ranker its scoring only.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.ranking_data import Candidate, RankingList, exit_on_data_error, read_lists
from dialogue_ranker.evaluation import bank_fusion
from dialogue_ranker.evaluation.bank_fusion import Retrieved
from dialogue_ranker.evaluation.domains import ListScorer, held_out
from dialogue_ranker.evaluation.retrieval import DevBank, dev_bank, recall_metrics, tfidf_scores
from dialogue_ranker.evaluation.scoring import view_logits
from dialogue_ranker.serving import context_views
from dialogue_ranker.serving.banks.bank_file import Bank, BankEntry
from dialogue_ranker.serving.banks.cache import EmbeddingCache, cache_key
from dialogue_ranker.serving.banks.encoder import TextEncoder, file_sha256
from dialogue_ranker.serving.banks.hubness import hubness
from dialogue_ranker.serving.banks.index import QuantizedVectors
from dialogue_ranker.serving.cpu import available_cpus
from dialogue_ranker.serving.fusion import Fusion
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.serving.model_bundle import (
    RETRIEVER_FILE,
    ModelBundle,
    RetrieverSpec,
    find_retriever,
    load_bundle,
    load_retriever,
)
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command's arguments (this module's docstring is its help)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=Path("models/dialogue-minilm-l6"), help="the bundle")
    p.add_argument(
        "--retriever",
        type=Path,
        action="append",
        help="a retriever directory (repeatable; default: the bundle's)",
    )
    p.add_argument("--lists", action="append", required=True, help="NAME=FILE of ranking lists (repeatable)")
    p.add_argument(
        "--split", action="append", default=[], help="SPLIT (dev, test, all) or NAME=SPLIT; default dev"
    )
    p.add_argument(
        "--bank-responses",
        action="append",
        default=[],
        help="all (every candidate text of the lists, wrong ones too: issue #43's bank; the default) or "
        "appropriate (their good replies only), or NAME=either for one dataset",
    )
    p.add_argument("--sample", type=int, default=300, help="queries per dataset (a seeded sample)")
    p.add_argument("--k", type=int, default=50, help="responses retrieved per query, then ranked")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--check-sample",
        type=int,
        default=0,
        help="also measure the fitted fusion on this many other queries per dataset (not fitted on; "
        "seeded by --seed + 1)",
    )
    p.add_argument(
        "--folds",
        type=int,
        default=0,
        help="also cross-validate the fit: each sampled query ranked by the fusion fitted on the "
        "other folds (0: not)",
    )
    p.add_argument(
        "--fit-on", action="append", help="a dataset the fusion is fitted on (repeatable; default: every one)"
    )
    p.add_argument(
        "--calibration",
        choices=["bundle", "bank"],
        default="bundle",
        help="the map bank requests are read with: the bundle's (in force), or one fitted on fused scores",
    )
    p.add_argument(
        "--last-turn-weight",
        type=float,
        default=None,
        help="how much the last turn alone weighs in the query vector (default: each retriever's "
        "query.last_turn_weight); written with --write",
    )
    p.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads (default: the CPUs)")
    p.add_argument("--cache-dir", type=Path, default=Path("runs/bank-eval-cache"), help="bank vectors")
    p.add_argument("--write", action="store_true", help="store the fitted fusion in each retriever.json")
    p.add_argument("--out", type=Path, help="also write every figure as JSON here")
    args = p.parse_args(argv)
    if args.k < 10 or args.sample < 1 or args.check_sample < 0:
        p.error("--k must be at least 10 (R@10 is measured), --sample at least 1, --check-sample >= 0")
    if args.folds == 1 or args.folds < 0:
        p.error(f"--folds {args.folds}: 0 (no cross-validation) or at least 2")
    if args.last_turn_weight is not None and not 0.0 <= args.last_turn_weight <= 1.0:
        p.error(f"--last-turn-weight {args.last_turn_weight} is not in [0, 1]")
    return args


def per_dataset(
    flag: str, entries: Sequence[str], names: Sequence[str], choices: Sequence[str]
) -> dict[str, str]:
    """Each dataset's value of a flag given as ``VALUE`` (every dataset) or ``NAME=VALUE`` (one).

    The first choice is the default.
    """
    out = dict.fromkeys(names, choices[0])
    for entry in entries:
        name, _, value = entry.rpartition("=")
        if value not in choices or (name and name not in out):
            allowed = ", ".join(choices)
            raise SystemExit(
                f"ranker evaluate-bank: {flag} {entry!r}: one of {allowed}, or NAME=that for a --lists"
            )
        for key in [name] if name else list(out):
            out[key] = value
    return out


def datasets(args: argparse.Namespace) -> dict[str, Dataset]:
    """Every ``--lists`` file's dev bank (its split's lists) and a seeded sample of its queries."""
    pairs = []
    for entry in args.lists:
        name, _, path = entry.partition("=")
        if not path:
            raise SystemExit(f"ranker evaluate-bank: --lists takes NAME=FILE, got {entry!r}")
        pairs.append((name, path))
    names = [name for name, _ in pairs]
    chosen = per_dataset("--split", args.split, names, ("dev", "test", "all", "train"))
    responses = per_dataset("--bank-responses", args.bank_responses, names, ("all", "appropriate"))
    out = {}
    for name, path in pairs:
        every = responses[name] == "all"
        bank = dev_bank(held_out(read_lists(path), chosen[name]), every_candidate=every)
        queries = range(len(bank.lists))
        sample = sorted(random.Random(args.seed).sample(queries, min(args.sample, len(queries))))
        rest = sorted(set(queries) - set(sample))
        check = sorted(random.Random(args.seed + 1).sample(rest, min(args.check_sample, len(rest))))
        out[name] = Dataset(name, chosen[name], bank, tuple(sample), tuple(check))
        counts = f"{len(sample)} sampled, {len(check)} to check ({chosen[name]} split)"
        print(f"{name}: {len(bank.texts):,} responses ({responses[name]}), {len(bank.lists):,} queries, "
              f"{counts}", file=sys.stderr)  # fmt: skip
    return out


class BankEvaluation:
    """One bundle's ranker and one retriever over the datasets; the bank vectors kept per retriever."""

    def __init__(
        self, bundle: ModelBundle, scorer: ListScorer, spec: RetrieverSpec, args: argparse.Namespace
    ) -> None:
        self.bundle, self.scorer, self.spec, self.args = bundle, scorer, spec, args
        threads = args.threads or available_cpus()
        self.encoder = TextEncoder(spec, query_threads=threads, bulk_threads=threads)
        self.encoder.start()
        self.cache = EmbeddingCache(args.cache_dir)
        #: What the ranker's logits depend on besides the lists: its graph and views.
        self.ranker_identity = f"{file_sha256(bundle.ranker.path)}/{json.dumps(bundle.views.to_dict())}"
        #: Each bank's rows and their hubness, once per dataset (its sampled and check queries share them).
        self._banks: dict[str, tuple[QuantizedVectors, np.ndarray]] = {}

    def vectors(self, data: Dataset) -> QuantizedVectors:
        """The bank's int8 rows, from ``--cache-dir`` when kept there, as the service keeps them."""
        texts = data.bank.texts
        digest = hashlib.sha256(b"".join(t.encode() + b"\0" for t in texts)).hexdigest()
        entries = tuple(BankEntry(str(i), t) for i, t in enumerate(texts))
        name = f"{data.name}-{self.encoder.identity[:8]}"  # one file per retriever: a save drops the others
        bank = Bank(name, self.args.cache_dir / f"{name}.jsonl", entries, digest)
        key = cache_key(bank, self.encoder.identity)
        kept = self.cache.load(bank, key, self.encoder.dim)
        if kept is not None:
            return kept
        started = time.perf_counter()
        vectors = QuantizedVectors.from_float(self.encoder.embed_all(list(texts)))
        print(f"  {data.name}: {len(texts):,} responses embedded in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)  # fmt: skip
        self.cache.save(bank, key, vectors)
        return vectors

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
        k = min(self.args.k, cosines.shape[1])
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
        path = self.args.cache_dir / f"logits-{name}-{digest.hexdigest()[:24]}.npz"
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


def report(label: str, retrieval: dict[str, dict], scored: dict[str, Retrieved], fusion: Fusion,
           prior_centre: float) -> dict[str, dict[str, dict[str, float]]]:  # fmt: skip
    """Every method's figures per dataset under one retriever (printed as a table)."""
    columns: dict[str, dict[str, dict[str, float]]] = {}
    for name, r in scored.items():
        rows = {"retrieval alone (cosine, whole bank)": retrieval[name]}
        for method, scores in bank_fusion.fusions(r, fusion.cosine_centre, prior_centre).items():
            rows[method] = bank_fusion.ranked_metrics(scores, r.hits, r.kept)
        rows[served_name(fusion)] = bank_fusion.ranked_metrics(bank_fusion.fused(r, fusion), r.hits, r.kept)
        columns[name] = rows
    print(f"\n### {label}\n")
    print(bank_fusion.table(columns))
    found = ", ".join(f"{name} {np.mean(r.hits.any(axis=1)):.3f}" for name, r in scored.items())
    masked = ", ".join(f"{name} {np.mean(~r.kept):.3f}" for name, r in scored.items())
    print(f"\nqueries with a good reply in the top {scored[next(iter(scored))].hits.shape[1]}: {found}")
    print(f"retrieved responses masked as a repeat of a turn: {masked}")
    return columns


def served_name(fusion: Fusion) -> str:
    """The fitted fusion's row name."""
    return f"served: {bank_fusion.linear_name(fusion.cosine_weight, fusion.hubness_weight)}"


def retriever_spec(directory: Path, args: argparse.Namespace) -> RetrieverSpec:
    """The retriever at ``directory``, its query's last-turn weight set by ``--last-turn-weight``."""
    spec = load_retriever(directory)
    if args.last_turn_weight is None:
        return spec
    return dataclasses.replace(spec, last_turn_weight=args.last_turn_weight)


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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """The CLI; returns every figure (what ``--out`` writes)."""
    args = parse_args(argv)
    data = datasets(args)
    fit_on = args.fit_on or list(data)
    if set(fit_on) - set(data):
        raise SystemExit(
            f"ranker evaluate-bank: --fit-on {sorted(set(fit_on) - set(data))} is not a --lists NAME"
        )
    bundle = load_bundle(args.model)  # scored by ONNX Runtime: the bundle's own map
    scorer = ListScorer(bundle, threads=args.threads or available_cpus())
    results: dict[str, Any] = {"model": bundle.model_id, "k": args.k, "fit_on": fit_on, "retrievers": {}}
    summary: dict[str, dict[str, dict[str, float]]] = {name: {} for name in data}
    for name, d in data.items():
        summary[name]["TF-IDF, last turn"] = tfidf(d)
    for directory in args.retriever or [args.model]:
        found = find_retriever(directory)
        if found is None:
            raise SystemExit(f"ranker evaluate-bank: {directory} holds no retriever.json")
        results["retrievers"][str(found)] = evaluate_retriever(
            found, BankEvaluation(bundle, scorer, retriever_spec(found, args), args), data, fit_on, summary
        )
    print(f"\n### side by side ({bundle.model_id}, k = {args.k}, fitted on {' and '.join(fit_on)})\n")
    print(bank_fusion.table(summary))
    results["summary"] = summary
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return results


def evaluate_retriever(
    found: Path,
    evaluation: BankEvaluation,
    data: dict[str, Dataset],
    fit_on: list[str],
    summary: dict[str, dict[str, dict[str, float]]],
) -> dict[str, Any]:
    """One retriever's tables and fitted fusion (written with ``--write``); its rows added to ``summary``."""
    spec, bundle, args = evaluation.spec, evaluation.bundle, evaluation.args
    query = f"query turns {spec.query_turns}, last turn weight {spec.last_turn_weight:g}"
    label = f"{spec.name} ({found}, {query})"
    print(f"retriever {label}", file=sys.stderr)
    retrieval, scored = {}, {}
    for name, d in data.items():
        retrieval[name], scored[name] = evaluation.score(d)
    fusion, checks = fitted_fusion(scored, fit_on, bundle, args.calibration)
    columns = report(label, retrieval, scored, fusion, bundle.views.prior_centre)
    print("\ndoes a weight fitted on one bank transfer to the other?\n")
    print(bank_fusion.table(bank_fusion.transfer(scored, fusion.cosine_centre)))
    print("\ncalibration of the fused scores (labels: a query's own good replies):\n")
    print(bank_fusion.table(checks, keys=("ece", "abstention_accuracy", "threshold", "mean_top_score")))
    served = served_name(fusion)
    for name, rows in columns.items():
        summary[name][f"{spec.name}: retrieval alone"] = rows["retrieval alone (cosine, whole bank)"]
        summary[name][f"{spec.name}: ranker alone over its top {args.k}"] = rows["ranker alone"]
        summary[name][f"{spec.name}: final bank ranking ({served[8:]})"] = rows[served]
    fitted = {
        "on": {name: {"split": data[name].split, "queries": len(data[name].queries)} for name in fit_on},
        "k": args.k,
        "query": {"turns": spec.query_turns, "last_turn_weight": spec.last_turn_weight},
        "metrics": {name: rows[served] for name, rows in columns.items()},
        "at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
    }
    checked = check_queries(evaluation, data, fusion)
    if checked:
        fitted["checked"] = {name: rows[served] for name, rows in checked.items()}
    folds = cross_validate(scored, fit_on, columns, args)
    if folds:
        fitted["cross_validated"] = {"folds": args.folds, "metrics": folds["metrics"]}
    fusion = dataclasses.replace(fusion, fitted=fitted)
    if args.write:
        print(f"\nwrote the fusion to {write_fusion(found, fusion, spec)}", file=sys.stderr)
    return {
        "name": spec.name,
        "fusion": fusion.to_dict(),
        "methods": columns,
        "calibration": checks,
        "checked": checked,
        "cross_validated": folds,
    }


def cross_validate(
    scored: dict[str, Retrieved],
    fit_on: list[str],
    methods: dict[str, dict[str, dict[str, float]]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """``--folds``: every sampled query ranked by the fusion fitted on the other folds (printed).

    ``methods``: :func:`report`'s figures on the same queries, whose baselines are printed beside.
    """
    if not args.folds:
        return {}
    metrics, chosen = bank_fusion.cross_validated(scored, fit_on, args.folds, args.seed)
    baselines = ("retrieval alone, its top k", "ranker alone")
    columns: dict[str, dict[str, dict[str, float]]] = {}
    for name, r in scored.items():
        columns[f"{name} ({r.queries} queries)"] = {
            **{row: methods[name][row] for row in baselines},
            f"fusion fitted on the other {args.folds - 1} folds": metrics[name],
        }
    fits = ", ".join(bank_fusion.linear_name(f.cosine_weight, f.hubness_weight) for f in chosen)
    print(f"\ncross-validated ({args.folds} folds; each fold's fit: {fits}):\n")
    print(bank_fusion.table(columns))
    return {"folds": args.folds, "metrics": metrics, "fits": [f.to_dict() for f in chosen]}


def check_queries(
    evaluation: BankEvaluation, data: dict[str, Dataset], fusion: Fusion
) -> dict[str, dict[str, dict[str, float]]]:
    """Retrieval alone, the ranker alone and the fitted fusion on the ``--check-sample`` queries.

    The weights were fitted on the sampled queries, so their figures there flatter them; these
    queries say what the fusion does on queries it has not seen.
    """
    columns: dict[str, dict[str, dict[str, float]]] = {}
    for name, d in data.items():
        if not d.check:
            continue
        retrieval, r = evaluation.score(dataclasses.replace(d, queries=d.check))
        columns[f"{name} ({len(d.check)} other queries)"] = {
            "retrieval alone (cosine, whole bank)": retrieval,
            "retrieval alone, its top k": bank_fusion.ranked_metrics(r.cosines, r.hits, r.kept),
            "ranker alone": bank_fusion.ranked_metrics(r.logits, r.hits, r.kept),
            served_name(fusion): bank_fusion.ranked_metrics(bank_fusion.fused(r, fusion), r.hits, r.kept),
        }
    if columns:
        print("\nthe fitted fusion on queries it was not fitted on (--check-sample):\n")
        print(bank_fusion.table(columns))
    return columns


if __name__ == "__main__":
    exit_on_data_error(main)
