"""The report's rows that call a model directly (``report.py``).

The CrossEncoder in PyTorch, raw ONNX Runtime sessions and raw OpenVINO compilations of the
shipped graph, each at every precision it offers on this CPU.
"""

from __future__ import annotations

import argparse
import gc
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from bench_gateway import REPO_ROOT, make_session
from report_output import Point
from report_workload import Call, Unavailable, Workload, in_groups, measure_calls, pair_encoder, pair_texts

from dialogue_ranker.serving.cpu import native_bf16
from dialogue_ranker.serving.model_bundle import ModelBundle
from dialogue_ranker.serving.tokenization import EncodedPair

# Where `make model` leaves the shipped model's run and its export build (RUN ?= runs/sugar).
DEFAULT_CHECKPOINT = REPO_ROOT / "runs" / "sugar" / "ranker"
DEFAULT_FP32_ONNX = REPO_ROOT / "build" / "sugar" / "ranker.fp32.onnx"
# Where `make model` leaves a shared-prefix model's fp32 graph (RUN ?= runs/ranker).
SHARED_PREFIX_FP32_ONNX = REPO_ROOT / "build" / "ranker" / "ranker.fp32.onnx"
CROSS_ENCODER = "CrossEncoder fp32 (PyTorch)"
ORT_FP32 = "raw ORT, fp32 graph"
ORT_INT8 = "raw ORT, shipped graph"
#: A raw OpenVINO row's name at a precision (``bf16``, ``f32``).
OPENVINO = "raw OpenVINO {precision}, shipped graph"


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


def bench_openvino(
    args: argparse.Namespace, bundle: ModelBundle, work: Workload
) -> tuple[list[Point], list[str]]:
    """Raw OpenVINO on the shipped graph: bf16 where the CPU has native bf16, and f32.

    One compilation of ``args.threads`` threads in one stream, fed as the raw ONNX Runtime session
    is (the pairs of c requests a call), through the evaluation's ONNX Runtime-like wrapper.
    """
    try:
        from dialogue_ranker.evaluation.scoring import OpenVinoSession
        from dialogue_ranker.serving.backends.openvino import openvino_available
    except ImportError as e:
        return [], [f"OpenVINO rows left out: {e}."]
    if not openvino_available():
        return [], ["OpenVINO rows left out: openvino is not installed (the openvino extra)."]
    precisions = ["bf16", "f32"] if native_bf16() else ["f32"]
    notes = [] if native_bf16() else ["Raw OpenVINO bf16 row left out: this CPU has no native bf16."]
    points: list[Point] = []
    for precision in precisions:
        session = OpenVinoSession(bundle.ranker.path, precision=precision, threads=args.threads)
        name = OPENVINO.format(precision=precision)
        points += bench_onnx(session, bundle, work, args.concurrency, name)[0]
        del session
        gc.collect()
    return points, notes
