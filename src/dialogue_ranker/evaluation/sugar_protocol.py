r"""Evaluate a shipped model directory on SUGAR-format data, the way the service runs it.

    ranker evaluate-sugar --model models/dialogue-minilm-l6 \\
        --data ../shared/data/sugar/sugar.jsonl --split-file runs/sugar/split.json --split test

Prints JSON and writes a markdown table beside the published numbers: Precision@1, nDCG@3 and
MRR on the examples that have a bad candidate (the paper's protocol), ECE and abstention
accuracy of the calibrated scores, for the input settings u, u+S1 (gold statements), u+S (all
12) and the distractor curve (gold + 5/10/15 expanded
distractors), plus a TF-IDF row computed the same way. Scoring goes through ONNX Runtime with
the service's pair encoder and calibration; every statement given reaches the ranker, as in the
service (models 1.x put a statement selector in front; 2.x has none).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from dialogue_ranker.data.sugar import (
    ATTRIBUTION,
    GROUPINGS,
    SugarExample,
    load_sugar,
    select,
    split_indices,
    sugar_group,
)
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.evaluation.grouping import score_grouped
from dialogue_ranker.evaluation.scoring import (
    add_backend_arguments,
    runtime_label,
    score,
    score_sequences,
    scoring_runtime,
    session,
)
from dialogue_ranker.serving.model_bundle import ModelBundle, load_bundle

PUBLISHED = {  # SUGAR paper, 5-fold cross-validation, input u + all 12 statements
    "TF-IDF": (0.568, 0.850),
    "BERT-base": (0.727, 0.911),
    "RoBERTa-base": (0.699, 0.904),
    "DeBERTa-v3-base": (0.785, 0.931),
    "DeBERTa-v3-base, only the relevant statements": (0.898, 0.969),
}
#: (row name, input setting, with a TF-IDF row?)
ROWS = [
    ("u", "u", True),
    ("u+S1 (gold statements)", "u+S1", True),
    ("u+S (all 12)", "u+S", True),
    ("u+S1+5 distractors", "d5", False),
    ("u+S1+10 distractors", "d10", False),
    ("u+S1+15 distractors", "d15", False),
]


def ranking_metrics(scores: Sequence[Sequence[float]], examples: Sequence[SugarExample]) -> dict[str, float]:
    """P@1, nDCG@3 and MRR on the examples with a bad candidate (the paper's protocol)."""
    rows = [(s, e.labels) for s, e in zip(scores, examples, strict=True) if e.has_bad]
    return {
        "precision_at_1": float(np.mean([metrics.precision_at_1(s, y) for s, y in rows])),
        "ndcg_at_3": float(np.mean([metrics.ndcg_at_k(s, y, 3) for s, y in rows])),
        "mrr": float(np.mean([metrics.reciprocal_rank(s, y) for s, y in rows])),
        "examples": len(rows),
    }


class Evaluator:
    """Scores SUGAR examples with a model directory's ONNX graphs."""

    def __init__(
        self,
        bundle: ModelBundle,
        *,
        ranker_file: Path | None = None,
        threads: int = 2,
        batch_size: int | None = None,
        backend: str = "onnx",
        precision: str = "auto",
        weights: str = "auto",
    ) -> None:
        self.bundle = bundle
        # Score as the service does: a model whose scores depend on batch-mates (dynamic int8)
        # is served one pair per call, and must be evaluated so too.
        self.batch_size = batch_size or bundle.serving_sub_batch_pairs or 16
        runtime = {"threads": threads, "backend": backend, "precision": precision, "weights": weights}
        self.ranker = session(ranker_file or bundle.ranker.path, **runtime)
        self.encoder = bundle.pair_encoder()

    def logits(
        self, examples: Sequence[SugarExample], statements: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        """Ranker logits per example, in candidate order."""
        lists = [
            self.encoder.encode_request(e.turns, s, e.candidates)
            for e, s in zip(examples, statements, strict=True)
        ]
        if self.bundle.shared_prefix:  # one sequence per call, as served
            return score_sequences(self.ranker, self.encoder, lists)
        return score_grouped(
            lambda flat: score(self.ranker, self.encoder, flat, batch_size=self.batch_size), lists
        )

    def evaluate(self, examples: Sequence[SugarExample], setting: str) -> dict:
        """All metrics for one input setting."""
        given = [e.statements_for(setting) for e in examples]
        result: dict = {}
        logits = self.logits(examples, given)
        probs = [self.bundle.calibration(z) for z in logits]
        outcomes = [int(y >= 1) for e in examples for y in e.labels]
        result.update(ranking_metrics(logits, examples))
        result["ece"] = metrics.expected_calibration_error(np.concatenate(probs), outcomes)
        result["abstention_accuracy"] = metrics.abstention_accuracy(
            probs, [e.labels for e in examples], self.bundle.threshold
        )
        result["pairs"] = int(sum(len(z) for z in logits))
        return result


def fit_tfidf(examples: Sequence[SugarExample]) -> TfidfVectorizer:
    """The TF-IDF baseline's vocabulary and weights, from requests, statements and candidates."""
    return TfidfVectorizer().fit([t for e in examples for t in (e.request, *e.statements, *e.candidates)])


def tfidf_scores(vectorizer: TfidfVectorizer, examples: Sequence[SugarExample], setting: str) -> list:
    """TF-IDF cosine between (request + statements) and each candidate."""
    out = []
    for e in examples:
        query = vectorizer.transform([" ".join([e.request, *e.statements_for(setting)])])
        cands = vectorizer.transform(list(e.candidates))
        out.append((cands @ query.T).toarray().ravel())
    return out


def markdown(results: dict, *, title: str) -> str:
    """The results table, the TF-IDF rows and the published numbers."""
    lines = [
        f"# {title}",
        "",
        "P@1, nDCG@3 and MRR on examples with a bad candidate (the paper's protocol); ECE and abstention",
        "accuracy over all examples of the split, with the model's calibration and default threshold.",
        "",
        "| input | P@1 | nDCG@3 | MRR | ECE | abstention acc. |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results["model"].items():
        lines.append(
            f"| {name} | {r['precision_at_1']:.3f} | {r['ndcg_at_3']:.3f} | {r['mrr']:.3f} | {r['ece']:.3f} "
            f"| {r['abstention_accuracy']:.3f} |"
        )
    lines += [
        "",
        "TF-IDF reference (cosine of request + statements to candidate, fitted on the train split):",
        "",
    ]
    lines += ["| input | P@1 | nDCG@3 | MRR |", "| --- | --- | --- | --- |"]
    for name, r in results["tfidf"].items():
        lines.append(f"| {name} | {r['precision_at_1']:.3f} | {r['ndcg_at_3']:.3f} | {r['mrr']:.3f} |")
    lines += ["", "Published (SUGAR paper, 5-fold cross-validation, u + all 12 statements):", ""]
    lines += ["| ranker | P@1 | nDCG@3 |", "| --- | --- | --- |"]
    lines += [f"| {name} | {p:.3f} | {n:.3f} |" for name, (p, n) in PUBLISHED.items()]
    lines += ["", f"Data: {ATTRIBUTION}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="model directory (metadata.json, ONNX, tokenizer)")
    p.add_argument("--data", required=True, help="SUGAR-format JSONL")
    p.add_argument(
        "--split-file",
        default=None,
        help="split.json of the training run (default: re-derive the split from the model's split seed)",
    )
    p.add_argument("--all", action="store_true", help="evaluate every example of --data (no split)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="pairs per ONNX call (default: the model's serving sub-batch, else 16)",
    )
    p.add_argument("--split", default="test", choices=("train", "dev", "test"))
    p.add_argument(
        "--group-by",
        default="example",
        choices=GROUPINGS,
        help="how the model's training split SUGAR (ranker convert sugar --group-by): by example, or by "
        "request text (the split then holds requests the model never trained on)",
    )
    p.add_argument(
        "--ranker-file", default=None, help="score with this ONNX graph instead (e.g. the fp32 export)"
    )
    p.add_argument("--rows", default=None, help="comma-separated row names to run (default: all)")
    p.add_argument(
        "--out-md", default=None, help="markdown report path (default: beside the model, eval-<split>.md)"
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--record", action="store_true", help="store results in metadata.json")
    add_backend_arguments(p)
    args = p.parse_args(argv)

    examples = load_sugar(args.data)
    bundle = load_bundle(args.model).for_runtime(scoring_runtime(args))
    train = examples
    if not args.all:
        if args.split_file:
            split = json.loads(Path(args.split_file).read_text())
        elif "split_seed" not in bundle.metadata.get("training_data", {}):
            # A ranking-data run (dialogue_ranker.training.train): the evaluation CLI's group split.
            parts = {e.index: group_split(sugar_group(e, args.group_by)) for e in examples}
            split = {
                name: [i for i, part in parts.items() if part == name] for name in ("train", "dev", "test")
            }
        else:
            split = split_indices(examples, seed=int(bundle.metadata["training_data"]["split_seed"]))
        train = select(examples, split["train"])
        examples = select(examples, split[args.split])
    evaluator = Evaluator(
        bundle,
        ranker_file=Path(args.ranker_file) if args.ranker_file else None,
        threads=args.threads,
        batch_size=args.batch_size,
        backend=args.backend,
        precision=args.precision,
        weights=args.openvino_weights,
    )
    wanted = set(args.rows.split(",")) if args.rows else None
    results: dict = {
        "model": {},
        "tfidf": {},
        "examples": len(examples),
        "split": args.split,
        "model_id": runtime_label(bundle, args),
    }
    started = time.time()
    vectorizer = fit_tfidf(train)
    for name, setting, with_tfidf in ROWS:
        if wanted and setting not in wanted and name not in wanted:
            continue
        results["model"][name] = evaluator.evaluate(examples, setting)
        if with_tfidf:
            results["tfidf"][name] = ranking_metrics(tfidf_scores(vectorizer, examples, setting), examples)
        print(f"{name}: {json.dumps(results['model'][name])}", flush=True)
    results["seconds"] = round(time.time() - started, 1)
    print(json.dumps(results, indent=2))
    out_md = Path(args.out_md or Path(args.model) / f"eval-{args.split}.md")
    out_md.write_text(
        markdown(
            results,
            title=f"{results['model_id']} on SUGAR, {args.split} split ({len(examples)} examples)",
        )
    )
    print(f"wrote {out_md}")
    if args.record:
        record(Path(args.model), results)
    return results


def record(model_dir: Path, results: dict) -> None:
    """Store the results under ``metrics`` in metadata.json (``ranker card`` renders them)."""
    path = model_dir / "metadata.json"
    metadata = json.loads(path.read_text())
    split = results["split"]
    for name, r in results["model"].items():
        metadata["metrics"][f"{split}: {name}"] = {**r, "ece_after": r["ece"]}
    for name, r in results["tfidf"].items():
        metadata["metrics"][f"{split}: TF-IDF, {name}"] = r
    path.write_text(json.dumps(metadata, indent=2) + "\n")


if __name__ == "__main__":
    main()
