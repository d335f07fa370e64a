"""A tiny recipe run for real (``ranker`` subprocesses): a SUGAR conversion, a user's own lists,
two train stages; the second fails, the recipe is fixed and run again, and only what was not done
runs."""

import json

import pytest

from dialogue_ranker.recipes import cli
from dialogue_ranker.recipes.runner import MARKER

pytestmark = pytest.mark.integration

pytest.importorskip("torch", reason="training extras (torch) are not installed")

SMALL = '"--limit", "8", "--dev-lists", "4", "--batch-lists", "2", "--max-prefix-tokens", "96", ' \
    '"--max-candidate-tokens", "32"'  # fmt: skip


def own_lists(path, n=16):
    """A user's own ranking data: ``n`` small lists in the documented format."""
    with open(path, "w") as f:
        for i in range(n):
            line = {
                "context": [{"speaker": "user", "text": f"Can you book a table for {i + 2} tonight?"}],
                "situations": ["The restaurant closes at ten.", f"It is {i % 12 + 1} pm now."],
                "candidates": [
                    {"text": "Sure, booking it now.", "label": 2},
                    {"text": "Which restaurant would you like?", "label": 1},
                    {"text": "Penguins cannot fly.", "label": 0},
                ],
                "group": f"booking-{i}",
            }
            f.write(json.dumps(line) + "\n")


def recipe(tmp_path, second_extra: str) -> str:
    return f"""
name = "tiny"
version = "0.0.1-test"
root = "."
out = "out"

[data]
"sugar.jsonl" = {{ dataset = "sugar", source = "sugar-small.jsonl" }}

[[stages]]
name = "first"
kind = "train"
data = ["sugar.jsonl:1", "own.jsonl:1"]
max_steps = 2
extra_args = [{SMALL}]

[[stages]]
name = "second"
kind = "train"
init = "first"
data = ["sugar.jsonl"]
lr = 1e-5
max_steps = 1
extra_args = [{SMALL}{second_extra}]
"""


def test_a_failed_stage_is_started_over_and_the_finished_ones_are_skipped(tmp_path, shared_data, capsys):
    lines = (shared_data / "sugar" / "sugar.jsonl").read_text().splitlines()[:80]
    (tmp_path / "sugar-small.jsonl").write_text("\n".join(lines) + "\n")
    own_lists(tmp_path / "own.jsonl")
    path = tmp_path / "tiny.toml"
    out = tmp_path / "out"

    # First run: the second stage has a flag train does not know, so it fails after the first ends.
    path.write_text(recipe(tmp_path, ', "--no-such-flag"'))
    with pytest.raises(SystemExit) as e:
        cli.main(["run", str(path)])
    assert e.value.code == 1
    first_marker = (out / "first" / MARKER).read_text()
    assert json.loads(first_marker)["command"].startswith("ranker train --data out/data/sugar.jsonl:1")
    assert (out / "first" / "ranker").is_dir() and (out / "data" / "sugar.jsonl").is_file()
    assert not (out / "second" / MARKER).exists()
    (out / "second" / "left-over").write_text("a partial run's file")
    log = (out / "recipe.log").read_text()
    assert "FAIL  second" in log and "end   first" in log

    capsys.readouterr()
    cli.main(["show", str(path)])
    shown = capsys.readouterr().out
    assert "first " in shown and "done (" in shown
    assert "interrupted" in shown  # second: a folder without a marker

    # Fixed, run again: stage 0 and the first stage are skipped, the second starts over and ends.
    path.write_text(recipe(tmp_path, ""))
    cli.main(["run", str(path)])
    assert (out / "first" / MARKER).read_text() == first_marker
    assert (out / "second" / MARKER).is_file() and not (out / "second" / "left-over").exists()
    assert (out / "second" / "ranker").is_dir()
    config = json.loads((out / "second" / "config.json").read_text())
    assert "first" in json.dumps(config.get("init"))
    log = (out / "recipe.log").read_text().split("recipe tiny 0.0.1-test")[-1]
    assert "skip  data: done" in log and "skip  first: done" in log
    assert "clean second" in log and "end   second" in log and "recipe tiny done" in log

    # A third run has nothing to do.
    cli.main(["run", str(path)])
    log = (out / "recipe.log").read_text().split("recipe tiny 0.0.1-test")[-1]
    assert "0 of 3 stages to run" in log and "Z start " not in log
