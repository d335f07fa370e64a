"""One report, same inputs: a typical user's CrossEncoder, the raw session, the service, the limit.

Runs one after another, on the same pairs, with the same thread count, and writes a markdown
table (pairs/s, request p50/p95/p99, share of the theoretical FP32 limit), a PNG plot and the
machine's description:

1. sentence-transformers ``CrossEncoder(<fp32 checkpoint>).predict(pairs, batch_size=...)`` in
   PyTorch, fed the segment-A / segment-B texts the service's PairEncoder builds (its token ids
   are checked against the service's, its logits against the fp32 ONNX graph when one exists);
2. raw ONNX Runtime sessions: the fp32 graph of the same weights (when built) and the shipped
   int8 model;
3. the service as a real ``ranker serve`` process on loopback, and with ``--triton`` the
   gateway in front of a local Triton (the load and server code of ``bench_gateway.py``);
4. the FP32 limit: matrix-product FLOPs per pair at the measured mean length against the peak
   FP32 FLOP/s of the cores used (see ``compute_limit.py``).

Inputs: the SUGAR test split (all 12 statements, 3 candidates per request) when
``../shared/data/sugar/sugar.jsonl`` exists, else the built-in sample set of ``bench_gateway.py``.
For a shared-prefix model (one sequence per request) the CrossEncoder reads the same requests as
pairs, laid out by the pair encoder; without an fp32 pair checkpoint it is the packaged
MiniLM-L6 with a fresh one-logit head (same shape and speed; its logits are not compared). The
report ends with the service's ratios to the raw session and to the CrossEncoder, and a lone
request's p50 through the service and on the raw shipped session measured in turns (request by
request, so both see the same machine; the table's rows are phases minutes apart).

    .venv/bin/python benchmarks/report.py                 # a few minutes on 2 cores
    .venv/bin/python benchmarks/report.py --quick         # about a minute, smoke only
    .venv/bin/python benchmarks/report.py --triton --out benchmarks/results/report.md
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import (  # noqa: E402  (also puts the repository root on sys.path)
    REPO_ROOT,
    SUGAR,
    LoadRow,
    bench_service,
    bench_triton,
    encode_all,
    make_requests,
    make_session,
)
from compute_limit import (  # noqa: E402
    ModelDims,
    describe_limit,
    describe_machine,
    flops_per_pair,
    peak_fp32,
)
from report_output import Point, Section, markdown_table, write_report  # noqa: E402

from dialogue_ranker.data.machine import read_cpu  # noqa: E402
from dialogue_ranker.serving.model_bundle import ModelBundle, load_bundle  # noqa: E402
from dialogue_ranker.serving.tokenization import DEFAULT_SPEAKER, EncodedPair, PairEncoder, Turn, turn_text  # noqa: E402

# Where `make model` leaves the shipped model's run and its export build (RUN ?= runs/sugar).
DEFAULT_CHECKPOINT = REPO_ROOT / "runs" / "sugar" / "ranker"
DEFAULT_FP32_ONNX = REPO_ROOT / "build" / "sugar" / "ranker.fp32.onnx"
# Where `make model` leaves a shared-prefix model's fp32 graph (RUN ?= runs/ranker).
SHARED_PREFIX_FP32_ONNX = REPO_ROOT / "build" / "ranker" / "ranker.fp32.onnx"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "report.md"
BUILTIN_REQUESTS = 200
#: Lone requests measured in turns with the raw session, and the pause after each call.
LONE_REQUESTS = 100
PAUSE_S = 0.05
QUICK_REQUESTS = 24
CROSS_ENCODER = "CrossEncoder fp32 (PyTorch)"
ORT_FP32 = "raw ORT, fp32 graph"
ORT_INT8 = "raw ORT, shipped graph"
SERVICE = "service, embedded (HTTP)"
TRITON = "service -> Triton (HTTP, gRPC)"
VERSIONED = ("onnxruntime", "torch", "sentence-transformers", "transformers", "numpy")


class Unavailable(Exception):
    """A row cannot be measured here (a missing file or package); the message says which."""


#: A timed call: what to run, how many requests it answers, how many pairs it scores.
Call = tuple[Callable[[], Any], int, int]


@dataclass(frozen=True)
class Workload:
    """The requests as the service receives them, and their pairs as the service encodes them."""

    requests: list[dict[str, Any]]
    #: As the shipped model reads them: pairs, or a shared-prefix model's sequences.
    encoded: list[list[Any]]
    #: As a per-pair cross-encoder reads them (the CrossEncoder row).
    pairs_encoded: list[list[EncodedPair]]
    source: str

    @property
    def pairs(self) -> int:
        """(Request, candidate) pairs over all requests."""
        return sum(len(r) for r in self.pairs_encoded)

    @property
    def mean_tokens(self) -> float:
        """Mean real (unpadded) tokens per pair."""
        return sum(len(p) for r in self.pairs_encoded for p in r) / self.pairs

    @property
    def shipped_tokens_per_candidate(self) -> float:
        """Mean tokens the shipped model computes per candidate."""
        return sum(len(s) for r in self.encoded for s in r) / self.pairs


def load_workload(bundle: ModelBundle, limit: int | None) -> Workload:
    """The SUGAR test split (or the built-in sample set), at most ``limit`` requests."""
    if SUGAR.is_file():
        from dialogue_ranker.data.sugar import load_sugar, select, split_indices

        examples = load_sugar(SUGAR)
        seed = bundle.metadata.get("training_data", {}).get("split_seed")
        if bundle.shared_prefix:
            from dialogue_ranker.evaluation.domains import group_split

            examples = [e for e in examples if group_split(f"sugar-{e.index}") == "test"]
            source = "SUGAR test part of the group split"
        elif seed is None:
            source = f"SUGAR {SUGAR.name}, every example (the model records no split seed)"
        else:
            examples = select(examples, split_indices(examples, seed=int(seed))["test"])
            source = f"SUGAR test split (seed {seed})"
        requests = [
            {
                "context": e.request,
                "situations": list(e.statements),
                "candidates": list(e.candidates),
            }
            for e in examples
        ]
        source += ": one request per example, all 12 statements, default settings"
    else:
        requests = make_requests(limit or BUILTIN_REQUESTS)
        source = f"built-in sample set ({SUGAR} is absent): 12 statements, 3 to 10 candidates"
    requests = requests[:limit] if limit else requests
    encoder = pair_encoder(bundle)
    pairs = [
        encoder.encode_request([Turn("user", r["context"])], r["situations"], r["candidates"])
        for r in requests
    ]
    return Workload(requests, encode_all(bundle, requests), pairs, source)


def pair_encoder(bundle: ModelBundle) -> Any:
    """How a per-pair cross-encoder of the model's shape reads a request (256 tokens a pair)."""
    return (
        PairEncoder.from_file(bundle.tokenizer_path, max_length=256)
        if bundle.shared_prefix
        else bundle.pair_encoder()
    )


def pair_texts(request: dict[str, Any], pairs: Sequence[EncodedPair], *, sep_token: str) -> list[list[str]]:
    """The [segment A, segment B] texts whose tokenization is what PairEncoder built.

    Segment A is the speaker-tagged turn, then (when any survived truncation) a separator and
    the statements PairEncoder kept; segment B is the candidate. The tokenizer reads the
    separator's text as the special token, and tokenizing joined statements gives the ids of
    tokenizing them one by one (the pre-tokenizer splits on the spaces between them).
    """
    turn = turn_text(Turn(DEFAULT_SPEAKER, request["context"]))
    texts = []
    for candidate, pair in zip(request["candidates"], pairs, strict=True):
        statements = request["situations"][: pair.statements_kept]
        texts.append([" ".join([turn, sep_token, *statements]) if statements else turn, candidate])
    return texts


def in_groups(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def measure_calls(calls: Sequence[Call]) -> tuple[float, list[float], list[Any]]:
    """Pairs/s, per-request latencies (s) and outputs of calls run one after another.

    Every request of a call waits for the whole call, so each gets the call's duration.
    """
    calls[0][0]()  # warm-up: first-call allocations and thread-pool start are not throughput
    latencies: list[float] = []
    outputs = []
    busy_s, pairs = 0.0, 0
    for call, requests, call_pairs in calls:
        started = time.perf_counter()
        outputs.append(call())
        elapsed = time.perf_counter() - started
        busy_s += elapsed
        pairs += call_pairs
        latencies += [elapsed] * requests
    return pairs / busy_s, latencies, outputs


def bench_onnx(
    session: Any, bundle: ModelBundle, work: Workload, concurrency: Sequence[int], system: str
) -> tuple[list[Point], np.ndarray]:
    """Points per level and the first level's logits, in request order.

    A level of c runs the pairs of c requests per ``session.run``, padded beforehand.
    """
    encoder = bundle.pair_encoder()
    names = [i.name for i in session.get_inputs()]
    output = session.get_outputs()[0].name
    points, logits = [], None
    for level in concurrency:
        calls: list[Call] = []
        batches = []
        for group in in_groups(work.encoded, level):
            pairs = [p for request in group for p in request]
            batches.append(encoder.pad(pairs))
            feeds = batches[-1].as_feeds(names)
            calls.append((partial(session.run, [output], feeds), len(group), sum(p.outputs for p in pairs)))
        rate, latencies, outputs = measure_calls(calls)
        points.append(Point(system, level, rate, tuple(latencies)))
        if logits is None:
            logits = np.concatenate([b.readout(o[0]) for b, o in zip(batches, outputs, strict=True)])
        print(f"  {system}, {level}: {rate:.1f} pairs/s", flush=True)
    assert logits is not None
    return points, logits


def token_mismatches(model: Any, texts: list[list[str]], pairs: list[EncodedPair]) -> int:
    """Pairs whose CrossEncoder input ids or token types differ from PairEncoder's."""
    mismatched = 0
    for start in range(0, len(texts), 64):
        features = model.preprocess(texts[start : start + 64])
        for row, pair in enumerate(pairs[start : start + 64]):
            real = features["attention_mask"][row].bool()
            ids = features["input_ids"][row][real].tolist()
            types = features["token_type_ids"][row][real].tolist()
            mismatched += ids != pair.input_ids or types != pair.token_type_ids
    return mismatched


def bench_cross_encoder(
    checkpoint: Path, bundle: ModelBundle, work: Workload, concurrency: Sequence[int], threads: int
) -> tuple[list[Point], np.ndarray, int]:
    """Points per level, the first level's logits and the pairs tokenized unlike PairEncoder's.

    A level of c runs ``predict`` on the pairs of c requests as one batch; logits in request order.

    Raises:
        Unavailable: no checkpoint, or torch / sentence-transformers are not installed.
    """
    if not (checkpoint / "config.json").is_file():
        if not bundle.shared_prefix:
            raise Unavailable(f"no fp32 checkpoint at {checkpoint} (a per-pair bundle needs its own)")
        checkpoint = fresh_cross_encoder(REPO_ROOT / "build" / "cross-encoder-fresh-head")
    # A local checkpoint: loading it must not wait on the Hub (benchmark hosts are often offline).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        from sentence_transformers import CrossEncoder
    except ImportError as e:
        raise Unavailable(f"{e} (the dev extras have it)") from e
    torch.set_num_threads(threads)  # the same compute threads as ONNX Runtime's intra-op pool
    # Identity: predict's logits, not the sigmoid it applies by default to one-label models.
    model = CrossEncoder(
        str(checkpoint),
        device="cpu",
        max_length=pair_encoder(bundle).max_length,
        activation_fn=torch.nn.Identity(),
    )
    encoder = pair_encoder(bundle)
    sep = encoder.tokenizer.id_to_token(encoder.sep_id)
    assert sep is not None, "the tokenizer has no [SEP] token"
    texts = [pair_texts(r, e, sep_token=sep) for r, e in zip(work.requests, work.pairs_encoded, strict=True)]
    flat_pairs = [p for r in work.pairs_encoded for p in r]
    mismatched = token_mismatches(model, [t for r in texts for t in r], flat_pairs)
    points, logits = [], None
    for level in concurrency:
        calls: list[Call] = []
        for group in in_groups(texts, level):
            flat = [t for request in group for t in request]
            run = partial(model.predict, flat, batch_size=len(flat), show_progress_bar=False)
            calls.append((run, len(group), len(flat)))
        rate, latencies, outputs = measure_calls(calls)
        points.append(Point(CROSS_ENCODER, level, rate, tuple(latencies)))
        if logits is None:
            logits = np.concatenate([np.asarray(o).reshape(-1) for o in outputs])
        print(f"  {CROSS_ENCODER}, {level}: {rate:.1f} pairs/s", flush=True)
    del model
    gc.collect()
    assert logits is not None
    return points, logits, mismatched


def fresh_cross_encoder(path: Path) -> Path:
    """The packaged MiniLM-L6 with a fresh one-logit head: a CrossEncoder of the shipped model's shape."""
    if not (path / "config.json").is_file():
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from dialogue_ranker.training.backbone import backbone_dir

        model = AutoModelForSequenceClassification.from_pretrained(str(backbone_dir()), num_labels=1)
        model.save_pretrained(str(path))
        AutoTokenizer.from_pretrained(str(backbone_dir())).save_pretrained(str(path))
    return path


def bench_fp32(
    args: argparse.Namespace, bundle: ModelBundle, work: Workload
) -> tuple[list[Point], list[str]]:
    """The CrossEncoder and the fp32 graph, each when available, and their logit parity."""
    points: list[Point] = []
    notes: list[str] = []
    ce_logits = None
    try:
        ce_points, ce_logits, mismatched = bench_cross_encoder(
            args.checkpoint, bundle, work, args.concurrency, args.threads
        )
        points += ce_points
        notes.append(f"Token ids: {mismatched} of {work.pairs} CrossEncoder pairs differ from PairEncoder's.")
    except Unavailable as e:
        notes.append(f"CrossEncoder row left out: {e}.")
        print(notes[-1])
    if not args.fp32_onnx.is_file():
        notes.append(
            f"fp32 graph rows and logit parity left out: {args.fp32_onnx} is absent (ranker export)."
        )
        print(notes[-1])
        return points, notes
    session = make_session(args.fp32_onnx, args.threads)
    fp32_points, fp32_logits = bench_onnx(session, bundle, work, args.concurrency, ORT_FP32)
    points += fp32_points
    if ce_logits is not None and not bundle.shared_prefix:
        delta = float(np.max(np.abs(ce_logits - fp32_logits)))
        notes.append(f"CrossEncoder vs fp32 ONNX graph: max |Δ logit| = {delta:.2e} over {work.pairs} pairs.")
    return points, notes


def service_points(system: str, rows: Sequence[LoadRow]) -> list[Point]:
    # bench_gateway's load() reports [nan] when every request of a level failed.
    return [
        Point(system, clients, rate, tuple(x for x in latencies if not math.isnan(x)), failed)
        for clients, rate, latencies, failed in rows
    ]


@dataclass(frozen=True)
class LonePair:
    """A lone request's latency (s) through the service and on the raw session, measured in turns."""

    service: tuple[float, ...]
    raw: tuple[float, ...]

    def p50_ms(self) -> tuple[float, float]:
        """Median ms through the service and on the raw session."""
        return float(np.median(self.service)) * 1000, float(np.median(self.raw)) * 1000


async def _lone_turns(url: str, session: Any, bundle: ModelBundle, work: Workload, count: int) -> LonePair:
    """Each request alone through the service, then its sequence alone on the raw session, in turns.

    Phases measured minutes apart drift with the machine (other tenants, clock): two figures
    taken in turns, request by request, see the same machine. A pause after each call lets the
    threads of whichever ran last stop spinning before the other runs.
    """
    names = [i.name for i in session.get_inputs()]
    output = session.get_outputs()[0].name
    encoder = bundle.pair_encoder()
    service, raw = [], []
    async with aiohttp.ClientSession(url) as client:
        for request, encoded in list(zip(work.requests, work.encoded, strict=True))[:count]:
            feeds = encoder.pad(list(encoded)).as_feeds(names)
            started = time.perf_counter()
            async with client.post("/rank", json=request) as response:
                await response.read()
                assert response.status == 200, await response.text()
            service.append(time.perf_counter() - started)
            await asyncio.sleep(PAUSE_S)
            started = time.perf_counter()
            session.run([output], feeds)
            raw.append(time.perf_counter() - started)
            await asyncio.sleep(PAUSE_S)
    return LonePair(tuple(service), tuple(raw))


def bench_lone_in_turns(args: argparse.Namespace, bundle: ModelBundle, work: Workload) -> LonePair:
    """The service at its defaults and the raw shipped session, a lone request at a time, in turns."""
    session = make_session(bundle.ranker.path, args.threads)
    _, server, url = bench_service(args.model, 0, [], work.requests, [])
    try:
        return asyncio.run(_lone_turns(url, session, bundle, work, LONE_REQUESTS))
    finally:
        server.terminate()
        server.wait(timeout=30)


def bench_services(args: argparse.Namespace, work: Workload) -> tuple[list[Point], list[str]]:
    """The embedded service, then (``--triton``) the gateway in front of Triton; notes on gaps."""
    # The service at its defaults: workers and threads sized from the CPU quota (service/cpu.py).
    rows, server, _ = bench_service(args.model, 0, [], work.requests, args.concurrency)
    server.terminate()
    server.wait(timeout=30)
    points, notes = service_points(SERVICE, rows), []
    if args.triton and importlib.util.find_spec("pytriton") is None:
        notes.append("Triton rows left out: nvidia-pytriton is not installed (dev extras).")
    elif args.triton:
        for rows in bench_triton(args.model, args.threads, work.requests, args.concurrency).values():
            points += service_points(TRITON, rows)
    return points, notes


def ratio_lines(
    points: Sequence[Point], work: Workload, lone_turns: LonePair | None = None, clients: int = 16
) -> list[str]:
    """The service against the raw shipped session and the CrossEncoder, measured in this run."""
    by = {(p.system, p.concurrency): p for p in points}
    service = by.get((SERVICE, clients))
    lines = [
        f"- Tokens computed per candidate: {work.shipped_tokens_per_candidate:.1f} by the shipped model, "
        f"{work.mean_tokens:.1f} by a per-pair cross-encoder."
    ]
    if service is None:
        return lines
    raw = [p for p in points if p.system == ORT_INT8]
    if raw:
        best = max(raw, key=lambda p: p.pairs_per_s)
        lines.append(
            f"- Service at {clients} clients: {service.pairs_per_s:.1f} pairs/s = "
            f"**{service.pairs_per_s / best.pairs_per_s:.2f}x** the raw shipped session at its best "
            f"({best.pairs_per_s:.1f} pairs/s at concurrency {best.concurrency})."
        )
    ce = by.get((CROSS_ENCODER, clients))
    if ce is not None:
        lines.append(
            f"- Service at {clients} clients = **{service.pairs_per_s / ce.pairs_per_s:.2f}x** the "
            f"CrossEncoder at {clients} requests a call ({ce.pairs_per_s:.1f} pairs/s)."
        )
    lone, raw_lone = by.get((SERVICE, 1)), by.get((ORT_INT8, 1))
    if lone is not None and raw_lone is not None:
        a, b = lone.latency_ms(50), raw_lone.latency_ms(50)
        lines.append(
            f"- A lone request's p50, table rows (phases minutes apart): service {a:.1f} ms, raw session "
            f"{b:.1f} ms ({a - b:+.1f} ms)."
        )
    if lone_turns is not None:
        a, b = lone_turns.p50_ms()
        lines.append(
            f"- **A lone request's p50, measured in turns** ({len(lone_turns.service)} requests, each "
            f"through the service then on the raw session): service {a:.1f} ms, raw session {b:.1f} ms "
            f"(**{a - b:+.1f} ms**)."
        )
    return lines


def model_dims(args: argparse.Namespace, bundle: ModelBundle) -> ModelDims:
    """Shapes from the checkpoint's config.json, else from the fp32 graph, else the shipped graph."""
    if (args.checkpoint / "config.json").is_file():
        return ModelDims.from_config(args.checkpoint)
    return ModelDims.from_onnx(args.fp32_onnx if args.fp32_onnx.is_file() else bundle.ranker.path)


def method_section(work: Workload, bundle: ModelBundle) -> Section:
    return Section(
        "What each row measures",
        [
            f"- Inputs: {work.source}; {len(work.requests)} requests, {work.pairs} pairs, mean "
            f"{work.mean_tokens:.1f} tokens per pair; every concurrency level runs all of them (the "
            "service keeps no logits, `--ranking.logit-cache-entries 0`: each level computes them all).",
            "- **Concurrency c** for the CrossEncoder and the raw sessions: the pairs of c requests in "
            "one call (`predict(pairs, batch_size=len(pairs))`, `session.run`), calls one after "
            "another; each request's latency is its call's duration. This is what an ideal batcher "
            "with no overhead would run for c clients waiting at once.",
            "- **Concurrency c** for the service rows: c HTTP clients on loopback, each with one "
            "request (one example's candidates) in flight; latency is measured by the client.",
            "- Raw sessions time `session.run` only (padding done beforehand); the CrossEncoder's "
            "`predict` includes its tokenization; the service includes everything.",
            f"- The shipped graph is {bundle.metadata.get('ranker', {}).get('precision', 'unstated')}"
            f"; the service runs it {bundle.serving_sub_batch_pairs or 'any number of'} pair(s) per call "
            "for batch-invariant scores; the raw session batches as above, so it shows what batching "
            "would give.",
            "- Bold: each system's best pairs/s.",
        ],
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, help="fp32 HF checkpoint dir")
    parser.add_argument("--fp32-onnx", type=Path, default=DEFAULT_FP32_ONNX, help="fp32 graph, same weights")
    parser.add_argument("--requests", type=int, default=None, help="at most this many (default: all)")
    parser.add_argument("--concurrency", default=None, help="levels, comma-separated (default 1,4,16,64)")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    parser.add_argument("--threads", type=int, default=usable, help="compute threads for every system")
    parser.add_argument("--fma-units", type=int, default=2, help="FMA units per core, for the FP32 peak")
    parser.add_argument("--triton", action="store_true", help="add the gateway -> local Triton rows")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REQUESTS} requests, levels 1,4,16")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown report (plot beside it)")
    args = parser.parse_args(argv)
    args.requests = args.requests or (QUICK_REQUESTS if args.quick else None)
    levels = args.concurrency or ("1,4,16" if args.quick else "1,4,16,64")
    args.concurrency = sorted({int(c) for c in levels.split(",")})
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    bundle = load_bundle(args.model)
    if bundle.shared_prefix and args.fp32_onnx == DEFAULT_FP32_ONNX:
        args.fp32_onnx = SHARED_PREFIX_FP32_ONNX
    work = load_workload(bundle, args.requests)
    print(f"{work.source}: {len(work.requests)} requests, {work.pairs} pairs, {args.threads} threads")
    points, notes = bench_fp32(args, bundle, work)
    int8_session = make_session(bundle.ranker.path, args.threads)
    points += bench_onnx(int8_session, bundle, work, args.concurrency, ORT_INT8)[0]
    del int8_session  # its threads must not compete with the server's
    service, service_notes = bench_services(args, work)
    points += service
    notes += service_notes
    lone_turns = bench_lone_in_turns(args, bundle, work)

    ratios = ratio_lines(points, work, lone_turns)
    print("\n".join(ratios))
    cpu, dims = read_cpu(), model_dims(args, bundle)
    peak = peak_fp32(cpu, threads=args.threads, fma_units=args.fma_units)
    limit = peak.flops_per_s / flops_per_pair(dims, work.mean_tokens) if peak.flops_per_s else None
    sections = [
        Section("Ratios", ratios),
        method_section(work, bundle),
        Section("Checks and gaps", [f"- {n}" for n in notes]),
    ]
    if limit:
        sections.append(Section("Theoretical FP32 limit", describe_limit(dims, work.mean_tokens, peak, cpu)))
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    machine = describe_machine(cpu, threads=args.threads, packages=VERSIONED, command=command)
    sections.append(Section("Machine", machine))
    plot = args.out.with_suffix(".png")
    title = f"{bundle.model_id}: a typical CrossEncoder, raw ONNX Runtime and the service, side by side"
    write_report(args.out, plot, title=title, points=points, limit_pairs_per_s=limit, sections=sections)
    print("\n" + markdown_table(points, limit_pairs_per_s=limit) + "\n")
    print("\n".join(notes))
    print(f"\nwrote {args.out} and {plot}")


if __name__ == "__main__":
    main()
