"""Torch checkpoint -> ONNX graphs: fp32 export, ORT transformer optimisation, fp16 for GPU."""

from __future__ import annotations

from pathlib import Path

import onnx
import torch
from onnxruntime.transformers import optimizer as ort_optimizer
from transformers import AutoModelForSequenceClassification

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "logits"
OPSET = 17


class _LogitOnly(torch.nn.Module):
    """Wraps a sequence classifier so the graph has one output: a logit per pair, shape (batch,)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: D102
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.logits.squeeze(-1)


def export_module(
    module: torch.nn.Module,
    dummy: tuple[torch.Tensor, ...],
    path: str | Path,
    *,
    input_names: tuple[str, ...],
    output_name: str,
    axes: dict[str, dict[int, str]],
) -> Path:
    """Export an eval-mode module with the given dynamic axes and check the graph."""
    path = Path(path)
    # dynamo=False: the TorchScript exporter gives a plain graph that ORT's BERT fusions recognise
    # and that matched PyTorch to ~1e-7 here.
    torch.onnx.export(
        module,
        dummy,
        str(path),
        input_names=list(input_names),
        output_names=[output_name],
        dynamic_axes=axes,
        opset_version=OPSET,
        dynamo=False,
    )
    onnx.checker.check_model(str(path))
    return path


def export_fp32(checkpoint: str | Path, path: str | Path) -> Path:
    """Export a checkpoint with dynamic batch and sequence axes (TorchScript exporter)."""
    model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint), num_labels=1).eval()
    dummy = (
        torch.ones(2, 16, dtype=torch.long),
        torch.ones(2, 16, dtype=torch.long),
        torch.zeros(2, 16, dtype=torch.long),
    )
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    axes[OUTPUT_NAME] = {0: "batch"}
    return export_module(
        _LogitOnly(model), dummy, path, input_names=INPUT_NAMES, output_name=OUTPUT_NAME, axes=axes
    )


def _config(checkpoint: str | Path) -> tuple[int, int]:
    model_config = AutoModelForSequenceClassification.from_pretrained(str(checkpoint), num_labels=1).config
    return int(model_config.num_attention_heads), int(model_config.hidden_size)


def optimize(fp32_path: str | Path, path: str | Path, *, checkpoint: str | Path) -> Path:
    """ONNX Runtime's transformer optimiser (attention, layer-norm and GELU fusions) for CPU."""
    heads, hidden = _config(checkpoint)
    model = ort_optimizer.optimize_model(
        str(fp32_path), model_type="bert", num_heads=heads, hidden_size=hidden
    )
    model.save_model_to_file(str(path))
    return Path(path)


def to_fp16(fp32_path: str | Path, path: str | Path, *, checkpoint: str | Path) -> Path:
    """GPU variant: fused graph with fp16 weights and compute, fp32/int64 inputs and outputs kept."""
    heads, hidden = _config(checkpoint)
    model = ort_optimizer.optimize_model(
        str(fp32_path), model_type="bert", num_heads=heads, hidden_size=hidden, use_gpu=True
    )
    model.convert_float_to_float16(keep_io_types=True)
    model.save_model_to_file(str(path))
    return Path(path)
