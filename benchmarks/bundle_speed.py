"""Requests per second of several model bundles' graphs, side by side on the same requests.

    python -m benchmarks.bundle_speed models/dialogue-minilm-l6 build/other-bundle

Each bundle scores the same dev requests as the service scores them (its own encoder, one
sequence per ONNX Runtime call, two threads), in alternating rounds so that a slow spell of the
machine falls on every bundle alike; the median round is printed with its ratio to the first
bundle. Two request kinds: situated SUGAR requests with at least 8 statements and 3 candidates,
and Topical-Chat contexts with 10 candidates (no statements). A bundle with the last-turn view
(``views``) scores a multi-turn request's other views too (its last turn alone, its replies'
prior), as the service does; ``--without-views`` adds a row for each such bundle scored with one
view, so the views' cost is measured side by side:

    python -m benchmarks.bundle_speed models/dialogue-minilm-l6 --without-views

``--backends onnx,openvino`` times each bundle on each runtime (OpenVINO at ``--precision``, by
default bf16 where the CPU has native bf16, as ``--backend auto`` would try it), so that two graphs
of different kinds (int8 against fp16 weights) are compared on the runtime the service would pick:

    python -m benchmarks.bundle_speed runs/model-2.10.0 models/dialogue-minilm-l6 --backends onnx,openvino

Figures move 15-25% between runs on this machine: compare ratios from one run, not figures across
runs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from dialogue_ranker.data.ranking_data import RankingList, read_lists
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.evaluation.scoring import score_sequences, session, view_sequences
from dialogue_ranker.serving.model_bundle import load_bundle


def dev_sample(path: Path, count: int, *, min_statements: int = 0) -> list[RankingList]:
    """A seeded sample of a ranking-data file's dev lists."""
    lists = [
        x for x in read_lists(path) if group_split(x.group) == "dev" and len(x.situations) >= min_statements
    ]
    return random.Random(0).sample(lists, min(count, len(lists)))


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundles", nargs="+", type=Path, help="model directories; the first is the reference")
    p.add_argument(
        "--data", type=Path, default=Path("runs/data"), help="where training.convert wrote its files"
    )
    p.add_argument("--requests", type=int, default=120)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--without-views", action="store_true", help="also time each last-turn-view bundle with one view"
    )
    p.add_argument("--backends", default="onnx", help="runtimes, comma-separated: onnx, openvino")
    p.add_argument("--precision", default="auto", help="OpenVINO's precision: auto, bf16 or f32")
    args = p.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    kinds = {
        "situated, 3 candidates": dev_sample(args.data / "sugar.jsonl", args.requests, min_statements=8),
        "open chat, 10 candidates": dev_sample(args.data / "topical-chat.jsonl", args.requests),
    }
    graphs = []  # (row name, session, encoder, view weights)
    for path in args.bundles:
        bundle = load_bundle(path)
        encoder = bundle.pair_encoder()
        for backend in backends:
            sess = session(bundle.ranker.path, backend=backend, precision=args.precision)
            name = str(path) if backends == ["onnx"] else f"{path} ({backend})"
            graphs.append((name, sess, encoder, bundle.views))
            if args.without_views and bundle.views.adds_views:
                graphs.append((f"{name}, one view", sess, encoder, 0.0))
    results: dict[str, dict[str, float]] = {}
    for kind, lists in kinds.items():
        rounds: dict[str, list[float]] = {name: [] for name, *_ in graphs}
        # Each bundle's own encoding (a similarity bundle has a second sequence; a multi-turn request
        # under the last-turn view, a second view's sequences), once.
        encoded = {
            name: [[s for view in view_sequences(encoder, x, weight) for s in view] for x in lists]
            for name, _, encoder, weight in graphs
        }
        for _ in range(args.rounds):
            for name, sess, encoder, _ in graphs:
                requests = encoded[name]
                score_sequences(sess, encoder, requests[:10])  # warm-up
                started = time.perf_counter()
                score_sequences(sess, encoder, requests)
                rounds[name].append(len(requests) / (time.perf_counter() - started))
        results[kind] = {name: statistics.median(values) for name, values in rounds.items()}
        reference = results[kind][graphs[0][0]]
        print(f"{kind} ({len(lists)} dev requests, median of {args.rounds} rounds):")
        for name, value in results[kind].items():
            print(f"  {name}: {value:.1f} requests/s ({value / reference:.2f}x)")
    return results


if __name__ == "__main__":
    main()
