"""The two kinds of model bundle the Triton tests run on (``bundle_of_kind``).

``per-pair``: a tiny randomly initialised BERT cross-encoder (``hf_models.tiny_bert``) exported with
the project's Hugging Face exporter (``ranker export-hf``): one row per (context, candidate)
pair, inputs ``input_ids`` / ``attention_mask`` / ``token_type_ids``, output ``logits``, the
dynamic int8 graph served one pair per call, as a dynamically quantised bundle ships.
``$RANKER_TEST_PER_PAIR_MODEL``
names a real per-pair bundle instead.

``shared-prefix``: ``$RANKER_TEST_SHARED_PREFIX_MODEL`` when set, else the shipped model
(``helpers.real_model_dir``) when it is a shared-prefix bundle (real weights), else a tiny randomly
initialised BERT exported here with the project's own exporter (``export.graph_variants.export_fp32``)
under small length budgets, so that a request's candidates make a sequence longer than the model's
``max_length`` (the gateway's last length bucket) and a long candidate list is cut into several
sequences.

The tiny bundles are built once per session. Their scores mean nothing; their layout, graphs'
inputs and outputs and metadata are those of the exporters' bundles.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from helpers import REPO_ROOT, real_model_dir, write_tiny_tokenizer

PER_PAIR_ENV = "RANKER_TEST_PER_PAIR_MODEL"
SHARED_PREFIX_ENV = "RANKER_TEST_SHARED_PREFIX_MODEL"
#: The tiny shared-prefix bundle's budgets: positions up to 64, sequences up to 96 tokens, at most
#: 4 candidates each.
BUDGETS = {
    "max_prefix_tokens": 48,
    "max_candidate_tokens": 16,
    "max_chunk_tokens": 96,
    "max_chunk_candidates": 4,
}
#: The bundle kinds a test module runs on (``bundle_of_kind``).
KINDS = ("per-pair", "shared-prefix")

_built: dict[str, Path] = {}


def bundle_of_kind(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-pair or a shared-prefix bundle (see the module's docstring)."""
    if kind == "per-pair":
        return per_pair_bundle(tmp_path_factory)
    if kind == "shared-prefix":
        return shared_prefix_bundle(tmp_path_factory)
    raise ValueError(f"unknown bundle kind {kind!r}; expected one of {KINDS}")


def is_shared_prefix(path: Path) -> bool:
    meta = json.loads((path / "metadata.json").read_text())
    return (meta.get("encoding") or {}).get("kind") == "shared-prefix"


def _from_env(name: str, *, shared_prefix: bool) -> Path | None:
    env = os.environ.get(name)
    if not env:
        return None
    path = Path(env) if Path(env).is_absolute() else REPO_ROOT / env
    if not (path / "metadata.json").is_file():
        raise FileNotFoundError(f"${name}={env} has no metadata.json")
    if is_shared_prefix(path) != shared_prefix:
        kind = "shared-prefix" if shared_prefix else "per-pair"
        raise ValueError(f"${name}={env} is not a {kind} bundle (metadata.json encoding.kind)")
    return path


def per_pair_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``$RANKER_TEST_PER_PAIR_MODEL`` when set, else the tiny BERT bundle (built once per session)."""
    path = _from_env(PER_PAIR_ENV, shared_prefix=False)
    if path is not None:
        return path
    if "per-pair" not in _built:
        _built["per-pair"] = write_tiny_per_pair_bundle(tmp_path_factory.mktemp("per-pair"))
    return _built["per-pair"]


def shared_prefix_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``$RANKER_TEST_SHARED_PREFIX_MODEL``, else the shipped model when it is shared-prefix, else
    the tiny bundle (built once per session)."""
    path = _from_env(SHARED_PREFIX_ENV, shared_prefix=True)
    if path is not None:
        return path
    shipped = real_model_dir()
    if shipped is not None and is_shared_prefix(shipped):
        return shipped
    if "shared-prefix" not in _built:
        _built["shared-prefix"] = write_tiny_shared_prefix_bundle(
            tmp_path_factory.mktemp("shared-prefix") / "bundle"
        )
    return _built["shared-prefix"]


def write_tiny_per_pair_bundle(root: Path) -> Path:
    """``ranker export-hf`` on a tiny BERT (int8 served): ``root/bundle``."""
    from hf_models import tiny_bert

    import dialogue_ranker.export.hf as hf

    source = tiny_bert(root / "hf")
    bundle = root / "bundle"
    with warnings.catch_warnings():  # the TorchScript exporter's tracer and deprecation warnings
        warnings.simplefilter("ignore")
        hf.main([str(source), "--out", str(bundle), "--name", "tiny-per-pair", "--version", "0.0.1"])
    meta = json.loads((bundle / "metadata.json").read_text())
    assert meta["ranker"]["inputs"] == ["input_ids", "attention_mask", "token_type_ids"], meta["ranker"]
    return bundle


def write_tiny_shared_prefix_bundle(directory: Path) -> Path:
    """A shared-prefix bundle (fp32 graph, tokenizer, metadata.json) of a tiny random ranker."""
    import torch
    from transformers import BertConfig, BertModel

    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training.shared_prefix import INPUT_NAMES, OUTPUT_NAME, SharedPrefixRanker

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
        "serving": {"sub_batch_pairs": 1},  # as dialogue_ranker.export.shared_prefix_bundle writes it
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
