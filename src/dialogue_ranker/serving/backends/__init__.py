"""Inference backends: ONNX Runtime in process, a remote Triton server, and a deterministic fake."""

from dialogue_ranker.serving.backends.base import AnyBackend, Backend, RemoteBackend, build_backend, is_remote

__all__ = ["AnyBackend", "Backend", "RemoteBackend", "build_backend", "is_remote"]
