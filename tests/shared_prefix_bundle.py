"""A shared-prefix model bundle for the Triton tests, next to the shipped per-pair one.

``$RANKER_TEST_SHARED_PREFIX_MODEL`` names a real one (e.g. a ``make model`` output); without it a
tiny randomly initialised BERT is exported here with the project's own exporter
(``export.shared_prefix.export_fp32``) under small length budgets, so that a request's candidates
make a sequence longer than the model's ``max_length`` (the gateway's last length bucket) and a
long candidate list is cut into several sequences. Its scores mean nothing; the layout, the graph's
inputs and outputs and the bundle's metadata are those of a shipped shared-prefix bundle.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from helpers import REPO_ROOT, real_model_dir, write_tiny_tokenizer

ENV = "RANKER_TEST_SHARED_PREFIX_MODEL"
#: Small budgets: positions up to 64, sequences up to 96 tokens, at most 4 candidates each.
BUDGETS = {
    "max_prefix_tokens": 48,
    "max_candidate_tokens": 16,
    "max_chunk_tokens": 96,
    "max_chunk_candidates": 4,
}
#: The bundle kinds a test module runs on (``bundle_of_kind``).
KINDS = ("per-pair", "shared-prefix")

_built: list[Path] = []


def bundle_of_kind(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped per-pair bundle (skipped when absent, as conftest's ``model_dir``) or a shared-prefix
    one."""
    if kind == "per-pair":
        path = real_model_dir()
        if path is None:
            pytest.skip("no real model: models/dialogue-minilm-l6 is absent and RANKER_TEST_MODEL is not set")
        return path
    return shared_prefix_bundle(tmp_path_factory)


def shared_prefix_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``$RANKER_TEST_SHARED_PREFIX_MODEL`` when set, else the tiny bundle (built once per session)."""
    env = os.environ.get(ENV)
    if env:
        path = Path(env) if Path(env).is_absolute() else REPO_ROOT / env
        if not (path / "metadata.json").is_file():
            raise FileNotFoundError(f"${ENV}={env} has no metadata.json")
        return path
    if not _built:
        _built.append(write_tiny_shared_prefix_bundle(tmp_path_factory.mktemp("shared-prefix") / "bundle"))
    return _built[0]


def write_tiny_shared_prefix_bundle(directory: Path) -> Path:
    """A shared-prefix bundle (fp32 graph, tokenizer, metadata.json) of a tiny random ranker."""
    import torch
    from transformers import BertConfig, BertModel

    from export.shared_prefix import export_fp32
    from service.list_encoding import ListEncoder
    from training.shared_prefix import INPUT_NAMES, OUTPUT_NAME, SharedPrefixRanker

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = write_tiny_tokenizer(directory / "tokenizer.json")
    encoder = ListEncoder.from_file(tokenizer, **BUDGETS)
    torch.manual_seed(0)
    # The exporter's dummy input (ListEncoder.synthetic) uses token id 1000: the vocabulary covers it.
    config = BertConfig(
        vocab_size=1024, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=encoder.max_length,
    )  # fmt: skip
    checkpoint = directory.parent / f"{directory.name}-checkpoint"
    checkpoint.mkdir(exist_ok=True)
    SharedPrefixRanker(BertModel(config, add_pooling_layer=False)).save(checkpoint, tokenizer)
    with warnings.catch_warnings():  # the TorchScript exporter's tracer and deprecation warnings
        warnings.simplefilter("ignore")
        export_fp32(checkpoint, directory / "model.onnx", encoder)
    metadata = {
        "name": "tiny-shared-prefix",
        "version": "0.0.1",
        "max_length": encoder.max_length,
        "tokenizer": "tokenizer.json",
        "encoding": {"kind": "shared-prefix", **encoder.budgets()},
        "serving": {"sub_batch_pairs": 1},  # as export.shared_prefix writes it
        "ranker": {
            "file": "model.onnx",
            "inputs": list(INPUT_NAMES),
            "output": OUTPUT_NAME,
            "max_length": encoder.max_length,
        },
        "calibration": {"method": "platt", "a": 1.0, "b": 0.0},
        "threshold": 0.5,
    }
    (directory / "metadata.json").write_text(json.dumps(metadata, indent=2))
    return directory
