"""The per-domain evaluation CLI on generic ranking lists, with the shipped model."""

from __future__ import annotations

import json

import pytest

from dialogue_ranker.data.ranking_data import Candidate, RankingList, write_lists
from dialogue_ranker.evaluation.domains import main
from dialogue_ranker.serving.tokenization import Turn

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
    args = ["--model", str(model_dir), "--lists", f"hand={data}", "--split", "all", "--out", str(out)]
    results = main(args)
    assert results["hand"]["lists"] == 3 and results["hand"]["precision_at_1"] in (0.0, 1.0)
    assert json.loads(out.read_text())["results"] == results


def test_a_run_directory_needs_the_training_side_of_the_cli(model_dir, tmp_path) -> None:
    data = tmp_path / "lists.jsonl"
    write_lists(data, [])
    with pytest.raises(SystemExit):
        main(["--run", str(tmp_path), "--lists", f"x={data}"])


def test_the_sugar_settings_cli_scores_the_shipped_model_on_its_test_split(
    model_dir, shared_data, tmp_path
) -> None:
    """evaluation.sugar_protocol on SUGAR: the shipped model's own split, scored as served, one row."""
    from dialogue_ranker.evaluation import sugar_protocol as evaluate

    row = "u+S1 (gold statements)"
    results = evaluate.main(
        ["--model", str(model_dir), "--data", str(shared_data / "sugar" / "sugar.jsonl"), "--split", "test",
         "--rows", row, "--out-md", str(tmp_path / "eval.md")]
    )  # fmt: skip
    scored = results["model"][row]
    assert 200 <= results["examples"] <= 230  # a 15% test part of 1,427
    assert 150 <= scored["examples"] <= results["examples"]  # those with a bad candidate
    assert 0.5 < scored["precision_at_1"] <= 1.0  # gold statements: far above chance (about 0.33)
    assert (tmp_path / "eval.md").is_file()
