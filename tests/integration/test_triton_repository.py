"""The Triton model repository export (``python -m export.triton_repo``) on the real bundle.

PyTriton's tritonserver has only the Python backend, so the ``onnxruntime`` repository cannot be
loaded here: each ``config.pbtxt`` is parsed back into Triton's own ModelConfig protobuf (an
unknown field fails) and checked field by field, and the copied graph is run as Triton would feed it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from export.triton_repo import RepositoryOptions, parse_config, write_repository
from service.model_bundle import load_bundle

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gpu_repo(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("triton-repo")
    write_repository(model_dir, out, RepositoryOptions(device="gpu"))
    return out


def test_every_graph_of_the_bundle_becomes_a_model_with_its_onnx_file(
    gpu_repo: Path, model_dir: Path
) -> None:
    bundle = load_bundle(model_dir)
    expected = {"ranker": bundle.ranker.path} | (
        {"selector": bundle.selector.model.path} if bundle.selector else {}
    )
    assert {p.name for p in gpu_repo.iterdir()} == set(expected)
    for name, source in expected.items():
        assert (gpu_repo / name / "1" / "model.onnx").read_bytes() == source.read_bytes()


def test_the_gpu_config_batches_with_a_bounded_rejecting_queue_and_tensorrt_fp16(
    gpu_repo: Path, model_dir: Path
) -> None:
    spec = load_bundle(model_dir).ranker
    config = parse_config((gpu_repo / "ranker" / "config.pbtxt").read_text())
    assert config.backend == "onnxruntime" and config.max_batch_size == 64
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [
        (name, mc.TYPE_INT64, [-1]) for name in spec.input_names
    ]
    assert [o.name for o in config.output] == [spec.output_name]
    batcher = config.dynamic_batching
    assert 0 < batcher.max_queue_delay_microseconds <= 10_000
    assert list(batcher.preferred_batch_size) == [16, 32, 64]
    policy = batcher.default_queue_policy
    assert policy.timeout_action == mc.ModelQueuePolicy.REJECT and policy.max_queue_size > 0
    assert policy.default_timeout_microseconds > 0
    assert [g.kind for g in config.instance_group] == [mc.ModelInstanceGroup.KIND_GPU]
    (trt,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert trt.name == "tensorrt" and trt.parameters["precision_mode"] == "FP16"
    assert trt.parameters["trt_engine_cache_enable"] == "1" and trt.parameters["trt_engine_cache_path"]
    assert f"input_ids:64x{spec.max_length}" in trt.parameters["trt_profile_max_shapes"]
    assert "input_ids:1x1" in trt.parameters["trt_profile_min_shapes"]
    warmup_lengths = [w.inputs["input_ids"].dims[0] for w in config.model_warmup]
    assert warmup_lengths == sorted({*range(32, spec.max_length, 32), spec.max_length})


def test_the_cpu_config_has_cpu_instances_and_no_tensorrt(model_dir: Path, tmp_path: Path) -> None:
    write_repository(model_dir, tmp_path, RepositoryOptions(device="cpu", instances=2, cpu_threads=1))
    config = parse_config((tmp_path / "ranker" / "config.pbtxt").read_text())
    assert [(g.kind, g.count) for g in config.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, 2)]
    assert not config.optimization.execution_accelerators.gpu_execution_accelerator
    assert config.parameters["intra_op_thread_count"].string_value == "1"


def test_a_field_triton_does_not_know_fails_to_parse(gpu_repo: Path) -> None:
    text = (gpu_repo / "ranker" / "config.pbtxt").read_text()
    with pytest.raises(text_format.ParseError):
        parse_config(text + "\nmax_batch_sizes: 4\n")


def test_the_copied_graph_answers_one_logit_per_row_at_a_bucket_shape(
    gpu_repo: Path, model_dir: Path
) -> None:
    spec = load_bundle(model_dir).ranker
    session = ort.InferenceSession(
        str(gpu_repo / "ranker" / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    ids = np.ones((3, 32), dtype=np.int64)
    feeds = {name: ids if name != "token_type_ids" else np.zeros_like(ids) for name in spec.input_names}
    (logits,) = session.run([spec.output_name], feeds)
    assert np.asarray(logits).size == 3
