"""The Triton model repository export (``ranker triton-repo``) on real bundles.

Every test runs on a per-pair bundle (a tiny BERT exported by ``export.hf``) and
on a shared-prefix bundle (the shipped model when it is one); see ``tests/bundle_kinds.py``. Each
``config.pbtxt`` is parsed back into Triton's own ModelConfig protobuf (an unknown field fails) and
checked field by field, and the copied graph is run as Triton would feed it, warm-up samples
included. PyTriton's tritonserver has only the Python
backend, so the ``onnxruntime`` backend itself is not run here: the CPU repository is loaded with
its backend swapped for a Python model that runs the same graph (``-m triton``), so that Triton
checks the rest of the config, reads the warm-up files and runs every warm-up sample.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest
from bundle_kinds import KINDS, bundle_of_kind
from google.protobuf import text_format
from helpers import free_ports
from tritonclient.grpc import model_config_pb2 as mc

from dialogue_ranker.export.triton_repo import (
    WARMUP_DIR,
    RepositoryOptions,
    config_text,
    parse_config,
    write_repository,
)
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.tokenization import Turn

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=KINDS)
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Overrides conftest's: a per-pair bundle, then a shared-prefix one."""
    return bundle_of_kind(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def gpu_repo(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("triton-repo")
    write_repository(model_dir, out, RepositoryOptions(device="gpu"))
    return out


def longest_row(model_dir: Path) -> int:
    """The longest sequence the gateway sends: the model's max length, or a shared-prefix chunk's."""
    bundle = load_bundle(model_dir)
    encoder = bundle.pair_encoder()
    return encoder.max_chunk_tokens if isinstance(encoder, ListEncoder) else bundle.ranker.max_length


def test_every_graph_of_the_bundle_becomes_a_model_with_its_onnx_file(
    gpu_repo: Path, model_dir: Path
) -> None:
    bundle = load_bundle(model_dir)
    expected = {"ranker": bundle.ranker.path}
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
    (output,) = config.output
    assert output.name == spec.output_name and output.data_type == mc.TYPE_FP32
    # A logit per token for a shared-prefix ranker, one per pair otherwise.
    assert list(output.dims) == ([-1] if "segment_ids" in spec.input_names else [1])
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
    longest = longest_row(model_dir)
    assert f"input_ids:64x{longest}" in trt.parameters["trt_profile_max_shapes"]
    assert "input_ids:1x1" in trt.parameters["trt_profile_min_shapes"]
    warmup_lengths = [w.inputs["input_ids"].dims[0] for w in config.model_warmup]
    # The default buckets (every 32 up to 256) below the model's max length, it, and the longest row.
    buckets = {b for b in range(32, 257, 32) if b < spec.max_length}
    assert warmup_lengths == sorted({*buckets, spec.max_length, longest})


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


def warmup_feeds(model_dir: Path, warmup: mc.ModelWarmup) -> dict[str, np.ndarray]:
    """A warm-up sample's inputs as Triton builds them: zeros, or the file's int64 values."""
    feeds = {}
    for name, sample in warmup.inputs.items():
        assert sample.data_type == mc.TYPE_INT64
        (length,) = sample.dims
        if sample.WhichOneof("input_data_type") == "zero_data":
            feeds[name] = np.zeros((1, length), dtype=np.int64)
        else:
            data = (model_dir / WARMUP_DIR / sample.input_data_file).read_bytes()
            assert len(data) == 8 * length  # Triton reads batch-1 byte size from the file
            feeds[name] = np.frombuffer(data, dtype="<i8").reshape(1, length)
    return feeds


def test_every_warmup_sample_is_a_valid_row_the_graph_scores(gpu_repo: Path, model_dir: Path) -> None:
    spec = load_bundle(model_dir).ranker
    config = parse_config((gpu_repo / "ranker" / "config.pbtxt").read_text())
    session = ort.InferenceSession(
        str(gpu_repo / "ranker" / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    assert config.model_warmup
    for warmup in config.model_warmup:
        assert warmup.batch_size == 1 and set(warmup.inputs) == set(spec.input_names)
        feeds = warmup_feeds(gpu_repo / "ranker", warmup)
        if "segment_ids" in feeds:
            # A prefix and one candidate (never padding alone), token types as the encoder writes them.
            segments = feeds["segment_ids"][0]
            assert segments[0] == 0 and set(segments.tolist()) == {0, 1}
            assert list(segments) == sorted(segments)
            np.testing.assert_array_equal(feeds["token_type_ids"], feeds["segment_ids"])
        (logits,) = session.run([spec.output_name], feeds)
        assert np.isfinite(logits).all()


def test_the_copied_graph_answers_at_a_bucket_shape(gpu_repo: Path, model_dir: Path) -> None:
    bundle = load_bundle(model_dir)
    spec = bundle.ranker
    session = ort.InferenceSession(
        str(gpu_repo / "ranker" / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    encoder = bundle.pair_encoder()
    if isinstance(encoder, ListEncoder):
        # A logit per token of each padded sequence; the gateway's readout averages each candidate.
        sequences = encoder.encode_request([Turn("user", "could you make some coffee")], [], ["sure", "no"])
        batch = encoder.pad([*sequences, *sequences], pad_to=32)
        (logits,) = session.run([spec.output_name], batch.as_feeds(spec.input_names))
        assert np.asarray(logits).shape == batch.shape == (2, 32)
        assert batch.readout(logits).shape == (4,)
        return
    ids = np.ones((3, 32), dtype=np.int64)
    feeds = {name: ids if name != "token_type_ids" else np.zeros_like(ids) for name in spec.input_names}
    (logits,) = session.run([spec.output_name], feeds)
    assert np.asarray(logits).size == 3


#: The ``onnxruntime`` backend's stand-in (``1/model.py``): runs the model's graph on what Triton
#: feeds it and appends what each call held to the file the config's ``seen_log`` parameter names.
PYTHON_MODEL = """
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        graph = Path(args["model_repository"]) / args["model_version"] / "model.onnx"
        self.session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
        self.inputs = [i["name"] for i in config["input"]]
        self.output = config["output"][0]["name"]
        self.log = Path(config["parameters"]["seen_log"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            feeds = {n: pb_utils.get_input_tensor_by_name(request, n).as_numpy() for n in self.inputs}
            (out,) = self.session.run([self.output], feeds)
            segments = feeds.get("segment_ids")
            seen = {
                "shape": list(feeds[self.inputs[0]].shape),
                "segments": None if segments is None else sorted(set(segments.ravel().tolist())),
                "finite": bool(np.isfinite(out).all()),
            }
            with self.log.open("a") as log:
                log.write(json.dumps(seen) + "\\n")
            tensor = pb_utils.Tensor(self.output, np.asarray(out, dtype=np.float32))
            responses.append(pb_utils.InferenceResponse([tensor]))
        return responses
"""


@contextmanager
def python_backed_triton(repo: Path, models: list[str], work: Path) -> Iterator[str]:
    """PyTriton's tritonserver on ``repo`` until every model is ready; yields its HTTP address."""
    import pytriton
    from pytriton.utils.distribution import get_libs_path

    dist = Path(pytriton.__file__).parent / "tritonserver"
    backends = work / "backends"
    shutil.copytree(dist / "backends", backends)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    shutil.copy(dist / "python_backend_stubs" / version / "triton_python_backend_stub", backends / "python")
    # As export.triton_local: this interpreter's libpython first, its environment on PATH for the stub.
    libs = (
        str(sysconfig.get_config_var("LIBDIR") or ""),
        str(get_libs_path()),
        os.environ.get("LD_LIBRARY_PATH"),
    )
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": os.pathsep.join(part for part in libs if part),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    http, grpc = free_ports(2)
    command = [
        str(dist / "bin" / "tritonserver"), f"--model-repository={repo}", f"--backend-directory={backends}",
        "--http-address=127.0.0.1", f"--http-port={http}",
        "--grpc-address=127.0.0.1", f"--grpc-port={grpc}", "--allow-metrics=false",
        f"--backend-config=python,shm-region-prefix-name=repotest{os.getpid()}", "--exit-timeout-secs=5",
    ]  # fmt: skip
    log = work / "tritonserver.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"127.0.0.1:{http}"
    try:
        deadline = time.monotonic() + 90
        # The server reports ready before its models load: wait for each model's own readiness.
        while not all(_ready(url, model) for model in models):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"models did not load: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _ready(url: str, model: str) -> bool:
    try:
        return httpx.get(f"http://{url}/v2/models/{model}/ready", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.triton
def test_the_cpu_repository_loads_in_triton_and_runs_every_warmup(model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("pytriton", reason="nvidia-pytriton is not installed (pip install -e '.[dev]')")
    from tritonclient.http import InferenceServerClient, InferInput

    bundle = load_bundle(model_dir)
    repo = tmp_path / "repo"
    model_dirs = write_repository(model_dir, repo, RepositoryOptions(device="cpu", cpu_threads=1))
    configs = {}
    for directory in model_dirs:
        config = parse_config((directory / "config.pbtxt").read_text())
        config.backend = "python"
        config.parameters["seen_log"].string_value = str(tmp_path / f"{directory.name}.jsonl")
        (directory / "config.pbtxt").write_text(config_text(config))
        (directory / "1" / "model.py").write_text(PYTHON_MODEL)
        configs[directory.name] = config

    # A request of the ranker at a bucket length, as the gateway sends it.
    encoder = bundle.pair_encoder()
    sequences = encoder.encode_request([Turn("user", "could you make some coffee")], [], ["sure", "no"])
    batch = encoder.pad(sequences, pad_to=32)
    spec = bundle.ranker
    with python_backed_triton(repo, list(configs), tmp_path) as url:
        client = InferenceServerClient(url)
        inputs = []
        for name, array in batch.as_feeds(spec.input_names).items():
            tensor = InferInput(name, list(array.shape), "INT64")
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        served = client.infer("ranker", inputs).as_numpy(spec.output_name)
        client.close()

    session = ort.InferenceSession(str(spec.path), providers=["CPUExecutionProvider"])
    (expected,) = session.run([spec.output_name], batch.as_feeds(spec.input_names))
    np.testing.assert_allclose(batch.readout(served), batch.readout(expected), atol=1e-5)
    for name, config in configs.items():
        seen = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        warmups = seen[: len(config.model_warmup)]
        # Every warm-up sample ran (one row at each warm-up length) and scored finitely.
        expected_shapes = [[1, w.inputs[spec.input_names[0]].dims[0]] for w in config.model_warmup]
        assert sorted(s["shape"] for s in warmups) == sorted(expected_shapes)
        assert all(s["finite"] for s in warmups)
        if any(i.name == "segment_ids" for i in config.input):
            assert all(s["segments"] == [0, 1] for s in warmups)  # a prefix and a candidate
