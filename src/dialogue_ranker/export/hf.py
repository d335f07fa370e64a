"""Any Hugging Face cross-encoder directory -> a bundle the service serves.

    ranker export-hf SRC_DIR --out BUNDLE_DIR [--name NAME] [--calibrate DATA.jsonl]

``SRC_DIR`` is a local sequence-classification checkpoint (BERT, RoBERTa/XLM-R, DeBERTa-v2/v3,
ELECTRA...) with a fast tokenizer and a one-logit or two-label head. The bundle holds:

- ``model-fp32.onnx``: one output, a logit per pair: the head's logit, or for a two-label head
  the positive label's logit minus the other's, so that its sigmoid is the softmax of the
  positive label: the model's own activation, kept as the calibration (Platt a=1, b=0);
- ``model-int8.onnx``: the same with dynamic int8 weights, the fast CPU graph, run one pair per
  call (its activation scales depend on the batch otherwise; metadata ``serving``);
- ``tokenizer.json`` with the model's own pair template (``encoding.kind = template``), and the
  graph's inputs (no ``token_type_ids`` where the model takes none, as RoBERTa);
- ``metadata.json``: which graph the service runs (``--serve``, default int8), max length,
  calibration, threshold.

Parity against PyTorch is checked on sample pairs and printed (the fp32 graph must match within
``--tolerance``, 1e-4). ``--calibrate DATA.jsonl`` fits Platt calibration and the abstention
threshold on labelled ranking lists in the project's ranking-data format
(:mod:`dialogue_ranker.data.ranking_data`), scored with the graph the service will run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from dialogue_ranker.data.ranking_data import DataError, read_lists
from dialogue_ranker.evaluation.grouping import score_grouped
from dialogue_ranker.evaluation.scoring import score, session
from dialogue_ranker.export.quantize import dynamic_int8
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.tokenization import DEFAULT_SPEAKER, TemplatePairEncoder, Turn

OPSET = 17
ALL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Pairs for the parity check when no data is given: short, mixed, one longer than the rest.
SAMPLE_PAIRS = [
    ("It is so hot in here, can you help?", "Shall I open the window for you?"),
    ("It is so hot in here, can you help?", "Pizza is great."),
    ("I forgot my password.", "Let me pull up your account and send a reset link."),
    ("What is the capital of France?", "Paris is the capital and largest city of France."),
    ("Do you like jazz?", "I do, especially the old recordings from the fifties and sixties. Do you?"),
]


class OneLogit(torch.nn.Module):
    """A sequence classifier reduced to one logit per pair, whose sigmoid is its own activation."""

    def __init__(self, model: torch.nn.Module, input_names: tuple[str, ...], positive: int | None) -> None:
        super().__init__()
        self.model = model
        self.input_names = input_names
        self.positive = positive

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:  # noqa: D102
        logits = self.model(**dict(zip(self.input_names, inputs, strict=True))).logits
        if self.positive is None:
            return logits[:, 0]
        return logits[:, self.positive] - logits[:, 1 - self.positive]


def positive_label(config: Any, requested: str | None) -> int | None:
    """Index of the positive label of a two-label head (None for one logit)."""
    if config.num_labels == 1:
        return None
    if config.num_labels != 2:
        raise SystemExit(
            f"ranker export-hf: a head of {config.num_labels} labels is not a relevance head (1 or 2)"
        )
    names = {int(i): str(n).lower() for i, n in config.id2label.items()}
    if requested is not None:
        matches = [i for i, n in names.items() if n == requested.lower() or str(i) == requested]
        if not matches:
            raise SystemExit(f"dialogue_ranker.export.hf: no label {requested!r} in {config.id2label}")
        return matches[0]
    for i, n in names.items():
        if n in {"positive", "relevant", "entailment", "true", "yes"}:
            return i
    return 1  # LABEL_1: the convention of binary relevance heads


def max_length_of(config: Any, tokenizer: Any, requested: int | None) -> int:
    limits = [getattr(config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)]
    known = [int(x) for x in limits if isinstance(x, int) and 16 <= x <= 100_000]
    # RoBERTa's position ids start after the padding index: 514 positions hold 512 tokens.
    if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "camembert"} and known:
        known.append(int(config.max_position_embeddings) - 2)
    length = min(known) if known else 512
    return min(length, requested) if requested else length


def export_onnx(module: OneLogit, input_names: tuple[str, ...], path: Path) -> None:
    dummy = tuple(torch.ones(2, 8, dtype=torch.long) for _ in input_names)
    axes: dict[str, dict[int, str]] = {name: {0: "batch", 1: "sequence"} for name in input_names}
    axes["logits"] = {0: "batch"}
    torch.onnx.export(
        module, dummy, str(path), input_names=list(input_names), output_names=["logits"],
        dynamic_axes=axes, opset_version=OPSET, dynamo=False,
    )  # fmt: skip
    onnx.checker.check_model(str(path))


def onnx_logits(path: Path, encoder: TemplatePairEncoder, pairs: list[tuple[str, str]]) -> np.ndarray:
    """Logits of the graph at ``path`` for (query, document) pairs, one pair per call."""
    encoded = [encoder.encode([Turn(DEFAULT_SPEAKER, query)], [], document) for query, document in pairs]
    return score(session(path), encoder, encoded, batch_size=1)


def torch_logits(module: OneLogit, tokenizer: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The reference: ``tokenizer(query, document)`` into the PyTorch model, as transformers runs it."""
    out = []
    with torch.no_grad():
        for query, document in pairs:
            features = tokenizer(query, document, return_tensors="pt")
            out.append(float(module(*(features[name] for name in module.input_names))[0]))
    return np.array(out)


def calibrate(path: Path, graph: Path, encoder: TemplatePairEncoder) -> tuple[Calibrator, float]:
    """Platt map and abstention threshold fitted on labelled lists, scored by ``graph``."""
    from dialogue_ranker.evaluation.calibration import fit_platt
    from dialogue_ranker.evaluation.metrics import best_abstention_threshold

    try:
        lists = read_lists(path)
    except DataError as e:
        raise SystemExit(f"dialogue_ranker.export.hf: {e}") from None
    graph_session = session(graph)
    groups = [encoder.encode_request(x.context, x.situations, [c.text for c in x.candidates]) for x in lists]
    # One pair per call, as the service runs a dynamically quantised graph.
    logits_per_list = [
        z.tolist() for z in score_grouped(lambda p: score(graph_session, encoder, p, batch_size=1), groups)
    ]
    labels_per_list = [[int(c.appropriate) for c in x.candidates] for x in lists]
    calibration = fit_platt(
        [x for xs in logits_per_list for x in xs], [y for ys in labels_per_list for y in ys]
    )
    probs = [list(calibration(np.array(xs))) for xs in logits_per_list]
    threshold, accuracy = best_abstention_threshold(probs, labels_per_list)
    print(f"calibration on {len(probs)} lists: {calibration.to_dict()}; threshold {threshold:.3f} "
          f"(abstention accuracy {accuracy:.3f})")  # fmt: skip
    return calibration, threshold


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", type=Path, help="a local Hugging Face sequence-classification directory")
    parser.add_argument("--out", type=Path, required=True, help="the bundle directory to write")
    parser.add_argument("--name", help="the model's name (default: the source directory's name)")
    parser.add_argument("--version", default="1")
    parser.add_argument("--max-length", type=int, help="cap the pair length (default: the model's)")
    parser.add_argument("--positive-label", help="two-label heads: the positive label's name or index")
    parser.add_argument(
        "--serve", choices=["int8", "fp32"], default="int8", help="the graph the service runs"
    )
    parser.add_argument("--calibrate", type=Path, help="labelled ranking lists (JSONL) to fit calibration on")
    parser.add_argument(
        "--threshold", type=float, default=0.5, help="abstention threshold without --calibrate"
    )
    parser.add_argument(
        "--tolerance", type=float, default=1e-4, help="largest fp32 logit difference to PyTorch"
    )
    return parser.parse_args(argv)


def load_source(source: Path) -> tuple[Any, Any, Any]:
    """The checkpoint's config, tokenizer and model; exits when the tokenizer cannot serve."""
    config = AutoConfig.from_pretrained(source)
    tokenizer = AutoTokenizer.from_pretrained(source)
    if not tokenizer.is_fast:
        raise SystemExit(
            "ranker export-hf: the tokenizer has no fast (tokenizer.json) version; the service needs one"
        )
    if tokenizer.pad_token is None:
        raise SystemExit("dialogue_ranker.export.hf: the tokenizer has no pad token")
    model = AutoModelForSequenceClassification.from_pretrained(source).eval()
    return config, tokenizer, model


def check_parity(
    module: OneLogit,
    tokenizer: Any,
    graphs: tuple[Path, Path],
    encoder: TemplatePairEncoder,
    tolerance: float,
) -> dict[str, float]:
    """Both graphs' largest logit difference to PyTorch; exits when the fp32 one's passes ``tolerance``."""
    fp32, int8 = graphs
    reference = torch_logits(module, tokenizer, SAMPLE_PAIRS)
    fp32_error = float(np.max(np.abs(onnx_logits(fp32, encoder, SAMPLE_PAIRS) - reference)))
    int8_error = float(np.max(np.abs(onnx_logits(int8, encoder, SAMPLE_PAIRS) - reference)))
    print(f"parity on {len(SAMPLE_PAIRS)} pairs, largest |logit - PyTorch|: ", end="")
    print(f"fp32 {fp32_error:.2e}, int8 {int8_error:.2e}")
    if fp32_error > tolerance:
        raise SystemExit(
            f"ranker export-hf: the fp32 graph differs from PyTorch by {fp32_error:.2e} > {tolerance:g}"
        )
    return {"fp32_max_abs_logit_error": fp32_error, "int8_max_abs_logit_error": int8_error}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    source, out = args.source, args.out
    config, tokenizer, model = load_source(source)
    inputs = tuple(name for name in ALL_INPUTS if name in tokenizer.model_input_names)
    positive = positive_label(config, args.positive_label)
    module = OneLogit(model, inputs, positive).eval()
    max_length = max_length_of(config, tokenizer, args.max_length)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))
    fp32, int8 = out / "model-fp32.onnx", out / "model-int8.onnx"
    export_onnx(module, inputs, fp32)
    dynamic_int8(fp32, int8)
    encoder = TemplatePairEncoder.from_file(
        out / "tokenizer.json", max_length=max_length, pad_token=tokenizer.pad_token
    )
    parity = check_parity(module, tokenizer, (fp32, int8), encoder, args.tolerance)

    served = int8 if args.serve == "int8" else fp32
    calibration, threshold = Calibrator(method="platt", params={"a": 1.0, "b": 0.0}), args.threshold
    if args.calibrate is not None:
        calibration, threshold = calibrate(args.calibrate, served, encoder)
    metadata: dict[str, Any] = {
        "name": args.name or source.resolve().name,
        "version": args.version,
        "max_length": max_length,
        "ranker": {"file": served.name, "inputs": list(inputs), "output": "logits", "max_length": max_length},
        "graphs": {"fp32": fp32.name, "int8": int8.name},
        "tokenizer": "tokenizer.json",
        "encoding": {"kind": "template", "pad_token": tokenizer.pad_token},
        "calibration": calibration.to_dict(),
        "threshold": threshold,
        "source": {
            "architecture": type(model).__name__,
            "model_type": config.model_type,
            "num_labels": config.num_labels,
            "positive_label": positive,
            "activation": "sigmoid" if positive is None else "softmax of the positive label",
            "calibrated_on": str(args.calibrate) if args.calibrate else None,
        },
        "parity": parity,
    }
    if args.serve == "int8":
        metadata["serving"] = {"sub_batch_pairs": 1}
    (out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    print(f"wrote {out} (serves {served.name}, max length {max_length}, inputs {', '.join(inputs)})")
    return metadata


if __name__ == "__main__":
    main(sys.argv[1:])
