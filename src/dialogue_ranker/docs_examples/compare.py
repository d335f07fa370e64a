"""How far a documented answer may be from the live one, and where it is farther."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dialogue_ranker.docs_examples.registry import VOLATILE


def compact_json(value: Any) -> str:
    """``value`` as JSON on one line, non-ASCII text as it is."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class Tolerance:
    """How far a documented figure may be from the live one."""

    score: float
    logit: float
    threshold: float


#: The documented runtime forced on this host: scores of one runtime on one graph differ only by the
#: CPU's kernels (int8 or fp32 weights in OpenVINO bf16 on AMX).
SAME_RUNTIME = Tolerance(score=0.01, logit=0.05, threshold=0.001)
#: Another runtime (the documented one cannot run here): each has its own calibration map.
OTHER_RUNTIME = Tolerance(score=0.04, logit=0.25, threshold=0.03)


def differences(documented: Any, live: Any, tolerance: Tolerance, where: str = "") -> list[str]:
    """Where the live answer differs from the documented one beyond ``tolerance`` (empty: none)."""
    if isinstance(documented, dict):
        if not isinstance(live, dict):
            return [f"{where}: documented an object, got {compact_json(live)[:80]}"]
        found = []
        for key, value in documented.items():
            if key in VOLATILE:
                continue
            if key not in live:
                found.append(f"{where}.{key}: documented, absent from the live answer")
                continue
            found += differences(value, live[key], tolerance, f"{where}.{key}")
        return found
    if isinstance(documented, list):
        if not isinstance(live, list) or len(live) != len(documented):
            return [f"{where}: documented {len(documented)} items, got {compact_json(live)[:120]}"]
        return [d for i, (a, b) in enumerate(zip(documented, live, strict=True))
                for d in differences(a, b, tolerance, f"{where}[{i}]")]  # fmt: skip
    if isinstance(documented, float) and isinstance(live, int | float):
        key = where.rsplit(".", 1)[-1]
        limit = {"logit": tolerance.logit, "threshold": tolerance.threshold}.get(key, tolerance.score)
        if abs(documented - live) > limit:
            return [f"{where}: documented {documented}, live {live:.4f} (tolerance {limit})"]
        return []
    if documented != live:
        return [f"{where}: documented {compact_json(documented)}, live {compact_json(live)}"]
    return []


def rounded(value: Any, places: int = 3) -> Any:
    """Floats rounded to ``places`` for the pages (the answers' own precision is noise past it)."""
    if isinstance(value, float):
        return round(value, places)
    if isinstance(value, dict):
        return {k: rounded(v, places) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, places) for v in value]
    return value
