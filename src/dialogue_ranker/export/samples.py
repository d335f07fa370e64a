r"""``ranker samples``: a bundle's sample sequences and their fp32 logits (``samples.json``).

    ranker samples --model models/dialogue-minilm-l6 \
        --lists sugar=runs/data/sugar.jsonl --lists topical-chat=runs/data/topical-chat.jsonl

Takes a seeded handful of dev lists per file (the group split's ``dev`` part: never test data),
encodes them as the service does (every context view, one sequence per backend call) and scores
them with the bundle's own weights in fp32: ``MatMulNBits`` weights dequantized with numpy
(weight x scale per block), the graph then run by ONNX Runtime with fp32 arithmetic. So the
reference differs from a runtime's scores only by that runtime's arithmetic (int8 activations,
bf16), not by the weights' quantization, which the export's own rule already accepted.
``--backend auto`` checks each runtime against these logits at start (``serving.samples``).
The export (``ranker export``) writes the file with every bundle; this command adds it to an
existing one and names it in ``metadata.json`` (``ranker.samples``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error, read_lists
from dialogue_ranker.evaluation.domains import held_out
from dialogue_ranker.evaluation.scoring import score_sequences, view_sequences
from dialogue_ranker.serving.list_encoding import EncodedList, ListEncoder
from dialogue_ranker.serving.model_bundle import METADATA_FILE, load_bundle
from dialogue_ranker.serving.samples import write_samples

SAMPLES_FILE = "samples.json"
#: Dev lists per file: SUGAR and Topical-Chat give about 40 sequences with every view (about 320
#: candidates), which one runtime scores in well under a second on 2 cores.
LISTS_PER_FILE = 10
#: Dev lists the export takes over all of a run's files: two files' worth, shared out. Every runtime
#: scores every sample at start, so the count is start-up time: 2.9.0's run had seven dev files, and
#: ten lists of each (146 sequences) made ``--backend auto`` choose in 8.5 s instead of 3.1 s.
EXPORT_LISTS = 2 * LISTS_PER_FILE
REFERENCE = "fp32: the bundle's weights dequantized, fp32 arithmetic (ONNX Runtime)"


class UnsupportedGraph(ValueError):
    """The graph holds quantized operators other than 8-bit MatMulNBits (no fp32 form is derived)."""


def dequantized(graph: Path) -> onnx.ModelProto:
    """The graph with each 8-bit ``MatMulNBits`` replaced by a MatMul on its fp32 weights.

    Raises:
        UnsupportedGraph: a MatMulNBits of other than 8 bits, or dynamic/static int8 operators.
    """
    model = onnx.load(str(graph))
    inits = {i.name: i for i in model.graph.initializer}
    nodes, dropped, added = [], set(), []
    for node in model.graph.node:
        if node.op_type in ("MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul"):
            raise UnsupportedGraph(f"{graph.name}: {node.op_type} has no fp32 form here")
        if node.op_type != "MatMulNBits":
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attrs["bits"] != 8:
            raise UnsupportedGraph(f"{graph.name}: {attrs['bits']}-bit MatMulNBits")
        k, n = int(attrs["K"]), int(attrs["N"])
        weights = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)  # (N, blocks, block)
        scales = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32).reshape(n, -1)
        zero = np.float32(128.0)  # MatMulNBits' default zero point for 8 bits
        if len(node.input) > 3 and node.input[3]:
            zero = numpy_helper.to_array(inits[node.input[3]]).astype(np.float32).reshape(n, -1)[..., None]
        fp32 = ((weights - zero) * scales[..., None]).reshape(n, -1)[:, :k]
        name = f"{node.input[1]}_fp32"
        added.append(numpy_helper.from_array(np.ascontiguousarray(fp32.T), name))
        dropped.update(node.input[1:4])
        bias = node.input[5] if len(node.input) > 5 and node.input[5] else None
        product = f"{node.output[0]}_nobias" if bias else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], name], [product], name=f"{node.name}_fp32"))
        if bias:
            nodes.append(helper.make_node("Add", [product, bias], [node.output[0]], name=f"{node.name}_bias"))
    kept = [i for i in model.graph.initializer if i.name not in dropped]
    model.graph.ClearField("node")
    model.graph.node.extend(nodes)
    model.graph.ClearField("initializer")
    model.graph.initializer.extend(kept + added)
    return model


def reference_session(graph: Path, *, threads: int = 2) -> ort.InferenceSession:
    """ONNX Runtime on the fp32 form of ``graph``, no graph rewrites that could change its arithmetic."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(
        dequantized(graph).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def sample_lists(
    lists: dict[str, list[RankingList]], per_file: int = LISTS_PER_FILE, seed: int = 0, split: str = "dev"
) -> list[RankingList]:
    """A seeded ``per_file`` of each file's dev lists (test lists never enter a bundle).

    ``split="all"``: the lists are dev lists already (the export's own, from the run's split).
    """
    return [x for name in sorted(lists) for x in held_out(lists[name], split, per_file, seed)]


def write_bundle_samples(bundle_dir: Path, lists: Sequence[RankingList], *, source: str) -> Path:
    """Score ``lists`` in fp32, write ``samples.json`` into the bundle and name it in its metadata.

    Raises:
        UnsupportedGraph: the bundle is not a shared-prefix one, or its graph has no fp32 form here.
    """
    bundle = load_bundle(bundle_dir)
    encoder = bundle.pair_encoder()
    if not isinstance(encoder, ListEncoder):
        raise UnsupportedGraph(f"{bundle_dir}: sample sequences are written for shared-prefix bundles only")
    requests: list[list[EncodedList]] = [
        [sequence] for x in lists for view in view_sequences(encoder, x, bundle.views) for sequence in view
    ]
    logits = score_sequences(reference_session(bundle.ranker.path), encoder, requests)
    path = write_samples(
        bundle.directory / SAMPLES_FILE,
        requests,
        logits,
        pad_id=encoder.pad_id,
        reference=REFERENCE,
        source=f"{len(requests)} sequences of {len(lists)} dev lists ({source}), every context view",
    )
    meta_path = bundle.directory / METADATA_FILE
    meta = json.loads(meta_path.read_text())
    meta["ranker"]["samples"] = SAMPLES_FILE
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return path


def add_to_export(bundle_dir: Path, dev: dict[str, list[RankingList]]) -> Path | None:
    """The export's last step: ``samples.json`` from the run's own dev lists, or a line saying why not."""
    try:
        chosen = sample_lists(dev, per_file=max(1, EXPORT_LISTS // max(1, len(dev))), split="all")
        path = write_bundle_samples(bundle_dir, chosen, source=", ".join(sorted(dev)))
    except UnsupportedGraph as e:
        print(f"no {SAMPLES_FILE} ({e}): --backend auto will serve ONNX Runtime", flush=True)
        return None
    print(f"wrote {path} (the sequences --backend auto checks each runtime on)", flush=True)
    return path


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True, help="the bundle directory")
    parser.add_argument("--lists", action="append", required=True, help="NAME=FILE (repeatable)")
    parser.add_argument("--per-file", type=int, default=LISTS_PER_FILE, help="dev lists taken per file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--split",
        choices=("dev", "all"),
        default="dev",
        help="dev: the group split's dev part of each file; all: the files hold dev lists only",
    )
    args = parser.parse_args(argv)
    files = {}
    for entry in args.lists:
        name, _, path = entry.partition("=")
        if not path:
            parser.error(f"--lists takes NAME=FILE, got {entry!r}")
        files[name] = read_lists(path)
    chosen = sample_lists(files, args.per_file, args.seed, args.split)
    path = write_bundle_samples(args.model, chosen, source=", ".join(sorted(files)))
    print(f"wrote {path}: {len(chosen)} dev lists")
    return path


if __name__ == "__main__":
    exit_on_data_error(main)
