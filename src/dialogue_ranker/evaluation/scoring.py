"""Measurements the export reports: parity with PyTorch, batch invariance, speed."""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from dialogue_ranker.serving import context_views
from dialogue_ranker.serving.backends.openvino import (
    Precision,
    Weights,
    compile_graph,
    resolve_precision,
    resolve_weights,
)
from dialogue_ranker.serving.calibration import Calibrator, runtime_key
from dialogue_ranker.serving.list_encoding import EncodedList, ListEncoder
from dialogue_ranker.serving.model_bundle import ModelBundle
from dialogue_ranker.serving.tokenization import EncodedPair, PairEncoder

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def session(
    path: str | Path,
    *,
    threads: int = 2,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    backend: str = "onnx",
    precision: str = "auto",
    weights: str = "auto",
):
    """An ONNX Runtime session the way the service opens one (sequential, fixed threads).

    ``backend="openvino"``: the graph compiled by OpenVINO at ``precision`` (``auto``: bf16 where
    the CPU has native bf16) with ``weights`` (``auto``: as the service resolves them), behind the
    same ``run`` / ``get_inputs`` / ``get_outputs`` calls.
    """
    if backend == "openvino":
        resolved = resolve_precision(precision)
        return OpenVinoSession(
            Path(path), precision=resolved, threads=threads, weights=resolve_weights(weights, resolved)
        )
    if backend != "onnx":
        raise ValueError(f"unknown backend {backend!r} (onnx or openvino)")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), options, providers=list(providers))


@dataclass(frozen=True)
class _Port:
    name: str


class OpenVinoSession:
    """The serving OpenVINO backend's compiled graph, called as the evaluation calls ONNX Runtime."""

    def __init__(self, path: Path, *, precision: Precision, threads: int, weights: Weights = "int8") -> None:
        self.precision = precision
        self._compiled = compile_graph(path, precision=precision, streams=1, threads=threads, weights=weights)
        self._request = self._compiled.create_infer_request()

    def get_inputs(self) -> list[_Port]:
        """The graph's inputs (``.name`` of each)."""
        return [_Port(port.get_any_name()) for port in self._compiled.inputs]

    def get_outputs(self) -> list[_Port]:
        """The graph's outputs (``.name`` of each)."""
        return [_Port(port.get_any_name()) for port in self._compiled.outputs]

    def run(self, output_names: Sequence[str] | None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The named outputs (all when None) for ``feeds``, as ONNX Runtime's ``run`` returns them."""
        out = self._request.infer(feeds)
        names = output_names or [p.name for p in self.get_outputs()]
        return [np.array(out[name], copy=True) for name in names]


BACKENDS = ("onnx", "openvino")


def backend_list(text: str) -> list[str]:
    """``onnx,openvino`` -> the runtimes named, each once, in order (argparse type)."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: name one or more of {', '.join(BACKENDS)}, comma-separated"
        )
    return names


def add_backend_arguments(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """``--backend`` and ``--precision``: which in-process runtime scores a bundle's graphs.

    ``several``: ``--backend`` takes a comma-separated list (``onnx,openvino``), each runtime scored.
    """
    if several:
        parser.add_argument(
            "--backend",
            type=backend_list,
            default=["onnx"],
            help="the runtimes that score, comma-separated: onnx (ONNX Runtime, default), openvino; "
            "every row is computed and gated on each",
        )
    else:
        parser.add_argument(
            "--backend",
            choices=BACKENDS,
            default="onnx",
            help="score with ONNX Runtime (default) or OpenVINO, as `ranker serve --backend` would",
        )
    parser.add_argument(
        "--precision",
        choices=("auto", "bf16", "f32"),
        default="auto",
        help="with --backend openvino: auto is bf16 where the CPU has native bf16, else f32",
    )
    parser.add_argument(
        "--openvino-weights",
        choices=("auto", "int8", "fp32"),
        default="auto",
        help="with --backend openvino: the graph's int8 weights as int8 products, or dequantized at load "
        "(auto: as `ranker serve` resolves --openvino.weights, fp32 for bf16 on a CPU with AMX)",
    )


def scoring_runtime(args: argparse.Namespace) -> str:
    """The runtime ``--backend`` and ``--precision`` score with, as ``calibration_by_runtime`` names it.

    A bundle is scored with that runtime's own calibration map and threshold where it has them
    (:meth:`~dialogue_ranker.serving.model_bundle.ModelBundle.for_runtime`), as the service does.
    """
    if args.backend == "onnx":
        return runtime_key("onnx", "")
    return runtime_key("openvino", resolve_precision(args.precision))


def runtime_label(bundle: ModelBundle, args: argparse.Namespace) -> str:
    """The model's id, with the runtime when it is not ONNX Runtime and the map it is calibrated with.

    ``name@1.0 (openvino, bf16; its own calibration)``, or ``...; the bundle's calibration)`` when
    the bundle has no map of that runtime's.
    """
    if args.backend == "onnx":
        return bundle.model_id
    own = "its own" if bundle.calibration_runtime == scoring_runtime(args) else "the bundle's"
    precision = resolve_precision(args.precision)
    weights = resolve_weights(args.openvino_weights, precision)
    return f"{bundle.model_id} (openvino, {precision}, {weights} weights; {own} calibration)"


def run_batch(sess: ort.InferenceSession, encoder: PairEncoder, pairs: Sequence[EncodedPair]) -> np.ndarray:
    """Logits of one padded batch."""
    names = [i.name for i in sess.get_inputs()]
    return np.asarray(sess.run(None, encoder.pad(pairs).as_feeds(names))[0], dtype=np.float32).reshape(-1)


def score(
    sess: ort.InferenceSession, encoder: PairEncoder, pairs: Sequence[EncodedPair], *, batch_size: int = 16
) -> np.ndarray:
    """Logits for pairs in order, length-sorted into batches."""
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i]))
    out = np.empty(len(pairs), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        out[idx] = run_batch(sess, encoder, [pairs[i] for i in idx])
    return out


def batch_invariance(
    sess: ort.InferenceSession,
    encoder: PairEncoder,
    pairs: Sequence[EncodedPair],
    calibrator: Calibrator,
    *,
    batch_size: int = 16,
    seed: int = 0,
) -> dict[str, float]:
    """Each pair scored alone versus inside shuffled, mixed-length, padded batches.

    Returns the largest change in logit and in calibrated probability over all pairs.
    """
    alone = np.concatenate([run_batch(sess, encoder, [p]) for p in pairs])
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    mixed = np.empty(len(pairs), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        mixed[idx] = run_batch(sess, encoder, [pairs[i] for i in idx])
    return {
        "max_abs_logit_change": float(np.max(np.abs(alone - mixed))),
        "max_abs_prob_change": float(np.max(np.abs(calibrator(alone) - calibrator(mixed)))),
        "pairs": len(pairs),
    }


def throughput(
    sess: ort.InferenceSession,
    encoder: PairEncoder,
    pairs: Sequence[EncodedPair],
    *,
    batch_size: int,
    repeat: int = 1,
) -> float:
    """Pairs per second over ``pairs`` in batches of ``batch_size`` (after one warm-up batch)."""
    run_batch(sess, encoder, pairs[:batch_size])
    started = time.perf_counter()
    for _ in range(repeat):
        for start in range(0, len(pairs), batch_size):
            run_batch(sess, encoder, pairs[start : start + batch_size])
    return repeat * len(pairs) / (time.perf_counter() - started)


def score_sequences(
    sess: ort.InferenceSession, encoder: ListEncoder, requests: Sequence[Sequence[EncodedList]]
) -> list[np.ndarray]:
    """A shared-prefix graph's candidate logits per request, one sequence per call (as served)."""
    names = [i.name for i in sess.get_inputs()]
    output = sess.get_outputs()[0].name
    out = []
    for sequences in requests:
        batches = [encoder.pad([s]) for s in sequences]
        out.append(np.concatenate([b.readout(sess.run([output], b.as_feeds(names))[0]) for b in batches]))
    return out


def score_lists(
    sess: ort.InferenceSession,
    encoder: ListEncoder,
    lists: Sequence,
    *,
    views: context_views.ViewWeights | float = 0.0,
) -> list[np.ndarray]:
    """Ranking lists' candidate logits as the service scores them: every situation, every view.

    ``lists``: anything with ``context``, ``situations`` and ``candidates`` (``data.ranking_data``'s
    RankingList); a multi-turn list is scored with its last turn alone and its reply's prior too as
    ``views`` asks (a number: the last-turn weight alone; :mod:`dialogue_ranker.serving.context_views`).
    """
    out = []
    for x in lists:
        by_view = view_logits(sess, encoder, x, views)
        out.append(context_views.combine(np.concatenate(by_view), len(by_view), views))
    return out


def view_logits(
    sess: ort.InferenceSession, encoder: ListEncoder, x, views: context_views.ViewWeights | float
) -> list[np.ndarray]:
    """A ranking list's candidate logits, one array per view (before they are combined)."""
    return score_sequences(sess, encoder, view_sequences(encoder, x, views))


def view_sequences(
    encoder: ListEncoder, x, views: context_views.ViewWeights | float
) -> list[list[EncodedList]]:
    """A ranking list's sequences, view by view, as the service encodes its request."""
    texts = [c.text for c in x.candidates]
    return [encoder.encode_request(t, x.situations, texts) for t in context_views.views(x.context, views)]
