"""``ranker triton-repo --runtime openvino``: a repository for Triton's OpenVINO backend on CPU nodes.

PyTriton's tritonserver has only the Python backend, not ``openvino``, so the backend itself is not
run here. Validated instead: each ``config.pbtxt`` parses into Triton's own ModelConfig protobuf
(an unknown field fails) with the fields the OpenVINO backend reads, and the IR it ships is loaded
by the ``openvino`` package with those parameters and scores every warm-up sample and a real
request as the bundle's ONNX graph does (see docs/guides/triton.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bundle_kinds import KINDS, bundle_of_kind
from test_triton_repository import warmup_feeds
from tritonclient.grpc import model_config_pb2 as mc

from dialogue_ranker.export.triton_repo import RepositoryOptions, parse_config, write_repository
from dialogue_ranker.serving.backends.openvino import openvino_available
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.tokenization import Turn

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not openvino_available(), reason="openvino is not installed (the openvino extra)"),
]


@pytest.fixture(scope="module", params=KINDS)
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Overrides conftest's: a per-pair bundle, then a shared-prefix one."""
    return bundle_of_kind(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def repo(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("triton-openvino")
    options = RepositoryOptions(device="cpu", runtime="openvino", precision="bf16", cpu_threads=2)
    write_repository(model_dir, out, options)
    return out


def compiled(repo: Path, name: str):
    """The shipped IR compiled as the backend would from the config's parameters."""
    import openvino as ov

    config = parse_config((repo / name / "config.pbtxt").read_text())
    params = {k: v.string_value for k, v in config.parameters.items()}
    properties = {
        "NUM_STREAMS": int(params["NUM_STREAMS"]),
        "INFERENCE_NUM_THREADS": int(params["INFERENCE_NUM_THREADS"]),
        "INFERENCE_PRECISION_HINT": "bf16" if params.get("HINT_BF16") == "YES" else "f32",
    }
    core = ov.Core()
    return core.compile_model(
        core.read_model(str(repo / name / "1" / config.default_model_filename)), "CPU", properties
    )


def test_the_config_targets_the_openvino_backend_on_cpu(repo: Path, model_dir: Path) -> None:
    names = ["ranker"]  # the one model a bundle serves
    assert sorted(p.name for p in repo.iterdir()) == names
    for name in names:
        config = parse_config((repo / name / "config.pbtxt").read_text())
        assert config.backend == "openvino" and config.default_model_filename == "model.xml"
        assert [g.kind for g in config.instance_group] == [mc.ModelInstanceGroup.KIND_CPU]
        params = {k: v.string_value for k, v in config.parameters.items()}
        assert params == {
            "NUM_STREAMS": "2",
            "INFERENCE_NUM_THREADS": "2",
            "PERFORMANCE_HINT": "THROUGHPUT",
            "HINT_BF16": "YES",
        }
        assert not config.optimization.execution_accelerators.gpu_execution_accelerator
        assert (repo / name / "1" / "model.xml").is_file() and (repo / name / "1" / "model.bin").is_file()
        assert not (repo / name / "1" / "model.onnx").exists()


def test_the_ir_scores_every_warmup_sample(repo: Path) -> None:
    config = parse_config((repo / "ranker" / "config.pbtxt").read_text())
    request = compiled(repo, "ranker").create_infer_request()
    for warmup in config.model_warmup:
        (logits,) = request.infer(warmup_feeds(repo / "ranker", warmup)).values()
        assert np.isfinite(logits).all()


def test_the_ir_scores_a_request_as_the_onnx_graph_does(repo: Path, model_dir: Path) -> None:
    import openvino as ov

    bundle = load_bundle(model_dir)
    encoder = bundle.pair_encoder()
    turns = [Turn("user", "Could you make some coffee for my sister?")]
    candidates = ["Sure, it is brewing.", "No.", "Sorry, the machine is broken."]
    items = encoder.encode_request(turns, ["The coffee has not been prepared."], candidates)
    batch = encoder.pad(items)  # type: ignore[arg-type]  (pairs or sequences, as the encoder made)
    feeds = batch.as_feeds(bundle.ranker.input_names)
    # One thread in f32 on both sides: the same arithmetic in the same order, so the same logits
    # (bf16 with several threads may sum in another order from one compilation to the next).
    exact = {"INFERENCE_PRECISION_HINT": "f32", "NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1}
    logits = {
        name: ov.Core().compile_model(str(path), "CPU", exact).create_infer_request().infer(feeds)
        for name, path in (("ir", repo / "ranker" / "1" / "model.xml"), ("onnx", bundle.ranker.path))
    }
    output = bundle.ranker.output_name
    np.testing.assert_allclose(
        batch.readout(logits["ir"][output]), batch.readout(logits["onnx"][output]), atol=1e-5
    )


def test_openvino_is_refused_for_gpu_nodes() -> None:
    with pytest.raises(ValueError, match="CPU nodes"):
        RepositoryOptions(device="gpu", runtime="openvino")
