"""``ranker export-hf``: real Hugging Face directories (BERT, RoBERTa, DeBERTa-v2) to served bundles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import serve_in_process
from hf_models import BUILDERS
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import dialogue_ranker.export.hf as hf
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration

QUERY = "It is so hot in here, can you help?"
DOCUMENTS = [
    "Shall I open the window for you?",
    "Pizza is great.",
    "There is a fan in the closet.",
    "I do not know.",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each architecture: (Hugging Face directory, bundle serving its fp32 graph)."""
    root = tmp_path_factory.mktemp("hf")
    out = {}
    for name, build in BUILDERS.items():
        source = build(root / name)
        bundle = root / f"{name}-bundle"
        hf.main([str(source), "--out", str(bundle), "--serve", "fp32", "--name", name])
        out[name] = (source, bundle)
    return out


def pytorch_logits(source: Path, documents: list[str]) -> np.ndarray:
    """What a transformers user gets: tokenizer(query, document) -> model, reduced to one logit."""
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForSequenceClassification.from_pretrained(source).eval()
    with torch.no_grad():
        features = tokenizer([QUERY] * len(documents), documents, return_tensors="pt", padding=True)
        logits = model(**features).logits
    if logits.shape[-1] == 1:
        return logits[:, 0].numpy()
    return (logits[:, 1] - logits[:, 0]).numpy()


def settings_for(bundle: Path) -> Settings:
    return Settings(backend="onnx", model=bundle, onnx={"intra_op_threads": 1})


@pytest.mark.parametrize("architecture", list(BUILDERS))
async def test_an_exported_model_serves_rank_and_rerank_at_pytorch_logits(
    exported, architecture: str
) -> None:
    source, bundle = exported[architecture]
    expected = pytorch_logits(source, DOCUMENTS)
    async with serve_in_process(create_app(settings_for(bundle))) as client:
        rank = (await client.post("/rank", json={"context": QUERY, "candidates": DOCUMENTS})).json()
        rerank = (
            await client.post(
                "/v2/rerank", json={"model": architecture, "query": QUERY, "documents": DOCUMENTS}
            )
        ).json()
    logits = {int(r["id"]): r["logit"] for r in rank["ranking"]}
    np.testing.assert_allclose([logits[i] for i in range(len(DOCUMENTS))], expected, atol=1e-4)
    # The model's own activation is the calibration: sigmoid of the (positive-label) logit.
    scores = {r["index"]: r["relevance_score"] for r in rerank["results"]}
    np.testing.assert_allclose(
        [scores[i] for i in range(len(DOCUMENTS))], 1 / (1 + np.exp(-expected.astype(np.float64))), atol=1e-4
    )
    meta = json.loads((bundle / "metadata.json").read_text())
    assert (bundle / "model-int8.onnx").is_file() and meta["parity"]["fp32_max_abs_logit_error"] < 1e-4


def test_roberta_takes_no_token_type_ids_and_its_own_pair_template(exported) -> None:
    _, bundle = exported["roberta"]
    meta = json.loads((bundle / "metadata.json").read_text())
    assert meta["ranker"]["inputs"] == ["input_ids", "attention_mask"]
    assert meta["source"]["positive_label"] == 1 and meta["encoding"] == {
        "kind": "template",
        "pad_token": "<pad>",
    }
    assert meta["max_length"] == 128  # 130 positions, two of them before the first token


async def test_the_default_bundle_serves_the_int8_graph_one_pair_per_call(exported, tmp_path: Path) -> None:
    source, fp32_bundle = exported["bert-minilm"]
    bundle = tmp_path / "int8"
    hf.main([str(source), "--out", str(bundle)])
    meta = json.loads((bundle / "metadata.json").read_text())
    assert meta["ranker"]["file"] == "model-int8.onnx" and meta["serving"] == {"sub_batch_pairs": 1}
    async with serve_in_process(create_app(settings_for(bundle))) as client:
        int8 = (await client.post("/rank", json={"context": QUERY, "candidates": DOCUMENTS})).json()
    async with serve_in_process(create_app(settings_for(fp32_bundle))) as client:
        fp32 = (await client.post("/rank", json={"context": QUERY, "candidates": DOCUMENTS})).json()
    by_id = {r["id"]: r["logit"] for r in fp32["ranking"]}
    assert max(abs(r["logit"] - by_id[r["id"]]) for r in int8["ranking"]) < 0.05


def test_calibration_is_fitted_on_the_users_labelled_lists(exported, tmp_path: Path) -> None:
    source, _ = exported["bert-minilm"]
    expected = pytorch_logits(source, DOCUMENTS)
    # Lists labelled so that the model's better half is appropriate: a fit must find a rising map.
    order = np.argsort(-expected)
    labels = {int(i): (1.0 if rank < 2 else 0.0) for rank, i in enumerate(order)}
    data = tmp_path / "lists.jsonl"
    line = {"context": [{"speaker": "user", "text": QUERY}], "group": "g1",
            "candidates": [{"text": d, "label": labels[i]} for i, d in enumerate(DOCUMENTS)]}  # fmt: skip
    data.write_text("\n".join(json.dumps({**line, "group": f"g{k}"}) for k in range(3)) + "\n")
    bundle = tmp_path / "calibrated"
    meta = hf.main([str(source), "--out", str(bundle), "--serve", "fp32", "--calibrate", str(data)])
    assert meta["calibration"]["method"] == "platt" and meta["calibration"]["a"] > 0
    assert meta["calibration"] != {"method": "platt", "a": 1.0, "b": 0.0}
    assert 0.0 <= meta["threshold"] <= 1.0 and meta["source"]["calibrated_on"] == str(data)


def test_a_bad_calibration_line_names_the_file_line_and_field(exported, tmp_path: Path) -> None:
    source, _ = exported["roberta"]
    data = tmp_path / "bad.jsonl"
    data.write_text(
        json.dumps({"context": "hi", "candidates": [{"text": "a", "label": 1}], "group": "g"})
        + "\n"
        + '{"context": "hi"}\n'
    )
    with pytest.raises(SystemExit, match=r"bad\.jsonl:2: .*candidates"):
        hf.main([str(source), "--out", str(tmp_path / "b"), "--calibrate", str(data)])
