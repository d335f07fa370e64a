"""Inference backends: ONNX Runtime and OpenVINO in process, Triton remotely, a deterministic fake."""

from dialogue_ranker.serving.backends.auto import BackendChoice, choice_of
from dialogue_ranker.serving.backends.base import AnyBackend, Backend, RemoteBackend, is_remote
from dialogue_ranker.serving.backends.factory import build_backend

__all__ = [
    "AnyBackend",
    "Backend",
    "BackendChoice",
    "RemoteBackend",
    "build_backend",
    "choice_of",
    "is_remote",
]
