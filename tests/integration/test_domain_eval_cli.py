"""The per-domain evaluation CLI on generic ranking lists, with the shipped model."""

from __future__ import annotations

import json

import pytest

from service.tokenization import Turn
from training.domain_eval import main
from training.ranking_data import Candidate, RankingList, write_lists

pytestmark = pytest.mark.integration


def test_the_cli_scores_generic_lists_with_the_shipped_model(model_dir, tmp_path) -> None:
    lists = [
        RankingList(
            context=(Turn("user", "It is so hot in here, can you help?"),),
            situations=("The window is closed.", "There is a fan in the closet.", "The user likes pizza."),
            candidates=(
                Candidate("Shall I open the window for you?", 2),
                Candidate("Pizza is great.", 0),
                Candidate("I do not know.", 0, "random"),
            ),  # fmt: skip
            group=f"hand-{i}",
        )
        for i in range(3)
    ]
    data = tmp_path / "lists.jsonl"
    write_lists(data, lists)
    out = tmp_path / "results.json"
    results = main(
        ["--model", str(model_dir), "--lists", f"hand={data}", "--split", "all", "--out", str(out)]
    )
    assert results["hand"]["lists"] == 3 and results["hand"]["precision_at_1"] in (0.0, 1.0)
    assert json.loads(out.read_text())["results"] == results
