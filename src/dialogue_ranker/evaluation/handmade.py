"""The hand-made requests (``data/handmade_requests/requests.json``), and whether a model gets each.

One file, read by ``tests/integration/test_handmade_requests.py`` (each case a test on the shipped
model) and by ``ranker release-check`` (the share of cases a candidate gets right against the
shipped model's, on the same cases). A case is a ``POST /rank`` body and the person's pick; a pair
is one request under two situations, written once and read as two cases (``NAME-declines``: the
fitting reply naming the statement is the pick; ``NAME-accepts``: the careless yes is).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dialogue_ranker.serving.api.schemas import RankRequest
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.runtime import Runtime
from dialogue_ranker.serving.settings import Settings

#: The repository's file of hand-made requests.
DEFAULT_FILE = Path(__file__).resolve().parents[3] / "data" / "handmade_requests" / "requests.json"


@dataclass(frozen=True)
class Case:
    """A request a new user would try: the ``POST /rank`` body, the person's pick, its group."""

    name: str
    body: dict[str, Any]
    pick: int | str
    group: str

    @property
    def picked_id(self) -> str:
        """The id ``/rank`` gives the person's pick (its ``id``, else its index as a string)."""
        if isinstance(self.pick, str):
            return self.pick
        candidate = self.body["candidates"][self.pick]
        return candidate["id"] if isinstance(candidate, dict) else str(self.pick)


def load_cases(path: Path = DEFAULT_FILE) -> list[Case]:
    """Every case of the file, pairs read as two cases, in the file's order."""
    cases = []
    for group in json.loads(Path(path).read_text())["groups"]:
        for entry in group.get("cases", []):
            body = {k: v for k, v in entry.items() if k not in ("name", "pick")}
            cases.append(Case(entry["name"], body, entry["pick"], group["name"]))
        for pair in group.get("pairs", []):
            candidates = [pair["careless"], pair["fitting"], pair["aside"]]
            for suffix, situations, pick in (
                ("declines", pair["situation"], 1),
                ("accepts", pair["other_situation"], 0),
            ):
                body = {"context": pair["request"], "candidates": candidates, "situations": situations}
                cases.append(Case(f"{pair['pair']}-{suffix}", body, pick, group["name"]))
    return cases


async def _answers(settings: Settings, cases: Sequence[Case]) -> dict[str, dict[str, Any]]:
    runtime = await Runtime.start(settings, Metrics(generators=settings.ranking.generators))
    try:
        out = {}
        for case in cases:
            query = RankRequest.model_validate(case.body).to_query()
            result = await runtime.ranker.rank(query)
            out[case.name] = {"top": result.ranking[0].id, "abstain": result.abstain}
        return out
    finally:
        await runtime.close()


def rank_cases(
    model: Path, cases: Sequence[Case], *, backend: str = "onnx", openvino: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Each case's top candidate id and abstention, from the service's ranker on ``model`` (in process).

    The same path as ``POST /rank`` after the schema: the bundle's views, the repeat mask, the
    guidelines' intent masks and calibration, on the ``backend`` named (``onnx`` by default, as
    ``ranker evaluate`` scores) with ``openvino``'s settings (``precision``, ``weights``).
    """
    settings = Settings(model=model, backend=backend, openvino=openvino or {})  # type: ignore[arg-type]
    return asyncio.run(_answers(settings, cases))
