"""Map a ranker logit to a calibrated P(appropriate).

The map is fitted on the development split at training time (``training/calibrate.py``) and
stored in the model's ``metadata.json`` under ``calibration``:

- ``{"method": "platt", "a": A, "b": B}``: p = sigmoid(A * logit + B). Temperature scaling is
  the special case B = 0, A = 1 / T.
- ``{"method": "isotonic", "x": [...], "y": [...]}``: piecewise-linear interpolation through the
  fitted breakpoints (x increasing, y non-decreasing), flat beyond the ends.

Both are monotonic non-decreasing in the logit, so calibrating never reorders a ranking.
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
