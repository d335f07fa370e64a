"""The export's graphs: the fp32 ONNX graph of the model, then its int8 variants.

Dynamic int8 (per-channel weights), blockwise int8 (MatMulNBits, symmetric or with zero points),
fp16 matrix weights and static int8 (QDQ, MatMul only, calibrated on situated dev requests), as
``--variants`` asks.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch

from dialogue_ranker.export import onnx_graph, quantize
from dialogue_ranker.serving.list_encoding import SIMILARITY_INPUT_NAMES, EncodedList, ListEncoder
from dialogue_ranker.training.ensemble import EnsembleRanker
from dialogue_ranker.training.shared_prefix import OUTPUT_NAME, SharedPrefixRanker
from dialogue_ranker.training.similarity import SimilarityRanker


def export_fp32(
    model: SharedPrefixRanker | SimilarityRanker | EnsembleRanker, path: Path, encoder: ListEncoder
) -> Path:
    """The fp32 graph with dynamic sequence and length axes (TorchScript exporter)."""
    names = model.input_names
    batch = encoder.pad([encoder.synthetic(candidates=2), encoder.synthetic(candidates=3, prefix_tokens=40)])
    dummy = tuple(torch.from_numpy(a) for a in batch.as_feeds(names).values())
    # The similarity sequence has its own length (training/similarity.py).
    axes = {
        name: {0: "sequences", 1: "similarity_length" if name in SIMILARITY_INPUT_NAMES else "length"}
        for name in (*names, OUTPUT_NAME)
    }
    return onnx_graph.export_module(
        model.eval(), dummy, path, input_names=names, output_name=OUTPUT_NAME, axes=axes
    )


def build_variants(
    model: SharedPrefixRanker | SimilarityRanker | EnsembleRanker,
    variants: list[str],
    build: Path,
    encoder: ListEncoder,
    situated: list[list[EncodedList]],
    *,
    max_mb: float,
) -> dict[str, Path]:
    """Each graph of ``variants`` under ``build``, by name; exits when none is within ``max_mb``.

    ``situated``: the requests static int8 calibrates its activation ranges on.
    """
    paths = {"fp32": export_fp32(model, build / "ranker.fp32.onnx", encoder)}
    if "int8_dynamic" in variants:
        paths["int8_dynamic"] = quantize.dynamic_int8(paths["fp32"], build / "ranker.int8-dynamic.onnx")
    if "int8_blockwise" in variants:
        paths["int8_blockwise"] = quantize.blockwise_int8(paths["fp32"], build / "ranker.int8-blockwise.onnx")
    if "int8_blockwise_asymmetric" in variants:
        paths["int8_blockwise_asymmetric"] = quantize.blockwise_int8(
            paths["fp32"], build / "ranker.int8-blockwise-asymmetric.onnx", symmetric=False
        )
    if "fp16_weights" in variants:
        paths["fp16_weights"] = quantize.fp16_weights(paths["fp32"], build / "ranker.fp16-weights.onnx")
    if "int8_static" in variants:
        calibration_feeds = [
            encoder.pad(r) for r in random.Random(1).sample(situated, min(48, len(situated)))
        ]
        paths["int8_static"] = quantize.static_int8(
            paths["fp32"],
            build / "ranker.int8-static.onnx",
            calibration_batches=calibration_feeds,
            input_names=model.input_names,
            work_dir=build / "tmp-ranker",
        )
    sizes = {v: path.stat().st_size / 2**20 for v, path in paths.items()}
    if min(sizes.values()) > max_mb:  # before the long measurements: nothing could ship
        listed = ", ".join(f"{v} {mb:.1f} MB" for v, mb in sizes.items())
        raise SystemExit(f"no graph within --max-mb {max_mb} ({listed}): add an int8 one to --variants")
    return paths
