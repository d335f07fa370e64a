r"""A soup member's weights back from a shipped graph and the soup's other member.

    HF_HUB_OFFLINE=1 .venv/bin/python -m dialogue_ranker.training.recover --bundle models/dialogue-minilm-l6 \
        --other runs/ranker --out runs/ranker-open

Why: the repository ships graphs, not run directories, and a run trained on a lent GPU may not
come back (the open-domain run of models 2.5.0 to 2.6.0: its stage 1 costs 5-7 hours on 2 CPU
cores). The shipped graph holds the soup ``(1 - share) x member + share x other``, so when the
other member can be trained again (``make model`` does so, the same on the same kind of CPU)
the member is ``(soup - share x other) / (1 - share)``.

The graph's weights are quantized: matrix weights 8-bit in blocks of 128 with a scale per block
(``MatMulNBits``) or stored in fp16 (a ``Cast`` before each ``MatMul``), embedding tables 8-bit
with one scale per table; LayerNorm, biases and the cosine scale are fp32. A quantized weight says
only that the soup's weight lies in a cell, the values that round to its code. Each soup weight is
taken as the point of its cell nearest the other member's weight: where the cell holds the other's
weight, the member is taken to agree with it (the graph cannot tell them apart there); elsewhere
the error is at most the cell's width before the division.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from dialogue_ranker.training.dev_scoring import (
    calibrated_report,
    dev_logits,
    fit_calibration,
    run_dev_lists,
    write_calibration,
)
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker, run_encoder

#: The quantizer's zero point when a MatMulNBits node has none (symmetric, 2^(bits - 1)).
NBITS_ZERO_POINT = {8: 128}


def parameter_name(node_name: str) -> str:
    """``/encoder/encoder/layer.0/attention/self/query/MatMul_Q8`` -> ``encoder....query.weight``."""
    module = node_name.strip("/").rsplit("/", 1)[0]
    return module.replace("/", ".") + ".weight"


def nbits_weight(node: onnx.NodeProto, tensors: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The cells of a MatMulNBits node's weight, as a Linear's ``(out, in)``: lowest, highest.

    The symmetric quantizer scales a block by its largest magnitude over -2^(bits-1) and clamps
    to 2^(bits-1) - 1, so a weight of the other sign near that magnitude lands in the top code,
    whose cell runs a half step further up: up to 2^(bits-1) steps. With zero points (a block's
    range spans the codes, ``blockwise_int8(symmetric=False)``) every cell is a step wide.
    """
    attrs = {a.name: a.i for a in node.attribute}
    if attrs["bits"] not in NBITS_ZERO_POINT:
        raise SystemExit(f"{node.name}: {attrs['bits']}-bit blocks are not supported")
    rows, cols, block = attrs["N"], attrs["K"], attrs["block_size"]
    codes = tensors[node.input[1]].reshape(rows, -1, block).astype(np.float32)
    scales = tensors[node.input[2]].reshape(rows, -1, 1)
    if len(node.input) > 3 and node.input[3]:  # 8-bit zero points: a byte per block
        steps = codes - tensors[node.input[3]].reshape(rows, -1, 1).astype(np.float32)
        top = steps + 0.5
    else:
        zero = NBITS_ZERO_POINT[attrs["bits"]]
        steps = codes - zero
        top = np.where(steps == zero - 1, steps + 1, steps + 0.5)
    ends = [((steps - 0.5) * scales).reshape(rows, -1)[:, :cols], (top * scales).reshape(rows, -1)[:, :cols]]
    return np.minimum(*ends), np.maximum(*ends)  # a negative scale swaps the ends


def integer_weight(node: onnx.NodeProto, tensors: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The cells of a dynamic int8 ``MatMulInteger`` weight (a scale per output), as a Linear's."""
    codes = tensors[node.input[1]].astype(np.float32)  # (in, out)
    zero = tensors[node.input[3]].astype(np.float32) if len(node.input) > 3 and node.input[3] else 0.0
    scale = np.abs(tensors[node.input[1].removesuffix("_quantized") + "_scale"])
    steps = codes - zero
    return ((steps - 0.5) * scale).T, ((steps + 0.5) * scale).T


def narrowed(
    graphs: list[dict[str, tuple[np.ndarray, np.ndarray]]],
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, float]]:
    """Each weight's cells intersected across graphs quantized from the same weights.

    Two quantizers with different grids (blocks of 128 against a scale per output) each say where
    a weight lies; both hold. Where the cells do not meet (they should always), the first graph's
    is kept and counted.
    """
    first, *rest = graphs
    cells = dict(first)
    conflicts, total = 0, 0
    for graph in rest:
        for name, (low, high) in cells.items():
            if name not in graph:
                continue
            other_low, other_high = (bound.reshape(low.shape) for bound in graph[name])
            new_low, new_high = np.maximum(low, other_low), np.minimum(high, other_high)
            apart = new_low > new_high
            conflicts += int(np.count_nonzero(apart))
            total += low.size
            cells[name] = (np.where(apart, low, new_low), np.where(apart, high, new_high))
    widths = [np.mean(h - lo) for lo, h in first.values()], [np.mean(h - lo) for lo, h in cells.values()]
    return cells, {
        "cells_width_after_intersection": round(
            float(np.mean(widths[1]) / max(np.mean(widths[0]), 1e-12)), 4
        ),
        "cells_apart": conflicts,
        "cells_compared": total,
    }


def fp16_cells(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fp32 values that round to each fp16 weight: half way to its neighbours on either side."""
    half = value.astype(np.float16)
    down = np.nextafter(half, np.float16(-np.inf)).astype(np.float32)
    up = np.nextafter(half, np.float16(np.inf)).astype(np.float32)
    exact = half.astype(np.float32)
    return (exact + down) / 2, (exact + up) / 2


def matmul_weight(
    node: onnx.NodeProto, tensors: dict[str, np.ndarray], cast_from: dict[str, str]
) -> tuple[np.ndarray, np.ndarray] | None:
    """A plain ``MatMul``'s constant weight as a Linear's ``(out, in)`` cells, or None for two activations.

    The weight is an fp32 initializer (the fp32 graph: exact) or the ``Cast`` of an fp16 one
    (:func:`~dialogue_ranker.export.quantize.fp16_weights`: the values that round to it).
    """
    name = node.input[1]
    if name in tensors and tensors[name].dtype == np.float32:
        return tensors[name].T, tensors[name].T
    if name in cast_from and tensors[cast_from[name]].dtype == np.float16:
        low, high = fp16_cells(tensors[cast_from[name]])
        return low.T, high.T
    return None


def graph_weights(path: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every trained weight of a shipped ranker graph by parameter name: its cells' (low, high).

    An fp32 tensor's cells are its values (low = high); a quantized or fp16 entry's, the values
    that round to its code.
    """
    graph = onnx.load(str(path)).graph
    tensors = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    weights: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, value in tensors.items():
        if value.dtype == np.float32:  # kept as trained (scales too: the caller picks by name)
            weights[name] = (value, value)
        elif name.endswith(".weight_quantized"):  # a gathered table: one scale per table
            stem = name.removesuffix("_quantized")
            scale = float(tensors[stem + "_scale"])
            steps = value.astype(np.float32) - tensors[stem + "_zero_point"].astype(np.float32)
            weights[stem] = ((steps - 0.5) * abs(scale), (steps + 0.5) * abs(scale))
    # fp16 matrix weights reach their MatMul through a Cast to fp32 (the fp16_weights variant).
    cast_from = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Cast" and n.input[0] in tensors}
    for node in graph.node:
        if node.op_type == "MatMul" and (cells := matmul_weight(node, tensors, cast_from)) is not None:
            weights[parameter_name(node.name)] = cells
        elif node.op_type == "MatMulNBits":
            weights[parameter_name(node.name)] = nbits_weight(node, tensors)
        elif node.op_type == "MatMulInteger" and node.input[1] in tensors:
            weights[parameter_name(node.name)] = integer_weight(node, tensors)
    return weights


def require_every_weight(graph: dict, own: dict, where: str) -> None:
    """Exit naming a trained weight of ``own`` that ``graph`` lacks (a graph of another architecture)."""
    missing = sorted(set(own) - set(graph))
    if missing:
        raise SystemExit(f"{where} lacks {len(missing)} trained weights, e.g. {missing[0]}")


def recover_member(
    graph: dict[str, tuple[np.ndarray, np.ndarray]], other: SharedPrefixRanker, share: float
) -> tuple[SharedPrefixRanker, dict[str, float]]:
    """``other`` with its weights replaced by the soup member's, and how far the cells moved it.

    ``share``: the other member's weight in the soup.
    """
    own = dict(other.named_parameters())
    require_every_weight(graph, own, "the graph")
    member: dict[str, torch.Tensor] = {}
    moved, total = 0, 0
    for name in own:
        low, high = graph[name]
        theirs = own[name].detach().float().numpy().reshape(low.shape)
        soup = np.clip(theirs, low, high)
        moved += int(np.count_nonzero(soup != theirs))
        total += soup.size
        solved = np.asarray((soup - share * theirs) / (1 - share))
        member[name] = torch.from_numpy(solved.reshape(own[name].shape).astype(np.float32))
    other.load_state_dict(member, strict=False)
    return other, {"weights": total, "share_outside_other_cell": round(moved / total, 4)}


def dequantized_ranker(bundle: Path, *, head: str) -> tuple[SharedPrefixRanker, dict[str, float]]:
    """A bundle's ranker as a trainable model: each weight the middle of its cell.

    fp32 weights (LayerNorm, biases, the head) are taken exactly; a quantized one as its code
    times its scale, as the runtime reads it. (Not the point nearest the backbone, as a soup
    member is recovered: every weight pulled the same way shifts the logits by whole units.)
    """
    from dialogue_ranker.training.backbone import backbone_dir

    metadata = json.loads((bundle / "metadata.json").read_text())
    cells = graph_weights(bundle / metadata["ranker"]["file"])
    model = SharedPrefixRanker.load(backbone_dir(), head=head)
    own = dict(model.named_parameters())
    require_every_weight(cells, own, f"{bundle}: the graph")
    middles = {
        name: torch.from_numpy(np.asarray((cells[name][0] + cells[name][1]) / 2, np.float32).reshape(p.shape))
        for name, p in own.items()
    }
    model.load_state_dict(middles, strict=False)
    quantized = sum(p.numel() for name, p in own.items() if np.any(cells[name][1] > cells[name][0]))
    return model, {"weights": sum(p.numel() for p in own.values()), "quantized": quantized}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments; exits naming a flag whose directory or graph is not what it should be."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", type=Path, required=True, help="shipped model directory (a soup's graph)")
    p.add_argument("--other", type=Path, required=True, help="the soup's other member, trained again")
    p.add_argument("--out", type=Path, required=True, help="run directory to write")
    p.add_argument(
        "--same-weights",
        type=Path,
        action="append",
        default=[],
        help="another graph quantized from the same soup (e.g. an earlier release's dynamic int8 one): "
        "its cells narrow the bundle's (repeatable)",
    )
    args = p.parse_args(argv)
    for flag, path, kind in (
        ("--bundle", args.bundle / "metadata.json", "a model directory"),
        ("--other", args.other / "config.json", "a finished training run"),
    ):
        if not path.is_file():
            raise SystemExit(f"{flag} {path.parent}: not {kind} (no {path.name})")
    for graph in args.same_weights:
        if not graph.is_file():
            raise SystemExit(f"--same-weights {graph}: no such graph")
    return args


def soup_of_two(args: argparse.Namespace) -> tuple[dict, dict, float]:
    """The bundle's metadata, its training configuration (less the soup) and the other member's share.

    Exits unless the bundle is the soup of two runs and ``--other`` trained on the other's mix.
    """
    metadata = json.loads((args.bundle / "metadata.json").read_text())
    config = dict(metadata["training_config"])
    interpolation = config.pop("interpolation", None) or {}
    blend = interpolation.get("with") or []
    if len(blend) != 1 or interpolation.get("alpha", 1) != 1:
        raise SystemExit(f"{args.bundle}: not the soup of two runs (training_config.interpolation.with)")
    other_config = json.loads((args.other / "config.json").read_text())
    if other_config.get("data") != blend[0]["config"].get("data"):
        raise SystemExit(f"{args.other} did not train on the soup member's mix: {blend[0]['config']['data']}")
    return metadata, config, float(blend[0]["weight"])


def calibrate_run(model: SharedPrefixRanker, out: Path, config: dict) -> dict:
    """The run's own calibration and dev metrics, as training writes them (what ``ranker evaluate`` reads)."""
    dev = run_dev_lists(config)
    logits = dev_logits(model.eval(), run_encoder(out, config), dev)
    fitted = fit_calibration(dev, logits)
    write_calibration(out / "calibration.json", fitted)
    metrics = {"dev": calibrated_report(dev, logits, fitted)}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    metadata, config, share = soup_of_two(args)
    cells, narrowing = narrowed(
        [graph_weights(g) for g in [args.bundle / metadata["ranker"]["file"], *args.same_weights]]
    )
    model, moved = recover_member(
        cells,
        SharedPrefixRanker.load(args.other / "ranker"),
        share,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    model.save(args.out / "ranker", args.bundle / "tokenizer.json")
    metrics = calibrate_run(model, args.out, config)
    config["recovered"] = {
        "from_graph": str(args.bundle / metadata["ranker"]["file"]),
        "bundle_version": metadata["version"],
        "other": str(args.other),
        "other_share": share,
        "same_weights": [str(g) for g in args.same_weights],
        **narrowing,
        **moved,
    }
    config["out"] = str(args.out)
    (args.out / "config.json").write_text(json.dumps(config, indent=2))
    print(json.dumps({**config["recovered"], "dev": metrics["dev"]}), flush=True)
    return config["recovered"]


if __name__ == "__main__":
    main()
