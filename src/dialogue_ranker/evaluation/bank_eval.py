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
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.ranking_data import exit_on_data_error, read_lists
from dialogue_ranker.evaluation import bank_fusion
from dialogue_ranker.evaluation.bank_fusion import Retrieved
from dialogue_ranker.evaluation.bank_scoring import (
    BankEvaluation,
    Dataset,
    fitted_fusion,
    served_name,
    tfidf,
    write_fusion,
)
from dialogue_ranker.evaluation.domains import ListScorer, held_out
from dialogue_ranker.evaluation.retrieval import dev_bank
from dialogue_ranker.serving.backends.openvino import resolve_precision
from dialogue_ranker.serving.calibration import runtime_key
from dialogue_ranker.serving.cpu import available_cpus
from dialogue_ranker.serving.fusion import Fusion
from dialogue_ranker.serving.model_bundle import (
    RetrieverSpec,
    find_retriever,
    load_bundle,
    load_retriever,
)


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
    p.add_argument(
        "--backend",
        choices=["onnx", "openvino"],
        default="onnx",
        help="the runtime that computes the ranker's logits, read with that runtime's map: onnx, or "
        "openvino at --precision, as --backend auto serves a graph OpenVINO runs fastest (1.5x ONNX "
        "Runtime for model 2.11.19's fp16 weights on a Zen 4 with AVX-512 BF16)",
    )
    p.add_argument("--precision", choices=["auto", "bf16", "f32"], default="auto", help="OpenVINO's")
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


def retriever_spec(directory: Path, args: argparse.Namespace) -> RetrieverSpec:
    """The retriever at ``directory``, its query's last-turn weight set by ``--last-turn-weight``."""
    spec = load_retriever(directory)
    if args.last_turn_weight is None:
        return spec
    return dataclasses.replace(spec, last_turn_weight=args.last_turn_weight)


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
    runtime = "onnx"
    if args.backend == "openvino":  # that runtime's own map, as the service reads its logits
        runtime = runtime_key("openvino", resolve_precision(args.precision))
        bundle = bundle.for_runtime(runtime)
    threads = args.threads or available_cpus()
    scorer = ListScorer(bundle, threads=threads, backend=args.backend, precision=args.precision)
    results: dict[str, Any] = {
        "model": bundle.model_id, "runtime": runtime, "k": args.k, "fit_on": fit_on, "retrievers": {}
    }  # fmt: skip
    summary: dict[str, dict[str, dict[str, float]]] = {name: {} for name in data}
    for name, d in data.items():
        summary[name]["TF-IDF, last turn"] = tfidf(d)
    for directory in args.retriever or [args.model]:
        found = find_retriever(directory)
        if found is None:
            raise SystemExit(f"ranker evaluate-bank: {directory} holds no retriever.json")
        results["retrievers"][str(found)] = evaluate_retriever(
            found,
            BankEvaluation(
                bundle,
                scorer,
                retriever_spec(found, args),
                k=args.k,
                cache_dir=args.cache_dir,
                threads=args.threads,
                runtime=runtime,
            ),
            data,
            fit_on,
            summary,
            args,
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
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One retriever's tables and fitted fusion (written with ``--write``); its rows added to ``summary``."""
    spec, bundle = evaluation.spec, evaluation.bundle
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
        "runtime": evaluation.runtime,
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
