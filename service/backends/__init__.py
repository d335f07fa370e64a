"""Inference backends: ONNX Runtime in process, Triton (later), and a deterministic fake."""

from service.backends.base import Backend, build_backend

__all__ = ["Backend", "build_backend"]
