"""int8 variants for CPU, measured side by side by the export, and why they run one pair per call.

Dynamic quantization (``quantize_dynamic``) computes each activation's scale at run time over
the whole input tensor, padding included, so in a batch a pair's score moves with its
batch-mates (up to 0.16 in probability, measured on dev). Static quantization fixes activation
scales from calibration data, so a pair scores the same in any batch, but its MinMax ranges cost
up to 2.4 in logit here and were no faster. So the service runs int8 graphs one pair (one
request's sequence) per call: each gets its own activation scales, exactly as if it were alone.
Blockwise quantization (``MatMulNBits``) scales each token's blocks on their own: nearer fp32, so
since model 2.5.1 the export's rule (the fastest graph that holds dev P@1) ships it, at about 0.6x
the dynamic graph's speed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process

from dialogue_ranker.serving.tokenization import Batch


@contextlib.contextmanager
def _root_logging_kept() -> Iterator[None]:
    """Keep the root logger as it was across an import that calls ``logging.basicConfig``.

    onnxruntime's MatMulNBits quantizer sets the root level to INFO when imported, after which
    every quantizer's INFO lines would print.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


def blockwise_int8(
    model_path: str | Path, path: str | Path, *, block_size: int = 128, symmetric: bool = True
) -> Path:
    """Blockwise int8: weights in blocks along the input axis, activations per token and block.

    ``MatMulNBits`` with 8 bits and ``accuracy_level`` 4 (int8 dot products; activations quantized
    at run time per token and block of ``block_size``); the embedding gathers as in
    :func:`dynamic_int8`.

    Why beside the dynamic graph: ``quantize_dynamic`` gives each activation tensor one scale, so a
    request's outlying channels coarsen every token's product, and a candidate's score moves with
    the rest of its sequence (up to 0.17 in probability on 2.5.0's dev lists). Here each token's
    block has its own scale: on 2.5.0's weights the held-out SUGAR P@1 matched fp32 (test 0.725,
    unseen 0.732; dynamic int8 0.702 / 0.683) at the same size and 0.60x dynamic int8's speed on
    situated requests (the export's measure on this CPU; 0.76x on DailyDialog++'s shorter ones).
    Leaving the feed-forward MatMuls of the dynamic graph in fp32 recovered less (0.716 / 0.707) at
    twice the size and the same speed; 4-bit blocks of 32 lost more (0.679 / 0.634).

    ``symmetric=False`` gives each block a zero point as well as a scale (its range, not its
    largest magnitude, spans the codes): another grid than the symmetric one. That is what a
    stage trained on from a symmetric graph needs (``--init-bundle``): its weights start on the
    symmetric grid and move by less than a step, so the symmetric quantizer rounds the moves back
    (2.9.0's stage: dev situation flip 0.845 in fp16, 0.724 symmetric int8, 2.8.0's 0.719), while
    the other grid keeps them (0.843) at 0.94x the symmetric graph's speed here (AMD EPYC, ONNX
    Runtime 1.32, 2 threads; the fp16-weights graph 0.81x).
    """
    path = Path(path)
    with _root_logging_kept():
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(model_path)), bits=8, block_size=block_size, is_symmetric=symmetric, accuracy_level=4
    )
    quantizer.process()
    blocked = path.with_suffix(".matmul-only.onnx")
    quantizer.model.save_model_to_file(str(blocked), False)
    return int8_gathers(blocked, path)


def int8_gathers(model_path: Path, path: Path) -> Path:
    """``model_path`` with its embedding tables int8 (one scale per table), as ``path``; input deleted."""
    with _root_logging_kept():
        quantize_dynamic(
            str(model_path),
            str(path),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["Gather"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    model_path.unlink()
    return path


def fp16_weights(model_path: str | Path, path: str | Path) -> Path:
    """Matrix weights stored in fp16 (cast to fp32 once, when a session loads), embedding gathers int8.

    For a model trained on from a shipped int8 graph: its weights start on that graph's grid, and
    a short stage moves them by less than a step (the situation stage of
    ``docs/research/2026-11-26-situation-contrast.md``: at most 8e-4), so an int8 graph of the
    result on the same grid rounds most of them back and scores as the old model did (its dev: the
    situation-flip accuracy 0.852 in fp32, 0.700 blockwise int8, 2.8.0's 0.719); another grid keeps
    them (:func:`blockwise_int8` with ``symmetric=False``, what 2.9.0 ships). fp16 keeps such
    moves (a step of 2^-11 relative). The ``Cast`` of each weight is folded when ONNX Runtime or
    OpenVINO loads the graph, so it computes as the fp32 graph does, at about half its size; the
    embedding tables are int8 with one scale per table, as in :func:`blockwise_int8`.
    """
    path = Path(path)
    model = onnx.load(str(model_path))
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    weights = {n.input[1] for n in graph.node if n.op_type == "MatMul" and n.input[1] in initializers}
    casts = []
    for name in sorted(weights):
        value = numpy_helper.to_array(initializers[name])
        graph.initializer.remove(initializers[name])
        graph.initializer.append(numpy_helper.from_array(value.astype(np.float16), f"{name}_fp16"))
        casts.append(
            helper.make_node("Cast", [f"{name}_fp16"], [name], to=onnx.TensorProto.FLOAT, name=f"{name}_cast")
        )
    nodes = [*casts, *graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    halved = path.with_suffix(".fp16-only.onnx")
    onnx.save(model, str(halved))
    return int8_gathers(halved, path)


def dynamic_int8(model_path: str | Path, path: str | Path, *, per_channel: bool = True) -> Path:
    """Dynamic int8: int8 weights (per output channel), activation scales computed at run time.

    Per-channel weights halved the logit error against fp32 here (mean 0.11 vs 0.22 on dev).
    The activation scale covers the whole input tensor, so the graph must be run one pair per
    call for a pair's score not to depend on its batch-mates (metadata ``serving``).
    """
    quantize_dynamic(
        str(model_path),
        str(path),
        weight_type=QuantType.QInt8,
        per_channel=per_channel,
        # Needed when the input is a fusion-optimised graph whose value types are not all inferred.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return Path(path)


class _BatchReader(CalibrationDataReader):
    def __init__(self, batches: Sequence[Batch], input_names: Sequence[str]) -> None:
        self._feeds: Iterator[dict[str, np.ndarray]] = iter([b.as_feeds(input_names) for b in batches])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


def static_int8(
    model_path: str | Path,
    path: str | Path,
    *,
    calibration_batches: Sequence[Batch],
    input_names: Sequence[str],
    method: str = "minmax",
    percentile: float = 99.999,
    work_dir: str | Path,
) -> Path:
    """Static int8 (QDQ) of the MatMul/Gemm inputs, activation ranges fixed from calibration data.

    MinMax ranges are the default: the histogram methods (percentile, entropy) stack every
    calibration batch into one array and so need batches of one shape, which means padding.

    Matrix products (the compute) and the embedding gathers (half the weights) are quantized;
    softmax, layer norm and GELU stay fp32, where int8 loses the most accuracy for the least speed.
    """
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    model_path, path = Path(model_path).resolve(), Path(path).resolve()
    prepared = work_dir / "static_prepared.onnx"
    # The quantizer writes scratch files into the working directory: keep them in work_dir.
    with contextlib.chdir(work_dir):
        _static_int8(model_path, path, prepared, calibration_batches, input_names, method, percentile)
    return path


def _static_int8(model_path, path, prepared, calibration_batches, input_names, method, percentile) -> None:
    # Symbolic shape inference cannot follow the dynamic axes of this graph; ONNX shape
    # inference and the graph optimisation step of pre-processing are enough for QDQ placement.
    quant_pre_process(str(model_path), str(prepared), skip_symbolic_shape=True)
    calibrate_method = {
        "minmax": CalibrationMethod.MinMax,
        "percentile": CalibrationMethod.Percentile,
        "entropy": CalibrationMethod.Entropy,
    }[method]
    extra = {"CalibPercentile": percentile} if method == "percentile" else {}
    quantize_static(
        str(prepared),
        str(path),
        _BatchReader(calibration_batches, input_names),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=["MatMul", "Gemm", "Gather"],
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=calibrate_method,
        extra_options={**extra, "ActivationSymmetric": False, "WeightSymmetric": True},
    )
