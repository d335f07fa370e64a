"""The retrieval encoder as an ONNX graph: a transformer, its pooling and L2 normalisation in one.

The service embeds bank responses and request contexts with ONNX Runtime alone (no torch), so
the pooling a sentence-transformers model runs in Python goes into the graph: the graph takes the
tokenizer's arrays and returns one unit vector per text (``embedding``, float32 (texts, dim)).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from transformers import AutoModel, AutoTokenizer

from dialogue_ranker.export.quantize import blockwise_int8, dynamic_int8

OPSET = 17
ALL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "embedding"
#: Graph variants, in the order the export measures them.
VARIANTS = ("int8-dynamic", "int8-blockwise", "fp32")


@dataclass(frozen=True)
class Source:
    """A sentence encoder to export: its directory, model, tokenizer, pooling and length."""

    directory: Path
    model: Any
    tokenizer: Any
    #: ``mean`` (masked mean of the last hidden states) or ``cls``.
    pooling: str
    max_length: int
    #: True for a sentence-transformers directory (modules.json): it is its own PyTorch reference.
    sentence_transformers: bool
    input_names: tuple[str, ...]


def _pooling(directory: Path) -> str:
    """The pooling a sentence-transformers directory declares (mean for a plain encoder)."""
    for config in sorted(directory.glob("*_Pooling/config.json")):
        modes = json.loads(config.read_text())
        if modes.get("pooling_mode_cls_token"):
            return "cls"
        if not modes.get("pooling_mode_mean_tokens", True):
            raise SystemExit(f"ranker export-retriever: {config}: only mean or CLS pooling is exported")
    return "mean"


def _max_length(directory: Path, config: Any, requested: int | None) -> int:
    """The source's own text length (sentence_bert_config.json, else its positions), or the requested."""
    st_config = directory / "sentence_bert_config.json"
    own = json.loads(st_config.read_text()).get("max_seq_length") if st_config.is_file() else None
    length = int(own or min(512, int(getattr(config, "max_position_embeddings", 512))))
    return min(length, requested) if requested else length


def load_source(directory: Path, *, max_length: int | None = None) -> Source:
    """A sentence-transformers or plain Hugging Face encoder directory, in eval mode on the CPU."""
    tokenizer = AutoTokenizer.from_pretrained(directory)
    if not tokenizer.is_fast:
        raise SystemExit("ranker export-retriever: the tokenizer has no fast (tokenizer.json) version")
    # Eager attention: the exporter traces it into plain MatMul/Softmax nodes the quantizers know.
    model = AutoModel.from_pretrained(directory, attn_implementation="eager").eval()
    return Source(
        directory=directory,
        model=model,
        tokenizer=tokenizer,
        pooling=_pooling(directory),
        max_length=_max_length(directory, model.config, max_length),
        sentence_transformers=(directory / "modules.json").is_file(),
        input_names=tuple(name for name in ALL_INPUTS if name in tokenizer.model_input_names),
    )


class PooledEncoder(torch.nn.Module):
    """The transformer, then mean (or CLS) pooling over the real tokens, then L2 normalisation."""

    def __init__(self, model: Any, pooling: str, input_names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.pooling = pooling
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:  # noqa: D102
        feeds = dict(zip(self.input_names, inputs, strict=True))
        hidden = self.model(**feeds).last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = feeds["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)


def export_fp32(source: Source, path: Path) -> Path:
    """The fp32 graph, dynamic in texts and tokens."""
    module = PooledEncoder(source.model, source.pooling, source.input_names).eval()
    dummy = tuple(torch.ones(2, 8, dtype=torch.long) for _ in source.input_names)
    axes: dict[str, dict[int, str]] = {name: {0: "texts", 1: "tokens"} for name in source.input_names}
    axes[OUTPUT] = {0: "texts"}
    with torch.no_grad():
        torch.onnx.export(
            module, dummy, str(path), input_names=list(source.input_names), output_names=[OUTPUT],
            dynamic_axes=axes, opset_version=OPSET, dynamo=False,
        )  # fmt: skip
    onnx.checker.check_model(str(path))
    return path


def build_variants(fp32: Path, directory: Path) -> dict[str, Path]:
    """Each variant's graph: the fp32 one and its two int8 forms (as the ranker's export makes them)."""
    return {
        "int8-dynamic": dynamic_int8(fp32, directory / "retriever-int8-dynamic.onnx"),
        "int8-blockwise": blockwise_int8(fp32, directory / "retriever-int8-blockwise.onnx"),
        "fp32": fp32,
    }


def reference_embeddings(source: Source, texts: list[str]) -> np.ndarray:
    """The PyTorch reference: sentence-transformers' own ``encode`` where the source is one.

    Otherwise the pooled module on the Hugging Face tokenizer's arrays, cut to the same length.
    """
    if source.sentence_transformers:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(source.directory), device="cpu")
        model.max_seq_length = source.max_length
        return np.asarray(model.encode(texts, batch_size=16, normalize_embeddings=True), dtype=np.float32)
    module = PooledEncoder(source.model, source.pooling, source.input_names).eval()
    features = source.tokenizer(
        texts, padding=True, truncation=True, max_length=source.max_length, return_tensors="pt"
    )
    with torch.no_grad():
        return module(*(features[name] for name in source.input_names)).numpy()
