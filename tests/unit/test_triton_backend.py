"""The Triton backend without a server: error translation, settings, construction."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import CliApp
from tritonclient.utils import InferenceServerException

from dialogue_ranker.serving.backends import build_backend, is_remote
from dialogue_ranker.serving.backends.triton import TritonBackend, translate_error
from dialogue_ranker.serving.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    Overloaded,
    status_and_type,
)
from dialogue_ranker.serving.model_bundle import OnnxModelSpec
from dialogue_ranker.serving.settings import Settings


def translated(status: str, message: str = "details"):
    error = InferenceServerException(msg=message, status=status)
    return translate_error(error, model="ranker", url="triton:8001", timeout_s=2.0)


def test_a_refused_connection_is_backend_unavailable_not_a_timeout() -> None:
    error = translated("StatusCode.UNAVAILABLE", "failed to connect to all addresses; Connection refused")
    assert isinstance(error, BackendUnavailable) and status_and_type(error) == (503, "backend_unavailable")


def test_a_deadline_is_backend_timeout() -> None:
    error = translated("StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded")
    assert isinstance(error, BackendTimeout) and status_and_type(error)[0] == 504


def test_an_inference_failure_is_backend_error_without_tritons_text() -> None:
    error = translated("StatusCode.INTERNAL", "onnx runtime error at /opt/secret/path")
    assert isinstance(error, BackendError) and status_and_type(error)[0] == 502
    assert "secret" not in error.message


@pytest.mark.parametrize("message", ["Exceeds maximum queue size", "Request timeout expired"])
def test_a_queue_policy_rejection_is_overloaded(message: str) -> None:
    error = translated("StatusCode.UNAVAILABLE", message)
    assert isinstance(error, Overloaded) and error.headers == {"Retry-After": "1"}


def test_triton_url_is_a_flag_of_its_own_and_of_the_triton_group() -> None:
    short = CliApp.run(Settings, cli_args=["--backend", "triton", "--triton-url", "triton:9001"])
    nested = CliApp.run(
        Settings, cli_args=["--triton.url", "triton:9002", "--triton.length-buckets", "64,32"]
    )
    assert short.backend == "triton" and short.triton.url == "triton:9001"
    assert nested.triton.url == "triton:9002" and nested.triton.length_buckets == [32, 64]


def test_build_backend_names_the_ranker_model_and_caps_buckets_at_its_length() -> None:
    settings = Settings(
        backend="triton",
        triton={"url": "t:1", "length_buckets": [32, 64, 128, 256], "ranker_model": "my-ranker"},
    )
    spec = OnnxModelSpec(Path("model.onnx"), ("input_ids", "attention_mask"), "logits", 96)
    backend = build_backend(settings, spec)
    assert isinstance(backend, TritonBackend) and is_remote(backend)
    assert backend.model_name == "my-ranker" and backend.url == "t:1"
    assert backend.length_buckets == (32, 64, 96)
    assert backend.input_names == ("input_ids", "attention_mask")


async def test_an_unstarted_backend_is_not_healthy_and_refuses_work() -> None:
    backend = TritonBackend(
        url="t:1", model_name="ranker", input_names=("input_ids",), output_name="logits",
        timeout_s=1.0, health_timeout_s=1.0,
    )  # fmt: skip
    assert not await backend.health()
    with pytest.raises(BackendUnavailable):
        await backend.infer(None)  # type: ignore[arg-type]


def test_a_model_triton_has_not_loaded_is_backend_unavailable() -> None:
    error = translated("StatusCode.NOT_FOUND", "Request for unknown model: 'ranker' is not found")
    assert isinstance(error, BackendUnavailable)
