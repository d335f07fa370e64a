"""Response banks: start-up embedding (cold and from the cache), memory, search, and a bank request's cost.

    python -m benchmarks.bench_banks [--bank-size 100000] [--search-size 120000]
        [--request-bank 10000] [--retrieve-k 50] [--requests 20] [--backend auto]

On a synthetic bank of made-up replies (distinct sentences from a small grammar, as long as
socialbot replies):

1. start-up: ``ranker serve`` with no bank, then with a ``--bank-size`` bank and an empty cache
   (its vectors computed), then again (read from the cache): seconds to ``/readyz``, the bank's
   own seconds (``GET /v1/banks``), and the server's resident memory once ready;
2. search: ``--search-size`` int8 rows searched for the nearest ``--retrieve-k`` (in this
   process, numpy's own threads), and one query embedded by the retrieval encoder (one thread, as
   the service's query session on 2 cores);
3. a three-turn request against a ``--request-bank`` bank beside the same request sending the
   candidates the bank gave it explicitly, alternating, one client, the logit cache off (both
   compute every logit): p50 of each and their ratio.

Run it on a quiet machine: the cold start of a 100,000-response bank embeds for minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.service_load import REPO_ROOT, free_port, wait_http
from dialogue_ranker.serving.banks.encoder import TextEncoder
from dialogue_ranker.serving.banks.index import ExactIndex, QuantizedVectors
from dialogue_ranker.serving.model_bundle import find_retriever, load_retriever
from dialogue_ranker.serving.settings import DEFAULT_MODEL_DIR

OPENERS = "Sure, Honestly, Well, Oh, I think, To be fair, Actually, Ha, Right, You know, Hmm,".split(",")
SUBJECTS = (
    "my sister|the new neighbour|our team|this city|the old library|my favourite band|the museum|"
    "the kitchen|my dog|that movie|the weekend trip|the coffee shop|the garden|our teacher|the game"
).split("|")
VERBS = (
    "really loves|never talks about|keeps reminding me of|was built around|made me think of|"
    "sounds a lot like|is always full of|got me into|reminds everyone of|has nothing to do with"
).split("|")
OBJECTS = (
    "jazz records from the sixties|rainy afternoons|fresh bread|long walks by the river|science fiction|"
    "board games|spicy food|old photographs|the mountains in winter|street art|early mornings|"
    "football on Sundays|classical music|tiny houses|strong tea|the ocean|crossword puzzles|"
    "second-hand books|bicycles|homemade pizza"
).split("|")
CLOSERS = ["", " What about you?", " Do you agree?", " It is a long story.", " Isn't that funny?"]
CONTEXTS = [
    "Do you like jazz?", "What did you do last weekend?", "I just adopted a puppy!", "Any good books lately?",
    "It is raining again here.", "Do you cook at home?", "What music do you listen to?",
    "I am planning a trip to the mountains.", "My sister started a bakery.", "Do you play any games?",
]  # fmt: skip


def synthetic_bank(size: int, seed: int = 0) -> list[str]:
    """``size`` distinct replies from the grammar (up to 82,500 combinations, then numbered variants)."""
    parts = [OPENERS, SUBJECTS, VERBS, OBJECTS, CLOSERS]
    combinations = int(np.prod([len(p) for p in parts]))
    order = random.Random(seed).sample(range(combinations), min(size, combinations))
    texts = []
    for n in range(size):
        code, words = order[n % len(order)], []
        for part in parts:
            code, index = divmod(code, len(part))
            words.append(part[index])
        suffix = f" ({n // len(order)})" if n >= len(order) else ""
        texts.append(f"{words[0].strip()} {words[1]} {words[2]} {words[3]}.{words[4]}{suffix}")
    return texts


def write_bank(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path


def rss_mb(pid: int) -> float:
    """A process's resident memory (VmRSS), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve(args: argparse.Namespace, extra: list[str]) -> tuple[subprocess.Popen, str, float]:
    """``ranker serve`` on a free port; the process, its URL and the seconds it took to be ready."""
    port = free_port()
    command = [
        sys.executable, "-m", "dialogue_ranker.serving", "--model", str(args.model), "--port", str(port),
        "--backend", args.backend, "--log-level", "warning", "--ranking.logit-cache-entries", "0", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    # A cold 100,000-response bank embeds for minutes on 2 cores before /readyz says ready.
    wait_http(f"{url}/readyz", process, "the service", timeout_s=1800)
    return process, url, time.perf_counter() - started


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=30)


def startup(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """Ready time, bank seconds and resident memory: no bank, cold, from the cache."""
    bank = write_bank(work / "startup.jsonl", synthetic_bank(args.bank_size))
    rows = []
    for label, extra in (
        ("no bank", []),
        ("cold (computed)", ["--bank", f"bench={bank}", "--banks.cache-dir", str(work / "cache")]),
        ("from the cache", ["--bank", f"bench={bank}", "--banks.cache-dir", str(work / "cache")]),
    ):
        process, url, ready_s = serve(args, extra)
        try:
            banks = httpx.get(f"{url}/v1/banks", timeout=10).json()["data"]
            rows.append({
                "start": label, "ready_s": ready_s, "rss_mb": rss_mb(process.pid),
                "bank_s": banks[0]["embed_seconds"] if banks else None,
                "vectors_mb": banks[0]["memory_bytes"] / 1e6 if banks else None,
                "from_cache": banks[0]["from_cache"] if banks else None,
            })  # fmt: skip
        finally:
            stop(process)
    return rows


def search(args: argparse.Namespace) -> dict[str, float]:
    """Median ms of one query's embedding and of one search over ``--search-size`` rows."""
    rows = np.random.default_rng(0).standard_normal((args.search_size, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    index = ExactIndex(QuantizedVectors.from_float(rows))
    encoder = TextEncoder(load_retriever(find_retriever(args.model) or args.model), query_threads=1)
    encoder.start()
    embed_ms, search_ms = [], []
    for n in range(args.search_queries):
        started = time.perf_counter()
        query = encoder.embed([CONTEXTS[n % len(CONTEXTS)]])[0]
        embedded = time.perf_counter()
        index.search(query, args.retrieve_k)
        embed_ms.append((embedded - started) * 1000)
        search_ms.append((time.perf_counter() - embedded) * 1000)
    return {
        "rows": args.search_size,
        "embed_ms": statistics.median(embed_ms[1:]),
        "search_ms": statistics.median(search_ms[1:]),
        "vectors_mb": index.vectors.nbytes / 1e6,
    }


def explicit_twin(context: str | list[dict[str, str]], answer: dict[str, Any]) -> dict[str, Any]:
    """The bank request's retrieved responses sent as candidates, in retrieval order."""
    drawn = sorted(answer["ranking"], key=lambda r: -r["retrieval_score"])
    return {"context": context, "candidates": [{"id": r["id"], "text": r["text"]} for r in drawn]}


def request_cost(args: argparse.Namespace, work: Path) -> dict[str, float]:
    """p50 ms of a bank request and of the same request with the bank's candidates sent explicitly."""
    texts = synthetic_bank(args.request_bank, seed=1)
    bank = write_bank(work / "requests.jsonl", texts)
    by_id = {f"r{i}": t for i, t in enumerate(texts)}
    process, url, _ = serve(args, ["--bank", f"bench={bank}", "--banks.cache-dir", str(work / "cache")])
    timings: dict[str, list[float]] = {"bank": [], "explicit": []}
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            pairs = []
            for n in range(args.requests):
                last = CONTEXTS[n % len(CONTEXTS)] + " " * (n // len(CONTEXTS))
                # Three turns, as a dialog manager sends them: the query mixes the last two with
                # the last one (two texts embedded), and the ranker reads its last-turn view too.
                context = [{"speaker": "user", "text": "Hi there!"},
                           {"speaker": "bot", "text": "Hello! How is your day going?"},
                           {"speaker": "user", "text": last}]  # fmt: skip
                body = {"context": context, "bank": "bench", "retrieve_k": args.retrieve_k}
                body["mask_mode"] = "off"  # the same candidates scored both ways, none masked
                answer = client.post("/rank", json=body).json()  # warm-up, and what the bank gives
                for r in answer["ranking"]:
                    r["text"] = by_id[r["id"]]
                pairs.append((body, {**explicit_twin(context, answer), "mask_mode": "off"}))
            for body, twin in pairs:  # alternating: a slow spell of the machine falls on both
                for kind, request in (("bank", body), ("explicit", twin)):
                    started = time.perf_counter()
                    response = client.post("/rank", json=request)
                    response.raise_for_status()
                    timings[kind].append((time.perf_counter() - started) * 1000)
    finally:
        stop(process)
    bank_ms, explicit_ms = statistics.median(timings["bank"]), statistics.median(timings["explicit"])
    return {"responses": args.request_bank, "bank_ms": bank_ms, "explicit_ms": explicit_ms,
            "ratio": bank_ms / explicit_ms}  # fmt: skip


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")]
        return names[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown CPU"


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    machine = f"{cpu_name()}, {os.cpu_count()} CPUs"
    print(f"banks benchmark: model {args.model}, --backend {args.backend}, {machine}")
    print(f"\nstart-up with a {args.bank_size:,}-response bank:")
    print(f"  {'start':<18} {'ready s':>8} {'bank s':>8} {'RSS MB':>8} {'vectors MB':>11}")
    for row in results["startup"]:
        bank_s = "-" if row["bank_s"] is None else f"{row['bank_s']:.2f}"
        vectors = "-" if row["vectors_mb"] is None else f"{row['vectors_mb']:.1f}"
        print(f"  {row['start']:<18} {row['ready_s']:>8.2f} {bank_s:>8} {row['rss_mb']:>8.0f} {vectors:>11}")
    s = results["search"]
    print(f"\nsearch of {s['rows']:,} responses (int8, {s['vectors_mb']:.1f} MB), k={args.retrieve_k}: "
          f"{s['search_ms']:.1f} ms; the query's embedding, one thread: {s['embed_ms']:.1f} ms (medians)")
    r = results["requests"]
    print(f"\na three-turn request against a {r['responses']:,}-response bank (retrieve_k "
          f"{args.retrieve_k}) and the same candidates sent explicitly, {args.requests} each, "
          "alternating, one client, logit cache off:")
    print(f"  bank p50 {r['bank_ms']:.1f} ms, explicit p50 {r['explicit_ms']:.1f} ms, ratio {r['ratio']:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR, help="a bundle with a retriever/")
    parser.add_argument("--backend", default="auto", help="the ranker's --backend")
    parser.add_argument("--bank-size", type=int, default=100_000, help="responses of the start-up bank")
    parser.add_argument("--search-size", type=int, default=120_000, help="rows searched in process")
    parser.add_argument("--search-queries", type=int, default=50)
    parser.add_argument("--request-bank", type=int, default=10_000, help="responses of the requests' bank")
    parser.add_argument("--retrieve-k", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20, help="requests of each kind")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-banks-") as work:
        results = {
            "startup": startup(args, Path(work)),
            "search": search(args),
            "requests": request_cost(args, Path(work)),
        }
    report(results, args)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
