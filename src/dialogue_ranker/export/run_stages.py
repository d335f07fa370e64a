"""A run's training history as its model card and bundle describe it: stages, soup members, datasets.

A run's ``config.json`` holds its first stage's under ``init`` (``ranker train --init``), a soup's
members under ``interpolation`` (``ranker interpolate --with``) and an output ensemble's under
``ensemble`` (``ranker export --ensemble-with``); these functions walk that nesting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATASETS = {
    "sugar": (
        "SUGAR (situated response selection)",
        "CC BY-SA 4.0",
        "Otani et al., 'A Textual Dataset for Situated Proactive Response Selection', ACL 2023, "
        "data release v4.1.1 (derived in part from ConceptNet 5, CC BY-SA 4.0, and ATOMIC, CC BY 4.0)",
    ),
    "topical-chat": (
        "Topical-Chat (knowledge-grounded socialbot conversations) with mined hard negatives",
        "CDLA-Sharing 1.0",
        "Gopalakrishnan et al., 'Topical-Chat: Towards Knowledge-Grounded Open-Domain Conversations', "
        "Interspeech 2019 (Amazon Alexa Prize)",
    ),
    # ../shared/data/README.md gives each source and licence; all three may ship with attribution.
    "sgd": (
        "Schema-Guided Dialogue (task-oriented assistant dialogues, DSTC8) with mined hard negatives",
        "CC BY-SA 4.0",
        "Rastogi et al., 'Towards Scalable Multi-domain Conversational Agents: The Schema-Guided "
        "Dialogue Dataset', AAAI 2020",
    ),
    "persona-chat": (
        "Synthetic-Persona-Chat (persona-grounded open chat) with retrieved hard negatives",
        "CC BY 4.0",
        "Jandaghi et al., 'Faithful Persona-based Conversational Dataset Generation with Large "
        "Language Models', 2023 (Google)",
    ),
    "taskmaster": (
        "Taskmaster-3/4 (coffee-ordering dialogues and human-rated agent turns)",
        "CC BY 4.0",
        "Byrne et al., Taskmaster (Google); TM-4 released with 'PERL: Parameter Efficient "
        "Reinforcement Learning from Human Feedback', 2024",
    ),
    # Its lists' groups are "written-situation: NAME" (training.converters.written_situations).
    "written-situation": (
        "Situated requests written for this project (data/written_situations/)",
        "Apache-2.0",
        "Written by the ranking-service developers",
    ),
}


def dataset_of(name: str, file: str | Path | None = None) -> tuple[str, str, str]:
    """Dataset, licence and attribution of a training file, by its name; ``?`` when unknown.

    ``topical-chat-fact`` is a Topical-Chat conversion with another negative mix. A name that says
    nothing (``tc-short-positive``) is credited by its lists' ``group``, which every converter
    prefixes with its dataset (``topical-chat-t_...``, ``sugar-request: ...``), when ``file`` can
    be read; never by a guess.
    """
    known = [key for key in DATASETS if name == key or name.startswith(key + "-")]
    if not known and file is not None and Path(file).is_file():
        with Path(file).open(encoding="utf-8") as lines:
            group = str(json.loads(next(lines, "{}") or "{}").get("group", ""))
        known = [key for key in DATASETS if group.startswith((key + "-", key + ":"))]
    return DATASETS[max(known, key=len)] if known else (name, "?", "?")


def training_stages(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's configuration after its earlier stages' (``training.train --init``), first first."""
    init = config.get("init") or {}
    earlier = training_stages(init["config"]) if init.get("config") else []
    return [*earlier, config]


def soup_members(config: dict[str, Any]) -> list[tuple[str, float, dict[str, Any]]]:
    """(label, share, configuration) of each run averaged into the weights or the outputs.

    One unlabelled run when neither ``dialogue_ranker.training.interpolate --with`` blended others in nor
    ``--ensemble-with`` added one; else A (the ``--run``), B, C...
    """
    blend = (
        (config.get("interpolation") or {}).get("with") or (config.get("ensemble") or {}).get("with") or []
    )
    if not blend:
        return [("", 1.0, config)]
    rest = 1.0 - sum(m["weight"] for m in blend)
    # A member recorded before interpolate kept its configuration lists no stages of its own.
    members = [(rest, config)] + [(m["weight"], m.get("config") or {"data": []}) for m in blend]
    return [(chr(ord("A") + i), share, c) for i, (share, c) in enumerate(members)]


def continued_from_soup(config: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The soup (or output ensemble) a run's stages continued from, and those later stages in order.

    ``(config, [])`` for a run that is itself a soup, or that no soup is under. The distilled
    ranker (``dialogue_ranker.training.train --init <soup> --teacher ...``) is one stage after its soup.
    """
    after: list[dict[str, Any]] = []
    current = config
    while not (current.get("interpolation") or current.get("ensemble")):
        earlier = (current.get("init") or {}).get("config")
        if not earlier:
            return config, []
        after.insert(0, current)
        current = earlier
    return current, after


def stage_rows(config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(stage label, stage configuration) of every run in the weights, first stage first.

    ``1``, ``2`` for one run; ``A1``, ``A2``, ``B1``... for a soup, then ``S1``... for the stages
    trained on from it.
    """
    soup, after = continued_from_soup(config)
    return [
        (f"{label}{n}", stage)
        for label, _, member in soup_members(soup)
        for n, stage in enumerate(training_stages(member), start=1)
        if "data" in stage and stage["data"]
    ] + [(f"S{n}", stage) for n, stage in enumerate(after, start=1) if stage.get("data")]


def has_stages(config: dict[str, Any]) -> bool:
    """Whether a run had several stages (or continued from a soup): the card explains the labels."""
    members = soup_members(config)
    return any(len(training_stages(m)) > 1 for _, _, m in members) or bool(continued_from_soup(config)[1])
