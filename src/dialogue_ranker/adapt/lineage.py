"""The adapted bundle's lineage: what it was made from and how, in ``metadata.json`` and its card.

``adapted_by`` records the base bundle (name, version, SHA-256 of its files), the team's lists
(each path's name, SHA-256, lists and groups), the split, the guard and its replay files, the
training (steps planned and taken, what stopped it, the best epoch), the graph shipped and why, and
the seconds of each phase. ``GET /v1/models`` returns the metadata; the card (rewritten here by
:func:`dialogue_ranker.export.card.write_card`) says it in words.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dialogue_ranker.adapt.guard import distills
from dialogue_ranker.export.card import write_card
from dialogue_ranker.serving.model_bundle import METADATA_FILE

ADAPTED_BY = "adapted_by"


def lineage(guard: str, phases: dict[str, dict[str, Any]], team_teacher: float = 0.0) -> dict[str, Any]:
    """``adapted_by`` from the finished phases' facts (the report's phase, still running, excluded).

    ``team_teacher``: the base's share of the team's own lists' targets (``--team-teacher``).
    """
    prepared, trained, exported = phases["prepare"], phases["train"], phases["export"]
    base = prepared["base"]
    replay = [
        {k: r[k] for k in ("name", "file", "weight", "license", "train_lists")} for r in prepared["replay"]
    ]
    return {
        "command": "ranker adapt",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "base": {k: base[k] for k in ("name", "version", "id", "sha256")},
        "lists": prepared["sources"],
        "split": prepared["split"],
        "guard": {
            "kind": guard if replay else "none",
            "asked": guard,
            "replay": replay,
            "teacher": base["id"] if (replay and distills(guard)) or team_teacher else None,
            "team_teacher": team_teacher,
        },
        "training": {k: trained[k] for k in ("steps", "planned_steps", "stopped_by", "best_epoch")}
        | {"seconds": trained["seconds"]},
        "serving_settings_from_base": base["views"],
        "views_fitted": exported.get("views_fit"),
        "export": {"shipped": exported["shipped"], "why": exported["why"]},
        "seconds": {name: facts["seconds"] for name, facts in phases.items()},
    }


def record(bundle: Path, adapted_by: dict[str, Any]) -> None:
    """Write ``adapted_by`` into the bundle's metadata and rewrite its card."""
    path = bundle / METADATA_FILE
    metadata = json.loads(path.read_text())
    metadata[ADAPTED_BY] = adapted_by
    path.write_text(json.dumps(metadata, indent=2) + "\n")
    write_card(bundle)
