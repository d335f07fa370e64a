"""A bank request's final score: the ranker's logit and the retrieval cosine, fused.

The ranker alone orders a bank's nearest responses worse than their cosine does: it was trained on
lists whose wrong replies come from the same conversation, so another conversation's generic good
reply ("That sounds great!") scores as high as the specific one (issue #43). The cosine knows which
replies fit this context in particular. For a request that names a bank, each candidate's logit
(the bank's and the request's own) becomes

    fused = logit + cosine_weight * (cosine - cosine_centre) - hubness_weight * hubness

before calibration, ranking and abstention. ``hubness`` is the response's mean cosine with its
``hubness_neighbours`` nearest responses in the bank, less the bank's mean
(:mod:`dialogue_ranker.serving.banks.hubness`): generic replies that sit near everything lose what
they owe to being generic (a request's own candidates count 0, the bank's typical response).
``cosine_centre`` is the mean cosine of retrieved responses on the dev bank it was fitted on, so
fused scores keep the logit's scale and the calibration map in force still reads them; a fusion may
carry a map and threshold of its own (``calibration``, ``threshold``), fitted on fused scores,
which bank requests then use instead. A request without a bank is scored as before.

The fusion is stored in the retrieval encoder's ``retriever.json`` under ``fusion``, written by
``ranker evaluate-bank --write``, which measures it on dev banks (never by hand). ``ranker`` names
the ranker (``name@version``) it was fitted with: another ranker needs it refitted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dialogue_ranker.serving.calibration import Calibrator

METHODS = ("linear",)


@dataclass(frozen=True)
class Fusion:
    """How a bank request's logits and cosines combine (the default leaves the logit as it is)."""

    cosine_weight: float = 0.0
    cosine_centre: float = 0.0
    #: A map and abstention threshold fitted on fused scores (None: the bundle's own, in force).
    calibration: Calibrator | None = None
    threshold: float | None = None
    #: ``name@version`` of the ranker it was fitted with (None: not recorded).
    ranker: str | None = None
    #: What it was fitted on and measured (kept in ``retriever.json`` for the record).
    fitted: Mapping[str, Any] = field(default_factory=dict)
    #: How much a bank response's centred hubness is subtracted (0: not at all), and over how many
    #: of its nearest bank responses the hubness is measured.
    hubness_weight: float = 0.0
    hubness_neighbours: int = 10

    def __post_init__(self) -> None:
        for name in ("cosine_weight", "cosine_centre", "hubness_weight"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} {getattr(self, name)} is not finite")
        for name in ("cosine_weight", "hubness_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} {getattr(self, name)} is not >= 0")
        if self.hubness_neighbours < 1:
            raise ValueError(f"hubness_neighbours {self.hubness_neighbours} is not >= 1")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold {self.threshold} is not in [0, 1]")
        if (self.calibration is None) != (self.threshold is None):
            raise ValueError("calibration and threshold go together")

    @property
    def active(self) -> bool:
        """Whether a bank request's scores differ from the ranker's logits."""
        return self.cosine_weight > 0 or self.hubness_weight > 0 or self.calibration is not None

    def fuse(self, logits: np.ndarray, cosines: np.ndarray, hubness: np.ndarray | None = None) -> np.ndarray:
        """Each candidate's fused score (float32) from its logit, its cosine with the query, its hubness.

        ``hubness``: each candidate's centred hubness (None: 0 for every one).
        """
        logits = np.asarray(logits, dtype=np.float32)
        if self.cosine_weight > 0:
            cosines = np.asarray(cosines, dtype=np.float32)
            logits = logits + np.float32(self.cosine_weight) * (cosines - np.float32(self.cosine_centre))
        if self.hubness_weight > 0 and hubness is not None:
            logits = logits - np.float32(self.hubness_weight) * np.asarray(hubness, dtype=np.float32)
        return logits

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any] | None) -> Fusion:
        """From ``retriever.json``'s ``fusion`` (absent: no fusion).

        Raises:
            ValueError: an unknown method, a weight that is not a non-negative number, or a
                malformed map or threshold.
        """
        if not entry:
            return cls()
        method = str(entry.get("method", "linear"))
        if method not in METHODS:
            raise ValueError(f"method {method!r} is not one of {', '.join(METHODS)}")
        calibration = entry.get("calibration")
        threshold = entry.get("threshold")
        return cls(
            cosine_weight=float(entry.get("cosine_weight", 0.0)),
            cosine_centre=float(entry.get("cosine_centre", 0.0)),
            hubness_weight=float(entry.get("hubness_weight", 0.0)),
            hubness_neighbours=_whole(entry.get("hubness_neighbours", 10), "hubness_neighbours"),
            calibration=Calibrator.from_dict(calibration) if calibration else None,
            threshold=None if threshold is None else float(threshold),
            ranker=None if entry.get("ranker") is None else str(entry["ranker"]),
            fitted=dict(entry.get("fitted") or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``fusion`` entry of ``retriever.json``."""
        out: dict[str, Any] = {
            "method": "linear",
            "cosine_weight": self.cosine_weight,
            "cosine_centre": self.cosine_centre,
        }
        if self.hubness_weight > 0:
            out |= {"hubness_weight": self.hubness_weight, "hubness_neighbours": self.hubness_neighbours}
        if self.calibration is not None:
            out |= {"calibration": self.calibration.to_dict(), "threshold": self.threshold}
        if self.ranker is not None:
            out["ranker"] = self.ranker
        if self.fitted:
            out["fitted"] = dict(self.fitted)
        return out


def _whole(value: Any, name: str) -> int:
    """A whole number from JSON (a bool or a fraction is refused by name)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"{name} {value!r} is not a whole number")
    return int(value)


#: No fusion: a bank request's logits are the ranker's.
NO_FUSION = Fusion()
