"""``ranker convert written-situations``: the project's written situated requests as ranking lists."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dialogue_ranker.data.ranking_data import read_lists
from dialogue_ranker.evaluation.handmade import load_cases
from dialogue_ranker.training import convert
from dialogue_ranker.training.converters.written_situations import (
    DISTRACTORS,
    convert_written_situations,
    read_scenarios,
)

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = ROOT / "data" / "written_situations" / "situations.toml"
HANDMADE_REQUESTS = ROOT / "data" / "handmade_requests" / "requests.json"

SCENARIO = """
[[scenario]]
name = "{name}"
request = "{request}"
blocked = ["The gym is closed this week.", "There is a park nearby.", "{name} is tired."]
clear = ["The gym is open until 10 pm.", "{name} has a towel.", "{name} has shoes."]
accept = ["See you at the gym!", "Great, the gym it is."]
decline = ["The gym is closed this week. How about a run in the park?"]
"""


def write(path: Path, *scenarios: tuple[str, str]) -> Path:
    path.write_text("".join(SCENARIO.format(name=n, request=r) for n, r in scenarios))
    return path


def test_each_scenario_gives_a_list_per_situation_with_the_right_kind_of_reply(tmp_path: Path) -> None:
    source = write(tmp_path / "s.toml", ("gym", "Let's go to the gym."), ("gym-2", "Gym tonight?"),
                   ("gym-3", "Shall we train?"))  # fmt: skip
    lists = list(convert_written_situations(source))
    assert len(lists) == 6
    # A file too small to give each list its distractors is refused.
    with pytest.raises(ValueError, match="other scenarios' statements"):
        list(convert_written_situations(write(tmp_path / "one.toml", ("gym", "Gym?"))))
    blocked, clear = lists[0], lists[1]
    assert blocked.context[0].text == clear.context[0].text == "Let's go to the gym."
    assert blocked.group == clear.group == "written-situation: gym"
    assert {c.text for c in blocked.candidates if c.label == 1} == {
        "The gym is closed this week. How about a run in the park?"
    }
    assert {c.text for c in clear.candidates if c.label == 1} == {
        "See you at the gym!",
        "Great, the gym it is.",
    }
    blocks = {"The gym is closed this week.", "There is a park nearby.", "gym is tired."}
    clears = {"The gym is open until 10 pm.", "gym has a towel.", "gym has shoes."}
    for x, own in ((blocked, blocks), (clear, clears)):
        # Its own statements are the relevant ones, among other scenarios' as distractors.
        assert {x.situations[i] for i in x.relevant_situations} == own
        assert len(x.situations) == len(own) + DISTRACTORS
        # One wrong reply is a statement of another scenario said as a reply.
        (statement,) = [c for c in x.candidates if c.generator == "statement"]
        assert statement.label == 0 and statement.text not in x.situations
    # Seeded: the same file gives the same lists.
    assert list(convert_written_situations(source)) == lists


def test_a_bad_scenario_is_refused_naming_it_and_the_field(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    text = SCENARIO.format(name="gym", request="Gym?")
    missing.write_text(
        text.replace('clear = ["The gym is open until 10 pm.", "gym has a towel.", "gym has shoes."]', "")
    )
    with pytest.raises(ValueError, match=r"scenario 1 \(gym\): clear must be a non-empty list"):
        read_scenarios(missing)
    twice = write(tmp_path / "twice.toml", ("gym", "Gym?"), ("gym", "Gym again?"))
    with pytest.raises(ValueError, match="the name 'gym' is taken"):
        read_scenarios(twice)


def test_the_written_file_converts_and_keeps_out_of_the_hand_made_test_requests(tmp_path: Path) -> None:
    out = tmp_path / "written.jsonl"
    assert convert.main(["written-situations", str(WRITTEN), str(out)]) == 0
    lists = read_lists(out)
    scenarios = read_scenarios(WRITTEN)
    assert len(lists) == 2 * len(scenarios)
    assert Counter(len([c for c in x.candidates if c.label == 1]) for x in lists).keys() <= {1, 2}
    # Training data, never a test: no written request is one of the hand-made test requests.
    asked = set()
    for case in load_cases(HANDMADE_REQUESTS):
        context = case.body["context"]
        asked |= {context} if isinstance(context, str) else {turn["text"] for turn in context}
    assert asked and not [s.request for s in scenarios if s.request in asked]


def test_a_statement_two_scenarios_share_is_drawn_once(tmp_path: Path) -> None:
    def table(name: str, blocked: list[str], clear: list[str]) -> str:
        # A JSON array of strings is a TOML array.
        return (
            f'[[scenario]]\nname = "{name}"\nrequest = "Request {name}?"\nblocked = {json.dumps(blocked)}\n'
            f'clear = {json.dumps(clear)}\naccept = ["Yes, {name}."]\ndecline = ["No, {name}."]\n'
        )

    source = tmp_path / "shared.toml"
    source.write_text(
        table("a", ["A blocks."], ["A is clear."])
        + table("b", ["Shared fact.", "B blocks."], ["B is clear.", "B has time."])
        + table("c", ["Shared fact.", "C blocks."], ["C is clear.", "C has time."])
    )
    # "a" draws its distractors and wrong reply from 7 distinct statements, one of them listed by
    # both "b" and "c": drawn from the list with repeats, it would often land in one list twice.
    for seed in range(10):
        for x in convert_written_situations(source, seed=seed):
            drawn = [*x.situations, *(c.text for c in x.candidates if c.generator == "statement")]
            assert len(drawn) == len(set(drawn)), (seed, x.group, drawn)
