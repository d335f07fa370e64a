"""``ranker convert sgd|persona-chat|taskmaster|taskmaster-reward``: turn lists with named negatives."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dialogue_ranker.data.ranking_data import read_lists
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.training import convert
from dialogue_ranker.training.converters import dialogue_lists
from dialogue_ranker.training.converters.contradicted_replies import (
    ValueSwapper,
    contradict_persona,
    negate_first_person,
)
from dialogue_ranker.training.converters.dialogue_lists import DIALOGUE_NEGATIVE_KINDS, ParaphraseFilter
from dialogue_ranker.training.converters.persona_chat import (
    contradict_reply,
    convert_persona_chat,
    read_persona_chat,
)
from dialogue_ranker.training.converters.taskmaster import render_api_response

ROOT = Path(__file__).resolve().parents[2]
RETRIEVER = ROOT / "models" / "dialogue-minilm-l6" / "retriever"
NO_RETRIEVAL = "earlier:1,later:1,same-service:1,contradicted:1,random:2"


@pytest.fixture
def retriever() -> Path:
    """The shipped bundle's retrieval encoder; the test is skipped without it."""
    if not (RETRIEVER / "retriever.json").is_file():
        pytest.skip(f"no retrieval encoder at {RETRIEVER}")
    return RETRIEVER


def write_gz(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    return path


def sgd_dialogue(dialogue_id: str, service: str, turns: list[str]) -> dict:
    speakers = ("user", "system")
    return {
        "dialogue_id": dialogue_id,
        "services": [service],
        "turns": [{"speaker": speakers[i % 2], "text": t} for i, t in enumerate(turns)],
    }


RESTAURANT = [
    "Find me a table for 2 people in San Jose at 7 pm.",
    "What kind of food would you like?",
    "Italian, please.",
    "Please confirm: a table for 2 people in San Jose at 7 pm.",
    "Yes, that works.",
    "Your table is booked.",
    "Thanks!",
    "Your table has now been booked.",
    "Bye.",
    "Goodbye and have a nice evening.",
]


def sgd_fixture(root: Path, split: str = "dev") -> Path:
    return write_gz(
        root / f"sgd_{split}.jsonl.gz",
        [
            sgd_dialogue("1_00000", "Restaurants_1", RESTAURANT),
            sgd_dialogue(
                "1_00001",
                "Restaurants_1",
                [
                    "I want to eat Mexican food in Palo Alto.",
                    "I found 3 restaurants in Palo Alto.",
                    "Which one is cheapest?",
                    "Taqueria Sol is the cheapest one.",
                    "Book it for 4 people.",
                    "Shall I book a table for 4 people at Taqueria Sol?",
                    "Yes.",
                    "Done, your table is reserved.",
                ],
            ),
            sgd_dialogue(
                "2_00000",
                "Flights_1",
                [
                    "I need a flight to Chicago on March 3rd.",
                    "Where are you flying from?",
                    "From Denver.",
                    "I found a United flight leaving at 6 am for $120.",
                    "Anything later?",
                    "Delta leaves at 11 am for $140.",
                    "Book Delta.",
                    "Your flight to Chicago is booked.",
                ],
            ),
        ],
    )


def convert_to(tmp_path: Path, argv: list[str]) -> list:
    out = tmp_path / f"{argv[0]}.jsonl"
    assert convert.main([argv[0], argv[1], str(out), *argv[2:]]) == 0
    return read_lists(out)


def test_sgd_gives_one_list_per_system_turn_against_named_negatives(tmp_path: Path) -> None:
    source = sgd_fixture(tmp_path / "sgd")
    lists = convert_to(tmp_path, ["sgd", str(source), "--negatives", NO_RETRIEVAL])
    assert len(lists) == 5 + 4 + 4  # every system turn, the first turn being the user's
    assert Counter(x.group for x in lists) == {
        "sgd-dev-1_00000": 5,
        "sgd-dev-1_00001": 4,
        "sgd-dev-2_00000": 4,
    }
    system = {t for t in RESTAURANT[1::2]}
    for x in lists:
        (true,) = [c for c in x.candidates if c.label == 1]
        assert true.generator == "human"
        assert x.context[-1].speaker == "user" and len(x.candidates) == 7
        assert {c.generator for c in x.candidates} - {"human"} <= set(DIALOGUE_NEGATIVE_KINDS)
        if x.group != "sgd-dev-1_00000":
            continue
        spoken = [t.text for t in x.context]
        for c in x.candidates:
            if c.generator == "earlier":  # said before in this dialogue, by the system
                assert c.text in system and c.text in spoken
            if c.generator == "later":  # said later in this dialogue
                assert c.text in system and c.text not in spoken
            if c.generator == "same-service":  # the other restaurant dialogue, never the flights one
                assert "Taqueria" in c.text or "restaurant" in c.text or "table" in c.text, c.text
    again = convert_to(tmp_path / "again", ["sgd", str(source), "--negatives", NO_RETRIEVAL])
    assert again == lists  # the same on every run


def test_a_contradicted_sgd_turn_swaps_a_value_the_user_gave(tmp_path: Path) -> None:
    lists = convert_to(tmp_path, ["sgd", str(sgd_fixture(tmp_path / "sgd")), "--negatives", "contradicted:1"])
    confirm = next(
        x
        for x in lists
        if x.candidates[0].text.startswith("Please confirm")
        or any(c.text.startswith("Please confirm") and c.label == 1 for c in x.candidates)
    )
    (wrong,) = [c.text for c in confirm.candidates if c.generator == "contradicted"]
    assert wrong != RESTAURANT[3] and wrong.startswith("Please confirm: a table for ")
    # One value the user gave (2 people or 7 pm) now says something else.
    assert ("2 people" in wrong) != ("7 pm" in wrong)


def test_the_value_swapper_only_swaps_values_the_conversation_holds() -> None:
    swapper = ValueSwapper(["It leaves at 6 am.", "It leaves at 9 pm.", "That is $120."])
    rng = random.Random(0)
    assert swapper.swap(rng, "It leaves at 6 am.", ["The flight is at 6 am?"]) == "It leaves at 9 pm."
    assert swapper.swap(rng, "It leaves at 6 am.", ["Any flight to Chicago?"]) is None  # found, not given
    assert swapper.swap(rng, "It costs $120.", ["Is it $120?"]) is None  # no other amount to swap in
    phrases = ValueSwapper([], {"Milk": ["Oat Milk", "Whole Milk"], "drink": ["Mocha", "Latte"]})
    assert phrases.swap(rng, "One Mocha with Oat Milk?", ["Mocha please", "milk: Oat Milk"]) in {
        "One Latte with Oat Milk?",
        "One Mocha with Whole Milk?",
    }
    # "Latte" and "Lattee" are one drink typed twice: never a swap.
    typo = ValueSwapper([], {"drink": ["Latte", "Lattee"]})
    assert typo.swap(rng, "Your Latte is ready.", ["A Latte please"]) is None


def test_the_paraphrase_filter_drops_a_rewording_and_keeps_other_values() -> None:
    words = ParaphraseFilter()
    assert words.same("Reservation confirmed!", "Your reservation is confirmed.")
    assert not words.same("What genre would you like?", "What movie would you like?")
    # Close in words, other values: a different fact, the hardest negative, kept.
    assert not words.same("Your table for 2 is booked at 7 pm.", "Your table for 4 is booked at 8 pm.")
    vectors = {
        t: np.array(v, dtype=np.float32)
        for t, v in (("Anything else?", [1, 0]), ("Can I help more?", [0.9, 0.436]), ("Where to?", [0, 1]))
    }
    embedded = ParaphraseFilter(vectors)
    assert embedded.same("Anything else?", "Can I help more?")  # cosine 0.9, no word in common
    assert not embedded.same("Anything else?", "Where to?")


def test_a_later_turn_that_rewords_the_true_turn_is_never_its_negative(tmp_path: Path) -> None:
    # "Your table is booked." and "Your table has now been booked." share their content
    # words and state no value: the later one is not a negative of the earlier one's list.
    lists = convert_to(tmp_path, ["sgd", str(sgd_fixture(tmp_path / "sgd")), "--negatives", "later:3"])
    booked = next(x for x in lists if any(c.label == 1 and c.text == RESTAURANT[5] for c in x.candidates))
    later = [c.text for c in booked.candidates if c.generator == "later"]
    assert later == [RESTAURANT[9]]  # the one other later system turn


def test_paraphrases_taken_as_right_replies_join_the_list_and_keep_its_negatives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "Your table is booked." (turn 5) and "Your table has now been booked." (turn 7) say the same:
    # dropped by default, with --paraphrases right the later one is a second right reply of the
    # earlier one's list ("later" negatives are the only kind asked for).
    source = sgd_fixture(tmp_path / "sgd")
    dropped = convert_to(tmp_path / "drop", ["sgd", str(source), "--negatives", "later:3"])
    kept = convert_to(
        tmp_path / "right", ["sgd", str(source), "--negatives", "later:3", "--paraphrases", "right"]
    )
    assert "lists by paraphrases taken as right: 0 12, 1 1" in capsys.readouterr().err
    assert len(kept) == len(dropped)
    for before, after in zip(dropped, kept, strict=True):
        negatives = sorted(c.text for c in before.candidates if c.label == 0)
        assert sorted(c.text for c in after.candidates if c.label == 0) == negatives
        rights = [c for c in after.candidates if c.label == 1]
        if any(c.text == RESTAURANT[5] for c in rights):
            assert [(c.text, c.generator) for c in rights if c.generator != "human"] == [
                (RESTAURANT[7], "paraphrase")
            ]
        else:
            assert [c.generator for c in rights] == ["human"]
    assert (
        convert_to(
            tmp_path / "drop2", ["sgd", str(source), "--negatives", "later:3", "--paraphrases", "drop"]
        )
        == dropped
    )
    with pytest.raises(SystemExit):
        convert.main(["topical-chat", str(source), str(tmp_path / "o.jsonl"), "--paraphrases", "right"])
    assert "--paraphrases is for sgd, persona-chat, taskmaster" in capsys.readouterr().err


def test_a_retrieved_pool_is_read_to_its_end_for_paraphrases_taken_as_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retriever: Path
) -> None:
    # A fourth dialogue says "Your table is booked." (RESTAURANT[5]) in its own words; the pool holds
    # every other dialogue's turns, so the paraphrase is in it wherever the shuffle puts it.
    monkeypatch.setattr(dialogue_lists, "RETRIEVED_POOL", 40)
    rows = [json.loads(line) for line in gzip.open(sgd_fixture(tmp_path / "sgd"), "rt")]
    rows.append(
        sgd_dialogue("3_00000", "Restaurants_1", ["Book a table at Sol.", "Your table has been booked."])
    )
    source = write_gz(tmp_path / "four" / "sgd_dev.jsonl.gz", rows)
    argv = ["sgd", str(source), "--negatives", "retrieved:2", "--retriever", str(retriever)]
    lists = convert_to(tmp_path, [*argv, "--paraphrases", "right"])
    booked = next(
        x for x in lists if any(c.generator == "human" and c.text == RESTAURANT[5] for c in x.candidates)
    )
    assert [c.text for c in booked.candidates if c.generator == "paraphrase"] == [
        "Your table has been booked."
    ]
    assert sum(c.generator == "retrieved" for c in booked.candidates) == 2
    assert all(c.label == 0 for c in booked.candidates if c.generator not in ("human", "paraphrase"))
    dropped = convert_to(tmp_path / "drop", argv)
    assert not any(c.generator == "paraphrase" for x in dropped for c in x.candidates)
    # A pool larger than the other dialogues' turns never fills up with the list's own dialogue's.
    turns = {f"sgd-dev-{row['dialogue_id']}": {t["text"] for t in row["turns"]} for row in rows}
    for x in lists + dropped:
        assert not {c.text for c in x.candidates if c.generator == "retrieved"} & turns[x.group]


def test_retrieved_negatives_come_from_other_dialogues_nearest_in_the_retriever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retriever: Path
) -> None:
    monkeypatch.setattr(dialogue_lists, "RETRIEVED_POOL", 3)
    source = sgd_fixture(tmp_path / "sgd")
    lists = convert_to(
        tmp_path, ["sgd", str(source), "--negatives", "retrieved:2", "--retriever", str(retriever)]
    )
    for x in lists:
        own = {t.text for t in x.context} | {c.text for c in x.candidates if c.label == 1}
        retrieved = [c.text for c in x.candidates if c.generator == "retrieved"]
        assert len(retrieved) >= 1 and not set(retrieved) & own
        if x.group == "sgd-dev-2_00000":  # flights: its nearest are the restaurant dialogues' turns
            assert all("flight" not in t.lower() for t in retrieved)


def test_the_cli_refuses_the_default_mix_without_a_retriever(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = sgd_fixture(tmp_path / "sgd")
    with pytest.raises(SystemExit):
        convert.main(["sgd", str(source), str(tmp_path / "o.jsonl")])
    assert "needs --retriever" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        convert.main(["taskmaster-reward", str(source), str(tmp_path / "o.jsonl"), "--max-dialogues", "3"])
    assert "--max-dialogues" in capsys.readouterr().err


def test_sgd_splits_are_by_dialogue_and_ids_repeated_across_files_stay_apart(tmp_path: Path) -> None:
    train = convert_to(
        tmp_path / "t", ["sgd", str(sgd_fixture(tmp_path / "sgd", "train")), "--negatives", "random:2"]
    )
    dev = convert_to(
        tmp_path / "d", ["sgd", str(sgd_fixture(tmp_path / "sgd", "dev")), "--negatives", "random:2"]
    )
    assert not {x.group for x in train} & {x.group for x in dev}
    sample = convert_to(
        tmp_path / "s",
        ["sgd", str(sgd_fixture(tmp_path / "sgd")), "--negatives", "random:2", "--max-dialogues", "2"],
    )
    assert len({x.group for x in sample}) == 2


PERSONA_ROWS = [
    {
        "conversation_id": f"spc-{i}",
        "user1_persona": ["I have a turtle named Timothy.", "I love to dance at the club."],
        "user2_persona": [f"I work at a bakery number {i}.", "My favorite season is autumn."],
        "turns": [
            {"speaker": "user1", "text": "Hi! What do you do?"},
            {"speaker": "user2", "text": f"I work at a bakery. It is number {i} in town."},
            {"speaker": "user1", "text": "Fun. I have a turtle named Timothy."},
            {"speaker": "user2", "text": "My favorite season is autumn, what about yours?"},
            {"speaker": "user1", "text": "I love to dance at the club in any season."},
        ],
    }
    for i in range(3)
]


def test_persona_chat_puts_the_responders_persona_in_and_denies_it_in_a_negative(tmp_path: Path) -> None:
    source = write_gz(tmp_path / "spc.jsonl.gz", PERSONA_ROWS)
    lists = list(convert_persona_chat(source, negatives={"later": 1, "contradicted": 1, "random": 2}))
    assert len(lists) == 3 * 4
    for x in lists:
        (true,) = [c.text for c in x.candidates if c.label == 1]
        user1 = true in {"Fun. I have a turtle named Timothy.", "I love to dance at the club in any season."}
        assert (x.situations[0] == "I have a turtle named Timothy.") == user1  # the responder's own persona
        assert x.context[-1].speaker == "user"  # the partner spoke last
        wrong = [c.text for c in x.candidates if c.generator == "contradicted"]
        if true == "Fun. I have a turtle named Timothy.":
            assert wrong == ["Fun. I don't have a turtle named Timothy."]
        if true == "Hi! What do you do?":
            assert not wrong
    assert {group_split(x.group) for x in lists if x.group == "persona-chat-spc-0"} == {
        group_split("persona-chat-spc-0")
    }


def test_persona_negation_says_a_first_person_fact_the_other_way() -> None:
    assert negate_first_person("I love dogs.") == "I don't love dogs."
    assert negate_first_person("I'm a hair stylist.") == "I'm not a hair stylist."
    assert negate_first_person("My favorite season is autumn.") == "My favorite season is not autumn."
    assert negate_first_person("What are your hobbies?") is None  # a question states nothing
    assert negate_first_person("I don't like them.") is None  # already a denial
    assert (
        contradict_persona("Nice. I love dogs.", ["I have two dogs.", "I love dogs a lot."])
        == "Nice. I don't love dogs."
    )
    assert contradict_persona("Nice weather.", ["I love dogs."]) is None


TASKMASTER_ROWS = [
    {
        "conversation_id": f"dlg-{i}",
        "utterances": [
            {
                "speaker": "user",
                "text": f"One {drink} please",
                "annotations": [
                    {"name": "api_call", "value": "get_menu_items", "context": "api_call_0"},
                    {"name": "api_response", "value": "get_menu_items", "context": "api_response_0"},
                    {
                        "name": "response",
                        "value": json.dumps({"menu_items": [{"menu_item_id": "x-1", "name": drink}]}),
                        "context": "api_response_0",
                    },
                ],
            },
            {
                "speaker": "assistant",
                "text": f"Sure, one {drink}. Which milk would you like?",
                "annotations": [],
            },
            {
                "speaker": "user",
                "text": "Oat Milk.",
                "annotations": [
                    {"name": "api_call", "value": "get_addons", "context": "api_call_1"},
                    {"name": "api_response", "value": "get_addons", "context": "api_response_1"},
                    {
                        "name": "response",
                        "value": json.dumps(
                            {
                                "attributes": [
                                    {
                                        "attribute_id": "milk",
                                        "attribute_name": "Milk",
                                        "options": ["Oat Milk", "Whole Milk"],
                                    }
                                ]
                            }
                        ),
                        "context": "api_response_1",
                    },
                ],
            },
            {"speaker": "assistant", "text": f"Your {drink} with Oat Milk is on its way.", "annotations": []},
        ],
    }
    for i, drink in enumerate(["Mocha", "Latte", "Cortado"])
]


def test_taskmaster_gives_the_api_results_known_before_each_turn_as_situations(tmp_path: Path) -> None:
    source = write_gz(tmp_path / "tm4.jsonl.gz", TASKMASTER_ROWS)
    lists = convert_to(
        tmp_path, ["taskmaster", str(source), "--negatives", "earlier:1,contradicted:1,random:1"]
    )
    assert len(lists) == 3 * 2
    first, second = lists[0], lists[1]
    assert first.situations == ("get menu items: Mocha",)
    assert second.situations == (
        "get addons: Milk: Oat Milk, Whole Milk",
        "get menu items: Mocha",
    )  # latest first
    (wrong,) = [c.text for c in second.candidates if c.generator == "contradicted"]
    assert wrong in {
        "Your Latte with Oat Milk is on its way.",
        "Your Cortado with Oat Milk is on its way.",
        "Your Mocha with Whole Milk is on its way.",
    }
    assert [c.text for c in second.candidates if c.generator == "earlier"] == [
        "Sure, one Mocha. Which milk would you like?"
    ]
    assert {x.group for x in lists} == {"taskmaster-dlg-0", "taskmaster-dlg-1", "taskmaster-dlg-2"}


def test_api_results_read_as_short_statements_without_identifiers() -> None:
    details = {
        "order_id": "1",
        "attributes": [{"attribute_id": "Name", "attribute_name": "Name", "option": "ace of hearts"}],
        "menu_items": [{"order_item_id": "9", "menu_item_name": "Chai Latte"}],
    }
    assert (
        render_api_response("get_order_details", details)
        == "get order details: Name: ace of hearts; Chai Latte"
    )
    assert render_api_response("finish_order", '{"success": true}') == "finish order: succeeded"
    assert (
        render_api_response("add_order_item", {"order_id": "1", "order_item_id": "2"})
        == "add order item: done"
    )
    assert render_api_response("find_movies", "{not json") == "find movies: {not json"


def reward_row(conversation: str, context: list[dict], generation: dict, reward: float) -> dict:
    return {
        "conversation_id": conversation,
        "context": json.dumps(context),
        "generation": json.dumps(generation),
        "reward": reward,
    }


def test_taskmaster_reward_lists_group_rated_turns_of_one_context(tmp_path: Path) -> None:
    welcome = {"role": "agent", "text": "Welcome! What can I get you?"}
    asks = [welcome, {"role": "user", "text": "An espresso please"}]
    found = [
        *asks,
        {"role": "agent", "api": {"get_menu_items": {"query": "espresso"}}},
        {
            "role": "api",
            "response": {"get_menu_items": {"items": [{"menu_item_id": "e-1", "name": "Espresso"}]}},
        },
    ]
    other = [welcome, {"role": "user", "text": "A tea please"}]
    rows = [
        reward_row("a", found, {"role": "agent", "text": "One espresso, how many shots?"}, 1.0),
        reward_row("b", found, {"role": "agent", "text": "We have no espresso."}, 0.0),
        reward_row("c", asks, {"role": "agent", "api": {"get_menu_items": {"query": "espresso"}}}, 1.0),
        reward_row("d", asks, {"role": "agent", "text": "Let me check the menu."}, 1.0),
        reward_row("e", other, {"role": "agent", "text": "Which tea?"}, 1.0),
    ]
    source = write_gz(tmp_path / "tm4_reward.jsonl.gz", rows)
    lists = convert_to(tmp_path, ["taskmaster-reward", str(source)])
    assert len(lists) == 3  # the API-call generation is left out; a and b share their context
    pair = next(x for x in lists if len(x.candidates) == 2)
    assert sorted((c.text, c.label) for c in pair.candidates) == [
        ("One espresso, how many shots?", 1.0),
        ("We have no espresso.", 0.0),
    ]
    assert pair.situations == ("get menu items: Espresso",)
    assert [t.speaker for t in pair.context] == ["bot", "user"]  # the agent's call is not a turn
    # The context that continues "asks" is the same dialogue: one group, so one split; the tea is another.
    groups = {x.candidates[0].text: x.group for x in lists}
    assert groups["Let me check the menu."] == pair.group != groups["Which tea?"]


SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.mark.skipif(
    not (SHARED / "sgd").is_dir(), reason="../shared/data (SGD, Persona-Chat, Taskmaster) is absent"
)
def test_the_real_files_convert_with_every_kind_and_no_dialogue_in_two_splits(tmp_path: Path) -> None:
    sgd = convert_to(
        tmp_path / "sgd",
        [
            "sgd",
            str(SHARED / "sgd" / "sgd_dev.jsonl.gz"),
            "--negatives",
            NO_RETRIEVAL,
            "--max-dialogues",
            "60",
        ],
    )
    kinds = Counter(c.generator for x in sgd for c in x.candidates)
    assert set(kinds) == {"human", "earlier", "later", "same-service", "contradicted", "random"}
    assert kinds["human"] == len(sgd) and all(x.group.startswith("sgd-dev-") for x in sgd)
    persona = read_persona_chat(SHARED / "synthetic_persona_chat" / "spc_test.jsonl.gz")
    assert len(persona) == 965 and all(r.situations for d in persona for r in d.replies)  # 3 have no turns
    mix = {"contradicted": 1, "later": 1, "random": 1}
    made = list(dialogue_lists.dialogue_lists(persona[:40], mix, contradict=contradict_reply))
    assert any(c.generator == "contradicted" for x in made for c in x.candidates)
    reward = convert_to(tmp_path / "tr", ["taskmaster-reward", str(SHARED / "taskmaster")])
    assert any(len(x.candidates) > 1 for x in reward)
    assert all(isinstance(c.label, float) for x in reward for c in x.candidates)
    split_of: dict[str, set[str]] = {}
    for x in [*sgd, *made, *reward]:  # every list of a dialogue in its group's one split
        split_of.setdefault(x.group, set()).add(group_split(x.group))
    assert all(len(s) == 1 for s in split_of.values())
    assert len({d.group for d in persona}) == 965  # one group per conversation
