"""The retrieval encoder's export: ONNX against PyTorch (sentence-transformers), and what ships."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from bank_helpers import require_retriever

from dialogue_ranker.serving.banks.encoder import TextEncoder, file_sha256
from dialogue_ranker.serving.model_bundle import load_retriever

pytestmark = pytest.mark.integration
retriever = pytest.importorskip("dialogue_ranker.export.retriever", reason="the train extra is not installed")
pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")


def sentence_transformers_vectors(texts: list[str]) -> np.ndarray:
    """The PyTorch reference: the packaged all-MiniLM-L6-v2 through sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    from dialogue_ranker.training.backbone import backbone_dir

    model = SentenceTransformer(str(backbone_dir()), device="cpu")
    return np.asarray(model.encode(texts, normalize_embeddings=True), dtype=np.float32)


def served_vectors(directory: Path, texts: list[str]) -> np.ndarray:
    encoder = TextEncoder(load_retriever(directory), query_threads=2, bulk_threads=2)
    encoder.start()
    return encoder.embed_all(texts)


def test_the_shipped_retriever_agrees_with_the_pytorch_vectors_it_was_exported_from() -> None:
    # A dialogue-trained encoder's PyTorch weights are not committed: the export stores PyTorch's
    # vectors of the sample texts beside the graph (the export's test below checks them).
    directory = require_retriever()
    meta = json.loads((directory / "retriever.json").read_text())
    reference = np.load(directory / meta["parity"]["reference_file"])
    cosines = np.sum(served_vectors(directory, retriever.SAMPLE_TEXTS) * reference, axis=1)
    assert cosines.min() >= 0.99, cosines.round(4).tolist()
    shipped = meta["parity"][meta["precision"].replace(" ", "-")]
    assert np.isclose(cosines.min(), shipped["min_cosine"], atol=1e-3)
    assert meta["sha256"] == file_sha256(directory / "retriever.onnx")
    assert (meta["dim"], meta["pooling"], meta["normalized"]) == (384, "mean", True)


@pytest.mark.slow
def test_the_export_ships_the_fastest_int8_graph_that_agrees_with_pytorch(tmp_path: Path) -> None:
    meta = retriever.main(["--out", str(tmp_path / "retriever")])
    parity = meta["parity"]
    assert parity["fp32"]["min_cosine"] >= 0.9999  # the graph is the model, pooling and all
    good = [v for v in ("int8-dynamic", "int8-blockwise") if parity[v]["min_cosine"] >= 0.99]
    shipped = max(good, key=lambda v: parity[v]["texts_per_s"]) if good else "fp32"
    assert meta["precision"] == shipped.replace("-", " ")
    written = tmp_path / "retriever"
    assert meta["sha256"] == file_sha256(written / "retriever.onnx")
    texts = retriever.SAMPLE_TEXTS
    pytorch = sentence_transformers_vectors(texts)
    cosines = np.sum(served_vectors(written, texts) * pytorch, axis=1)
    assert np.isclose(cosines.min(), parity[shipped]["min_cosine"], atol=1e-4)
    # The stored reference is sentence-transformers' own vectors.
    np.testing.assert_allclose(np.load(written / parity["reference_file"]), pytorch, atol=1e-5)


def figures(**min_cosines: float) -> dict[str, dict[str, float]]:
    speeds = {"int8-dynamic": 450.0, "int8-blockwise": 290.0, "fp32": 250.0}
    return {
        variant.replace("_", "-"): {"min_cosine": cosine, "texts_per_s": speeds[variant.replace("_", "-")]}
        for variant, cosine in min_cosines.items()
    }


@pytest.mark.parametrize(
    ("cosines", "quantize", "chosen"),
    [
        ({"int8_dynamic": 0.995, "int8_blockwise": 0.999, "fp32": 1.0}, "auto", "int8-dynamic"),
        ({"int8_dynamic": 0.968, "int8_blockwise": 0.994, "fp32": 1.0}, "auto", "int8-blockwise"),
        ({"int8_dynamic": 0.968, "int8_blockwise": 0.98, "fp32": 1.0}, "auto", "fp32"),
        ({"int8_dynamic": 0.968, "int8_blockwise": 0.98, "fp32": 1.0}, "int8-dynamic", "int8-dynamic"),
    ],
)
def test_auto_ships_the_fastest_int8_graph_over_the_cosine(cosines: dict, quantize: str, chosen: str) -> None:
    args = argparse.Namespace(quantize=quantize, min_cosine=0.99, fp32_min_cosine=0.9999)
    assert retriever.choose(figures(**cosines), args) == chosen


def test_an_fp32_graph_that_strays_from_pytorch_stops_the_export() -> None:
    args = argparse.Namespace(quantize="auto", min_cosine=0.99, fp32_min_cosine=0.9999)
    with pytest.raises(SystemExit, match="the export is wrong"):
        retriever.choose(figures(int8_dynamic=0.99, int8_blockwise=0.99, fp32=0.98), args)
