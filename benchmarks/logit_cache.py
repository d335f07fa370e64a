"""What the logit cache saves: the service with and without it, side by side on multi-turn requests.

    python -m benchmarks.logit_cache [--model models/dialogue-minilm-l6] [--requests 40] [--rounds 3]

Two real ``ranker serve`` processes on loopback, one with ``--ranking.logit-cache-entries 0``
and one with the default cache, take the same requests in alternating rounds (a slow spell of the
machine falls on both), 4 clients at a time. Three kinds of multi-turn request, each from
Topical-Chat dev contexts (``runs/data/topical-chat.jsonl``, written by ``dialogue_ranker.training.convert``):

- new replies every turn: the list's own 10 candidates, as a socialbot's neural generators give
  (nothing repeats: the cache's cost, not its gain);
- a fixed set of replies: 10 of the same 30 replies for every context, as an agent's action list
  or a template generator gives (each reply's prior view is computed once);
- each request sent twice: a client retrying the same turn (every request once, then again).

Every kind and round has contexts of its own, so only what the kind itself repeats is kept.
Prints requests/s (median round), the ratio with the cache to without, and the share of the
logits the cache answered. Figures move 15-25% between runs here: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.service_load import REPO_ROOT, free_port, load, start_server
from dialogue_ranker.data.ranking_data import RankingList, read_lists
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.serving.model_bundle import load_bundle

CLIENTS = 4
POOL = 30


def body(x: RankingList, candidates: list[str]) -> dict[str, Any]:
    context = [{"speaker": t.speaker, "text": t.text} for t in x.context]
    return {"context": context, "candidates": candidates}


def workloads(lists: list[RankingList], per_round: int, rounds: int) -> dict[str, list[list[dict[str, Any]]]]:
    """Each kind's requests, one list per round (the rounds' contexts do not overlap)."""
    rng = random.Random(0)
    pool = [x.candidates[0].text for x in lists[-POOL:]]
    kinds: dict[str, list[list[dict[str, Any]]]] = {"new replies": [], "fixed replies": [], "sent twice": []}
    parts = iter(lists[i : i + per_round] for i in range(0, len(lists) - POOL, per_round))
    for _ in range(rounds):
        kinds["new replies"].append([body(x, [c.text for c in x.candidates]) for x in next(parts)])
        kinds["fixed replies"].append([body(x, rng.sample(pool, 10)) for x in next(parts)])
        half = next(parts)[: per_round // 2]
        kinds["sent twice"].append([body(x, [c.text for c in x.candidates]) for x in half] * 2)
    return kinds


def cache_lookups(url: str, model: str) -> tuple[float, float]:
    """(hits, misses) counted so far by a service (prometheus_client's parser reads /metrics)."""
    counts = {"hit": 0.0, "miss": 0.0}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for sample in family.samples:
            if sample.name == "ranker_logit_cache_lookups_total" and sample.labels.get("model") == model:
                counts[sample.labels["result"]] = sample.value
    return counts["hit"], counts["miss"]


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    p.add_argument("--data", type=Path, default=REPO_ROOT / "runs" / "data" / "topical-chat.jsonl")
    p.add_argument("--requests", type=int, default=40, help="requests of each kind in each round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    args = p.parse_args(argv)
    if not args.data.is_file():
        raise SystemExit(f"{args.data} is missing: ranker convert topical-chat ... writes it")
    lists = [x for x in read_lists(args.data) if group_split(x.group) == "dev" and len(x.context) > 1]
    random.Random(0).shuffle(lists)
    kinds = workloads(lists, args.requests, args.rounds)
    model = load_bundle(args.model).name
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    try:
        for name, entries in (("without cache", 0), ("with cache", 65536)):
            port = free_port()
            process = start_server(args.model, port, args.threads, [], logit_cache_entries=entries)
            servers[name] = (process, f"http://127.0.0.1:{port}")
        rates: dict[str, dict[str, list[float]]] = {k: {s: [] for s in servers} for k in kinds}
        answered: dict[str, list[float]] = {k: [] for k in kinds}
        warm_up = [body(x, [c.text for c in x.candidates]) for x in lists[-POOL - 8 : -POOL]]
        for _, url in servers.values():  # both warm, on contexts (and replies) no round uses
            asyncio.run(load(url, warm_up, 2))
        for r in range(args.rounds):
            for kind, rounds in kinds.items():
                order = list(servers.items())
                for server, (_, url) in order if r % 2 == 0 else order[::-1]:  # each goes first in turn
                    before = cache_lookups(url, model)
                    pairs_s, latencies, failed = asyncio.run(load(url, rounds[r], CLIENTS))
                    if failed:
                        raise SystemExit(f"{server}: {failed} requests failed")
                    per_request = statistics.mean(len(b["candidates"]) for b in rounds[r])
                    rates[kind][server].append(pairs_s / per_request)
                    if server == "with cache":
                        hits, misses = (a - b for a, b in zip(cache_lookups(url, model), before, strict=True))
                        answered[kind].append(hits / (hits + misses))
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=30)
    print(f"{args.model} ({model}), {args.rounds} rounds of {args.requests} requests, {CLIENTS} clients")
    print("| requests | without cache (req/s) | with cache (req/s) | ratio | logits from the cache |")
    print("| --- | --- | --- | --- | --- |")
    out = {}
    for kind in kinds:
        off, on = (statistics.median(rates[kind][s]) for s in servers)
        share = statistics.mean(answered[kind])
        out[kind] = {"without": off, "with": on, "ratio": on / off, "answered": share}
        print(f"| {kind} | {off:.1f} | {on:.1f} | {on / off:.2f}x | {share:.0%} |")
    return out


if __name__ == "__main__":
    main()
