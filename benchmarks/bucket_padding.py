"""Length buckets for the Triton backend: padding paid vs batching made possible, per bucket list.

Triton's dynamic batcher merges only requests of equal shape; the gateway pads pairs to length
buckets so that concurrent requests meet on equal shapes. For the benchmark's SUGAR-like requests
(the ranker's sequences), this prints per bucket list:

- padding: padded tokens / real tokens - 1 (extra compute; the model's cost is close to linear in
  tokens at these lengths, measured below with the raw ONNX Runtime session);
- calls: Triton requests per gateway request (pairs of one bucket go together);
- shapes in 16: distinct sequence lengths among the calls of 16 concurrent requests (fewer means
  more of them can share a Triton batch; 1 is perfect merging).

Runs in seconds and needs no server:

    .venv/bin/python benchmarks/bucket_padding.py --model models/dialogue-minilm-l6
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import REPO_ROOT, make_requests  # noqa: E402

from dialogue_ranker.serving.batching.direct import bucket_length  # noqa: E402
from dialogue_ranker.serving.model_bundle import load_bundle  # noqa: E402
from dialogue_ranker.serving.tokenization import Turn  # noqa: E402

SCHEMES: dict[str, tuple[int, ...]] = {
    "none (longest pair)": (),
    "32,64,128,256": (32, 64, 128, 256),
    "every 32 to 256": tuple(range(32, 257, 32)),
    "16, every 32 to 256": (16, *range(32, 257, 32)),
    "every 16 to 256": tuple(range(16, 257, 16)),
    "256 only": (256,),
}


def calls_of(lengths: list[int], buckets: tuple[int, ...], max_length: int) -> list[tuple[int, int]]:
    """(padded length, pairs) of each call for one request, as DirectScorer forms them."""
    if not buckets:
        return [(max(lengths), len(lengths))]
    capped = (*(b for b in buckets if b < max_length), max_length)
    groups: dict[int, int] = {}
    for n in lengths:
        bucket = bucket_length(n, capped)
        groups[bucket] = groups.get(bucket, 0) + 1
    return sorted(groups.items())


def report(name: str, per_request: list[list[int]], max_length: int, seed: int = 0) -> None:
    print(f"\n{name} pairs: mean {statistics.mean(n for r in per_request for n in r):.0f} tokens")
    print(f"{'buckets':>22} {'padding':>8} {'calls':>6} {'shapes in 16':>13}")
    rng = random.Random(seed)
    for label, buckets in SCHEMES.items():
        calls = [calls_of(lengths, buckets, max_length) for lengths in per_request]
        real = sum(sum(r) for r in per_request)
        padded = sum(length * pairs for request in calls for length, pairs in request)
        windows = [rng.sample(calls, 16) for _ in range(200)] if len(calls) >= 16 else [calls]
        shapes = statistics.mean(len({length for request in w for length, _ in request}) for w in windows)
        per_call = statistics.mean(len(c) for c in calls)
        print(f"{label:>22} {padded / real - 1:>8.0%} {per_call:>6.2f} {shapes:>13.1f}")


def ms_per_1k_tokens(model: Path, lengths: tuple[int, ...], batch: int = 16, repeats: int = 5) -> None:
    bundle = load_bundle(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(bundle.ranker.path), options, providers=["CPUExecutionProvider"])
    print(f"\nraw ONNX Runtime, 1 thread, batch {batch}: ms per 1k tokens by padded length")
    for length in lengths:
        ids = np.full((batch, length), 1000, dtype=np.int64)
        feeds = {n: ids if n == "input_ids" else np.ones_like(ids) for n in bundle.ranker.input_names}
        session.run(None, feeds)
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            session.run(None, feeds)
            times.append(time.perf_counter() - started)
        print(f"{length:>6} {min(times) * 1000 / (batch * length / 1000):>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    bundle = load_bundle(args.model)
    requests = make_requests(args.requests)
    encoder = bundle.pair_encoder()
    ranker = [
        [
            len(p)
            for p in encoder.encode_request([Turn("user", r["context"])], r["situations"], r["candidates"])
        ]
        for r in requests
    ]
    report("ranker", ranker, bundle.ranker.max_length)
    ms_per_1k_tokens(args.model, (64, 128, 256))


if __name__ == "__main__":
    main()
