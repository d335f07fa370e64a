"""Map a ranker logit to a calibrated P(appropriate).

The map is fitted on the development split at training time (``training/calibrate.py``) and
stored in the model's ``metadata.json`` under ``calibration``:

- ``{"method": "platt", "a": A, "b": B}``: p = sigmoid(A * logit + B). Temperature scaling is
  the special case B = 0, A = 1 / T.
- ``{"method": "isotonic", "x": [...], "y": [...]}``: piecewise-linear interpolation through the
  fitted breakpoints (x increasing, y non-decreasing), flat beyond the ends.

Both are monotonic non-decreasing in the logit, so calibrating never reorders a ranking.

That map and the abstention ``threshold`` are fitted on ONNX Runtime's logits. Another runtime
computes slightly different logits (OpenVINO in bf16: about 0.08 apart on average), so a bundle
may carry a map and threshold per runtime under ``calibration_by_runtime`` (keyed by
:func:`runtime_key`, written by ``ranker calibrate-runtimes``); the service and ``ranker evaluate``
use the entry of the runtime that scores, and the bundle's own map where it has none
(:meth:`~dialogue_ranker.serving.model_bundle.ModelBundle.for_runtime`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1.0 + ex)
    return out


@dataclass(frozen=True)
class Calibrator:
    """A fitted, monotonic logit -> probability map."""

    method: str
    params: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.method == "platt":
            if float(self.params["a"]) <= 0:
                raise ValueError("platt calibration needs a > 0 to stay monotonic increasing")
        elif self.method == "isotonic":
            x = np.asarray(self.params["x"], dtype=np.float64)
            y = np.asarray(self.params["y"], dtype=np.float64)
            if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
                raise ValueError("isotonic calibration needs matching x and y of length >= 2")
            if np.any(np.diff(x) <= 0) or np.any(np.diff(y) < 0):
                raise ValueError("isotonic calibration needs increasing x and non-decreasing y")
        else:
            raise ValueError(f"unknown calibration method {self.method!r}")

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Calibrator:
        """Build from the ``calibration`` entry of ``metadata.json``."""
        params = {k: v for k, v in spec.items() if k != "method"}
        return cls(method=str(spec["method"]), params=params)

    @classmethod
    def identity(cls) -> Calibrator:
        """Plain sigmoid of the logit (an uncalibrated model)."""
        return cls(method="platt", params={"a": 1.0, "b": 0.0})

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in ``metadata.json``."""
        return {"method": self.method, **{k: v for k, v in self.params.items()}}

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        """Probabilities (float64) for an array of logits."""
        z = np.asarray(logits, dtype=np.float64)
        if self.method == "platt":
            return sigmoid(float(self.params["a"]) * z + float(self.params["b"]))
        x = np.asarray(self.params["x"], dtype=np.float64)
        y = np.asarray(self.params["y"], dtype=np.float64)
        return np.interp(z, x, y)


def runtime_key(backend: str, precision: str) -> str:
    """How ``calibration_by_runtime`` names the runtime that computes a graph's logits.

    ``onnx`` for ONNX Runtime (at the graph's own precision), ``openvino-bf16`` and
    ``openvino-f32`` for OpenVINO (``--auto.runtimes`` spells them so), a backend's bare name when it
    reports no precision (``triton``, ``fake``).
    """
    if backend == "onnx" or precision in ("", "-"):
        return backend
    return f"{backend}-{precision}"


@dataclass(frozen=True)
class RuntimeCalibration:
    """A calibration map and abstention threshold fitted on one runtime's logits."""

    calibration: Calibrator
    threshold: float

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> RuntimeCalibration:
        """Build from one entry of ``calibration_by_runtime`` (``calibration`` and ``threshold``).

        Raises:
            ValueError: the map is malformed or the threshold is not in [0, 1].
        """
        threshold = float(entry["threshold"])
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold {threshold} is not in [0, 1]")
        return cls(Calibrator.from_dict(entry["calibration"]), threshold)
