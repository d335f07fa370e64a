"""The requests ``ranker bench`` sends: SUGAR's where ``../shared/data`` has them, else made up alike.

A SUGAR request is one user turn, 12 situational statements and 3 candidates (about 135 tokens a
(context, candidate) pair); the made-up ones have the same shape, so the figures compare.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from dialogue_ranker.serving.settings import REPO_ROOT

SUGAR = REPO_ROOT.parent / "shared" / "data" / "sugar" / "sugar.jsonl"
ACTS = ("open", "close", "check", "book", "cancel", "order", "bring", "clean", "find", "call")
THINGS = ("the window", "a taxi", "the heater", "a table for two", "the fridge", "the lights",
          "my flight", "the garage door", "a pizza", "the doctor")  # fmt: skip


def sugar_requests(path: Path = SUGAR, count: int = 200) -> list[dict[str, Any]]:
    """The first ``count`` SUGAR examples as ``/rank`` bodies (request, 12 statements, 3 replies)."""
    requests = []
    with path.open() as lines:
        for line in lines:
            row = json.loads(line)
            replies = [row["r"]] + [d["r"] for d in row["r.distractors"]]
            requests.append({"context": row["u"], "situations": row["s.sents"], "candidates": replies})
            if len(requests) == count:
                break
    return requests


def made_up_requests(count: int = 200, seed: int = 0) -> list[dict[str, Any]]:
    """SUGAR-shaped requests from templates: a turn, 12 statements, 3 candidates."""
    rng = random.Random(seed)
    requests = []
    for _ in range(count):
        act, thing = rng.choice(ACTS), rng.choice(THINGS)
        statements = [
            f"The user {rng.choice(('is', 'was', 'has been'))} near {rng.choice(THINGS)} "
            f"{rng.choice(('this morning', 'since noon', 'all day', 'for an hour'))}."
            for _ in range(12)
        ]
        candidates = [
            f"Sure, I will {act} {thing} for you right away.",
            f"Sorry, I cannot {rng.choice(ACTS)} {rng.choice(THINGS)} at the moment.",
            f"Would you like me to {rng.choice(ACTS)} {rng.choice(THINGS)} instead?",
        ]
        requests.append({"context": f"Could you {act} {thing}, please?", "situations": statements,
                         "candidates": candidates})  # fmt: skip
    return requests


def bench_requests(path: Path | None = None) -> tuple[list[dict[str, Any]], str]:
    """The requests and where they came from: a JSONL of ``/rank`` bodies, SUGAR, or made up."""
    if path is not None:
        bodies = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return bodies, f"{len(bodies)} requests of {path}"
    if SUGAR.is_file():
        return sugar_requests(), f"200 SUGAR requests ({SUGAR})"
    return made_up_requests(), "200 made-up SUGAR-shaped requests (../shared/data is absent)"
