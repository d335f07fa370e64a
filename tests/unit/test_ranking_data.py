"""The ranking-data format: its loader's errors, and each converter on a small fixture."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from dialogue_ranker.data.ranking_data import Candidate, DataError, RankingList, read_lists, write_lists
from dialogue_ranker.serving.tokenization import Turn
from dialogue_ranker.training import convert
from dialogue_ranker.training.converters import negatives, topical_chat
from dialogue_ranker.training.converters.negatives import content_words, nearest_of_other_groups
from dialogue_ranker.training.converters.topical_chat import SHORT_WORDS, TOPICAL_CHAT_SPLITS

#: The shipped bundle's retrieval encoder (committed with the repository).
RETRIEVER = Path(__file__).resolve().parents[2] / "models" / "dialogue-minilm-l6" / "retriever"

GOOD = {
    "context": [{"speaker": "user", "text": "It is so hot in here."}],
    "situations": ["The window is closed.", "The user likes pizza."],
    "relevant_situations": [0],
    "candidates": [
        {"text": "Shall I open the window?", "label": 2, "generator": "retrieval"},
        {"text": "Pizza!", "label": 0.1},
    ],
    "group": "d1",
}


def write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "lists.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_a_good_file_round_trips(tmp_path: Path) -> None:
    lists = read_lists(write(tmp_path, GOOD, "", {**GOOD, "context": "hi", "group": "d2"}))
    assert len(lists) == 2 and lists[1].context == (Turn("user", "hi"),)
    first = lists[0]
    assert [c.appropriate for c in first.candidates] == [True, False] and first.candidates[0].gain == 2.0
    again = tmp_path / "again.jsonl"
    write_lists(again, lists)
    assert read_lists(again) == lists


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ("{not json", "not JSON"),
        ({**GOOD, "candidates": []}, "candidates"),
        ({**GOOD, "candidates": [{"text": "a", "label": 3}]}, "candidates.0.label"),
        ({**GOOD, "candidates": [{"text": "a", "label": 1.5}]}, "candidates.0.label"),
        ({**GOOD, "candidates": [{"text": "a", "label": "1"}]}, "candidates.0.label"),
        ({**GOOD, "candidates": [{"text": " ", "label": 1}]}, "candidates.0.text"),
        ({**GOOD, "context": [{"text": "hi", "who": "x"}]}, "context"),
        ({k: v for k, v in GOOD.items() if k != "group"}, "group"),
        ({**GOOD, "relevant_situations": [5]}, "relevant_situations"),
        ({**GOOD, "extra": 1}, "extra"),
    ],
)
def test_a_bad_line_is_named_by_file_line_and_field(tmp_path: Path, row: object, where: str) -> None:
    path = write(tmp_path, GOOD, row)
    with pytest.raises(DataError) as error:
        read_lists(path)
    assert str(error.value).startswith(f"{path}:2: ") and where in str(error.value)


def test_an_empty_or_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no ranking list"):
        read_lists(write(tmp_path, ""))
    with pytest.raises(DataError, match="cannot be read"):
        read_lists(tmp_path / "absent.jsonl")


def sugar_row(index: int) -> dict:
    return {
        "index": index, "u": "Can you get me some water?", "g": "drink",
        "s.sents": [f"statement {i}" for i in range(12)], "s.labels": ["location"] * 12,
        "s.gold.sents.indices": [3, 7], "r": "Sure, here is a glass.", "r.label": 2,
        "r.distractors": [{"r": "No.", "r.label": 0}, {"r": "Maybe later.", "r.label": 1}], "polarity": "yes",
    }  # fmt: skip


def test_the_sugar_converter(tmp_path: Path) -> None:
    source = tmp_path / "sugar.jsonl"
    source.write_text(json.dumps(sugar_row(4)) + "\n" + json.dumps(sugar_row(9)) + "\n")
    out = tmp_path / "out.jsonl"
    assert convert.main(["sugar", str(source), str(out)]) == 0
    lists = read_lists(out)
    assert [x.group for x in lists] == ["sugar-4", "sugar-9"]
    assert [c.label for c in lists[0].candidates] == [2, 0, 1] and lists[0].relevant_situations == (3, 7)
    assert len(lists[0].situations) == 12 and lists[0].context == (
        Turn("user", "Can you get me some water?"),
    )


def test_the_dailydialog_pp_converter(tmp_path: Path) -> None:
    row = {
        "id": 7, "context": ["Hello there.", "Hi, how are you?", "Fine, and you?"],
        "positive_responses": [f"good {i}" for i in range(5)],
        "adversarial_negative_responses": [f"fine you are {i}" for i in range(5)],
        "random_negative_responses": [f"the cat {i}" for i in range(5)],
    }  # fmt: skip
    source = tmp_path / "dev.jsonl"
    source.write_text(json.dumps(row) + "\n")
    out = tmp_path / "out.jsonl"
    assert convert.main(["dailydialog-pp", str(source), str(out)]) == 0
    (only,) = read_lists(out)
    assert [t.speaker for t in only.context] == ["user", "bot", "user"]
    kinds = [(c.generator, c.label) for c in only.candidates]
    assert kinds == [("human", 1)] * 5 + [("adversarial", 0)] * 5 + [("random", 0)] * 5


def topical_chat_fixture(root: Path) -> Path:
    (root / "conversations").mkdir(parents=True)
    (root / "reading_sets").mkdir()
    wiki = {"shortened_wiki_lead_section": {"Football is a sport. It is played by two teams.": 1},
            "summarized_wiki_lead_section": {"Jazz is music. It began in New Orleans.": 2}}  # fmt: skip
    (root / "wiki.json").write_text(json.dumps(wiki))

    def conversation(topic: str, n: int) -> dict:
        return {"article_url": "u", "config": "A", "conversation_rating": {},
                "content": [{"message": f"{topic} turn {i}", "agent": f"agent_{1 + i % 2}", "sentiment": "x",
                             "knowledge_source": [], "turn_rating": "Good"} for i in range(n)]}  # fmt: skip

    def reading(entity: str, kind: str, ident: int) -> dict:
        section = {"FS1": {"entity": entity, kind: ident, "fun_facts": []}}
        return {"agent_1": section, "agent_2": section, "article_url": "u", "config": "A"}

    convs = {
        "c1": conversation("football", 8),
        "c2": conversation("soccer", 8),
        "c3": conversation("jazz", 8),
    }
    football = reading("Football", "shortened_wiki_lead_section", 1)
    sets = {"c1": football, "c2": football, "c3": reading("Jazz", "summarized_wiki_lead_section", 2)}
    for split in TOPICAL_CHAT_SPLITS:
        mine = dict(convs) if split == "valid_freq" else {}
        (root / "conversations" / f"{split}.json").write_text(json.dumps(mine))
        (root / "reading_sets" / f"{split}.json").write_text(json.dumps({k: sets[k] for k in mine}))
    return root


def rewrite_turns(source: Path, templates: dict[str, str]) -> None:
    """Each named conversation's turns said anew: ``template.format(i=index, said=the old message)``."""
    path = source / "conversations" / "valid_freq.json"
    convs = json.loads(path.read_text())
    for conversation, template in templates.items():
        for i, turn in enumerate(convs[conversation]["content"]):
            turn["message"] = template.format(i=i, said=turn["message"])
    path.write_text(json.dumps(convs))


def test_the_topical_chat_converter_mines_each_kind_of_negative(tmp_path: Path) -> None:
    source = topical_chat_fixture(tmp_path / "tc")
    out = tmp_path / "out.jsonl"
    assert convert.main(["topical-chat", str(source), str(out)]) == 0
    lists = read_lists(out)
    assert len(lists) == 3 * 7 and {x.group for x in lists} == {
        "topical-chat-c1",
        "topical-chat-c2",
        "topical-chat-c3",
    }
    for x in lists:
        true = [c for c in x.candidates if c.label == 1]
        assert len(true) == 1 and len(x.candidates) == 10, x
        texts = [c.text for c in x.candidates]
        assert len(set(texts)) == len(texts)
        assert x.context[-1].speaker == "user"  # the responder is the bot
    late = [x for x in lists if x.group == "topical-chat-c1" and len(x.context) >= 3]
    kinds = {c.generator for x in late for c in x.candidates}
    assert {"human", "context", "nearby", "same-entity", "random"} <= kinds
    same_entity = [
        c.text
        for x in lists
        if x.group == "topical-chat-c1"
        for c in x.candidates
        if c.generator == "same-entity"
    ]
    assert same_entity and all(t.startswith("soccer") for t in same_entity)  # c2 shares the Football entity
    situated = [x for x in lists if x.situations]
    leads = {
        "Football is a sport.",
        "It is played by two teams.",
        "Jazz is music.",
        "It began in New Orleans.",
    }
    assert situated and all(s in leads for x in situated for s in x.situations)
    out_again = tmp_path / "again.jsonl"
    convert.main(["topical-chat", str(source), str(out_again)])
    assert out_again.read_text() == out.read_text(), "the mined lists must be the same on every run"


def test_the_topical_chat_converter_writes_the_negative_mix_asked_for(tmp_path: Path) -> None:
    source = topical_chat_fixture(tmp_path / "tc")
    out = tmp_path / "hard.jsonl"
    mix = "echo:1,overlap:2,fact:1,random:1"
    assert convert.main(["topical-chat", str(source), str(out), "--negatives", mix]) == 0
    lists = read_lists(out)
    assert len(lists) == 3 * 7
    leads = {"football": {"Football is a sport.", "It is played by two teams."},
             "jazz": {"Jazz is music.", "It began in New Orleans."}}  # fmt: skip
    for x in lists:
        kinds = sorted(c.generator or "" for c in x.candidates)
        assert kinds == ["echo", "fact", "human", "overlap", "overlap", "random"], x
        (fact,) = [c.text for c in x.candidates if c.generator == "fact"]
        assert fact in leads["jazz" if x.group == "topical-chat-c3" else "football"]  # its own entities
        (echo,) = [c.text for c in x.candidates if c.generator == "echo"]
        assert echo == x.context[-1].text  # the partner's last turn, said back
        topic = x.group.removeprefix("topical-chat-c")
        own = {"1": "football", "2": "soccer", "3": "jazz"}[topic]
        overlap = [c.text for c in x.candidates if c.generator == "overlap"]
        assert all(not t.startswith(own) for t in overlap)  # always another conversation's turn
    again = tmp_path / "again.jsonl"
    convert.main(["topical-chat", str(source), str(again), "--negatives", mix])
    assert again.read_text() == out.read_text()


def test_retrieved_negatives_are_the_other_conversations_turns_nearest_in_the_retriever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pools of three: of the 16 turns of the other two conversations, the three nearest a football
    # context are the soccer conversation's, never jazz's (which the random negatives may draw).
    monkeypatch.setattr(topical_chat, "RETRIEVED_POOL", 3)
    source = topical_chat_fixture(tmp_path / "tc")
    rewrite_turns(source, {
        "c1": "football: the quarterback threw a touchdown pass in the last quarter ({i})",
        "c2": "soccer: the striker scored a goal for the team in the last minute ({i})",
        "c3": "jazz: the saxophone solo at the jazz club was wonderful ({i})",
    })  # fmt: skip
    out = tmp_path / "retrieved.jsonl"
    argv = ["topical-chat", str(source), str(out), "--negatives", "retrieved:2,random:1"]
    assert convert.main([*argv, "--retriever", str(RETRIEVER)]) == 0
    lists = read_lists(out)
    assert len(lists) == 3 * 7
    nearest = {"c1": "soccer", "c2": "football"}
    for x in lists:
        kinds = sorted(c.generator or "" for c in x.candidates)
        assert kinds == ["human", "random", "retrieved", "retrieved"], x
        retrieved = [c.text for c in x.candidates if c.generator == "retrieved"]
        conversation = x.group.removeprefix("topical-chat-")
        if conversation in nearest:
            assert all(t.startswith(nearest[conversation]) for t in retrieved), x
        own = {"c1": "football", "c2": "soccer", "c3": "jazz"}[conversation]
        assert not any(t.startswith(own) for t in retrieved), x
    again = tmp_path / "again.jsonl"
    assert convert.main([*argv[:2], str(again), *argv[3:], "--retriever", str(RETRIEVER)]) == 0
    assert again.read_text() == out.read_text()


def test_the_nearest_of_other_groups_never_fill_a_row_with_its_own_group() -> None:
    # Two docs of group 1 and three of group 0; five wanted: group 0's query gets group 1's two,
    # best first, and group 1's gets group 0's three, not its own to make up the five.
    scores = np.arange(10, dtype=np.float32).reshape(2, 5)
    hits = nearest_of_other_groups(
        lambda rows: scores[rows].copy(), 2, np.array([0, 0, 0, 1, 1]), np.array([0, 1]), 5
    )
    assert hits == [[4, 3], [2, 1, 0]]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "needs --retriever"),
        (["--retriever", "."], "no retriever.json"),
    ],
)
def test_retrieved_negatives_without_a_retriever_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    source = topical_chat_fixture(tmp_path / "tc")
    argv = ["topical-chat", str(source), str(tmp_path / "o.jsonl"), "--negatives", "retrieved:1"]
    with pytest.raises(SystemExit) as exit_:
        convert.main([*argv, *extra])
    assert exit_.value.code == 2 and says in capsys.readouterr().err


def test_short_negatives_are_short_turns_of_other_conversations(tmp_path: Path) -> None:
    source = topical_chat_fixture(tmp_path / "tc")
    # The jazz conversation's turns made longer than a short negative may be.
    path = source / "conversations" / "valid_freq.json"
    convs = json.loads(path.read_text())
    for i, turn in enumerate(convs["c3"]["content"]):
        turn["message"] = f"jazz turn {i} goes on and on about the music, the players and the clubs"
    for topic in ("tennis", "golf", "chess", "cricket"):  # more short turns to draw from
        content = [{**t, "message": f"{topic} turn {i}"} for i, t in enumerate(convs["c1"]["content"])]
        convs[topic] = {**convs["c1"], "content": content}
    path.write_text(json.dumps(convs))
    out = tmp_path / "short.jsonl"
    assert convert.main(["topical-chat", str(source), str(out), "--negatives", "short:2,random:1"]) == 0
    lists = read_lists(out)
    assert len(lists) == 7 * 7
    for x in lists:
        assert sorted(c.generator or "" for c in x.candidates) == ["human", "random", "short", "short"], x
        short = [c.text for c in x.candidates if c.generator == "short"]
        assert all(len(t.split()) <= SHORT_WORDS for t in short)
        conversation = x.group.removeprefix("topical-chat-")
        own = {"c1": "football", "c2": "soccer", "c3": "jazz"}.get(conversation, conversation)
        assert not any(t.startswith((own, "jazz")) for t in short), x  # another conversation's, never long


def test_shared_word_negatives_reuse_a_word_of_the_context_from_another_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three conversations are too few for the "rare word" cut: every word counts as rare here.
    monkeypatch.setattr(negatives, "CONTENT_WORD_MAX_SHARE", 1.0)
    source = topical_chat_fixture(tmp_path / "tc")
    rewrite_turns(source, {"c1": "{said}. The stadium was loud on game day number {i}.",
                           "c2": "{said}. The stadium was loud on game day number {i}.",
                           "c3": "{said}. The stadium hosted a quiet concert on night {i}."})  # fmt: skip
    out = tmp_path / "shared-word.jsonl"
    mix = "shared-word:2,random:1"
    assert convert.main(["topical-chat", str(source), str(out), "--negatives", mix]) == 0
    lists = read_lists(out)
    assert len(lists) == 3 * 7
    for x in lists:
        assert sorted(c.generator or "" for c in x.candidates) == [
            "human",
            "random",
            "shared-word",
            "shared-word",
        ]
        drawn = [c.text for c in x.candidates if c.generator == "shared-word"]
        # c1 and c2 share the Football entity: each draws from the jazz conversation only, and it
        # from them; always one sentence, with a word of the last two turns.
        other_topic = "concert" if x.group in ("topical-chat-c1", "topical-chat-c2") else "game day"
        assert all(other_topic in t and " turn " not in t for t in drawn), x
        recent = content_words(" ".join(turn.text for turn in x.context[-2:]))
        assert all(content_words(t) & recent for t in drawn), x
    again = tmp_path / "again.jsonl"
    convert.main(["topical-chat", str(source), str(again), "--negatives", mix])
    assert again.read_text() == out.read_text()


def test_the_sugar_converter_adds_the_wrong_replies_asked_for(tmp_path: Path) -> None:
    other = sugar_row(9) | {"u": "Can you turn on the lights?", "r": "Sure, switching the lights on."}
    source = tmp_path / "sugar.jsonl"
    source.write_text(json.dumps(sugar_row(4)) + "\n" + json.dumps(other) + "\n")
    out = tmp_path / "out.jsonl"
    assert convert.main(["sugar", str(source), str(out), "--negatives", "statement:2,other-reply:1"]) == 0
    first, second = read_lists(out)
    assert [c.label for c in first.candidates] == [2, 0, 1, 0, 0, 0]
    added = first.candidates[3:]
    assert [c.generator for c in added] == ["statement", "statement", "other-reply"]
    distractors = {s for i, s in enumerate(first.situations) if i not in first.relevant_situations}
    assert {c.text for c in added[:2]} <= distractors  # never a statement the request needs
    assert added[2].text == "Sure, switching the lights on."  # the other request's best reply
    assert second.candidates[5].text == "Sure, here is a glass."


def test_situation_flip_negatives_are_the_same_request_s_opposite_best_replies(tmp_path: Path) -> None:
    declined = sugar_row(5) | {"polarity": "no", "r": "Sorry, the tap is broken. Juice instead?"}
    also_yes = sugar_row(6) | {"r": "Sure, a cold one coming up."}
    elsewhere = sugar_row(7) | {"u": "Can you turn on the lights?", "polarity": "no", "r": "The bulb is out."}
    source = tmp_path / "sugar.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (sugar_row(4), declined, also_yes, elsewhere)))
    out = tmp_path / "out.jsonl"
    argv = ["sugar", str(source), str(out), "--negatives", "situation-flip:5", "--group-by", "request"]
    assert convert.main(argv) == 0
    lists = read_lists(out)
    flips = [[c.text for c in x.candidates if c.generator == "situation-flip"] for x in lists]
    # Each accepting example gets the declining one's best reply, and the mirror: the declining
    # example gets both accepting ones' (same polarity and other requests never count).
    assert flips == [
        ["Sorry, the tap is broken. Juice instead?"],
        sorted(["Sure, here is a glass.", "Sure, a cold one coming up."], key=flips[1].index),
        ["Sorry, the tap is broken. Juice instead?"],
        [],
    ]
    assert all(c.label == 0 for x in lists for c in x.candidates if c.generator == "situation-flip")
    # By request: the three examples of one request are one group, so one side of the split.
    assert [x.group for x in lists] == ["sugar-request: Can you get me some water?"] * 3 + [
        "sugar-request: Can you turn on the lights?"
    ]


def test_contradicted_negatives_put_a_decliner_s_reason_said_the_other_way_among_the_statements(
    tmp_path: Path,
) -> None:
    accepted = sugar_row(4) | {"s.sents": [f"statement {i}" for i in range(11)] + ["The tap works."]}
    declined = sugar_row(5) | {
        "polarity": "no",
        "r": "Sorry, the tap is broken. Shall I bring juice instead?",
        "s.sents": [f"statement {i}" for i in range(11)] + ["The tap is broken."],
        "s.gold.sents.indices": [3, 11],
    }
    source = tmp_path / "sugar.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (accepted, declined)))
    out = tmp_path / "out.jsonl"
    argv = ["sugar", str(source), str(out), "--negatives", "contradicted:1,situation-flip:1"]
    assert convert.main(argv) == 0
    accepting, declining = read_lists(out)
    # The accepting list: one statement more, relevant, saying the decliner's reason the other way;
    # the decliner's reply is wrong there, and it is not drawn again as a situation-flip negative.
    assert len(accepting.situations) == 13
    added = [s for s in accepting.situations if s not in accepted["s.sents"]]
    assert added == ["The tap is working."]
    assert accepting.situations.index(added[0]) in accepting.relevant_situations
    relevant = {accepting.situations[i] for i in accepting.relevant_situations}
    assert relevant == {"statement 3", "statement 7", added[0]}
    wrong = [(c.text, c.label, c.generator) for c in accepting.candidates[3:]]
    assert wrong == [("Sorry, the tap is broken. Shall I bring juice instead?", 0, "contradicted")]
    # The declining list is as situation-flip makes it: its statements untouched.
    assert declining.situations == tuple(declined["s.sents"])
    assert [c.generator for c in declining.candidates[3:]] == ["situation-flip"]


def test_a_plain_yes_is_acceptable_where_the_example_accepts_and_wrong_where_it_declines(
    tmp_path: Path,
) -> None:
    from dialogue_ranker.training.converters.sugar import PLAIN_YES

    declined = sugar_row(5) | {"polarity": "no", "r": "Sorry, the tap is broken. Juice instead?"}
    source = tmp_path / "sugar.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (sugar_row(4), declined)))
    out = tmp_path / "out.jsonl"
    assert convert.main(["sugar", str(source), str(out), "--negatives", "plain-yes:2"]) == 0
    accepting, declining = read_lists(out)
    for x, label in ((accepting, 1), (declining, 0)):
        plain = [c for c in x.candidates if c.generator == "plain-yes"]
        assert len(plain) == 2 and all(c.text in PLAIN_YES and c.label == label for c in plain)


def test_strip_openers_drops_sure_and_sorry_and_leaves_the_lists_as_they_were(tmp_path: Path) -> None:
    declined = sugar_row(5) | {"polarity": "no", "r": "Sorry, but the tap is broken. Juice instead?"}
    source = tmp_path / "sugar.jsonl"
    distractors = [{"r": "Sure!", "r.label": 0}, {"r": "Maybe later.", "r.label": 1}]
    accepted = sugar_row(4) | {"r.distractors": distractors}
    source.write_text("".join(json.dumps(r) + "\n" for r in (accepted, declined)))
    plain, stripped = tmp_path / "plain.jsonl", tmp_path / "stripped.jsonl"
    argv = ["sugar", str(source), "--negatives", "situation-flip:1"]
    assert convert.main([*argv[:2], str(plain), *argv[2:]]) == 0
    assert convert.main([*argv[:2], str(stripped), *argv[2:], "--strip-openers", "1"]) == 0
    before, after = read_lists(plain), read_lists(stripped)
    texts = [[c.text for c in x.candidates] for x in after]
    assert texts[0][0] == "Here is a glass." and texts[1][0] == "The tap is broken. Juice instead?"
    assert texts[1][3] == "Here is a glass."  # the situation-flip negative too
    assert texts[0][1:3] == ["Sure!", "Maybe later."]  # nothing would be left / no opener: as it was
    for x, y in zip(before, after, strict=True):  # the same lists, labels and negatives
        kinds = [(c.label, c.generator) for c in x.candidates]
        assert kinds == [(c.label, c.generator) for c in y.candidates]
        assert (x.situations, x.group) == (y.situations, y.group)


def test_group_by_is_for_sugar_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "dd.jsonl"
    source.write_text("{}\n")
    with pytest.raises(SystemExit) as exit_:
        convert.main(["dailydialog-pp", str(source), str(tmp_path / "o.jsonl"), "--group-by", "request"])
    assert exit_.value.code == 2 and "--group-by is for sugar" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("dataset", "option", "value"),
    [
        ("sugar", "--negatives", "fact:1"),
        ("sugar", "--negatives", "statement:x"),
        ("dailydialog-pp", "--negatives", "statement:1"),
        ("dailydialog-pp", "--strip-openers", "0.5"),
        ("sugar", "--strip-openers", "1.5"),
    ],
)
def test_a_bad_sugar_option_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dataset: str, option: str, value: str
) -> None:
    source = tmp_path / "sugar.jsonl"
    source.write_text(json.dumps(sugar_row(4)) + "\n")
    with pytest.raises(SystemExit) as exit_:
        convert.main([dataset, str(source), str(tmp_path / "o.jsonl"), option, value])
    assert exit_.value.code == 2 and option in capsys.readouterr().err


@pytest.mark.parametrize("mix", ["echo:x", "bogus:1", "random:0"])
def test_a_bad_negative_mix_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mix: str
) -> None:
    source = topical_chat_fixture(tmp_path / "tc")
    with pytest.raises(SystemExit) as exit_:
        convert.main(["topical-chat", str(source), str(tmp_path / "o.jsonl"), "--negatives", mix])
    assert exit_.value.code == 2 and "--negatives" in capsys.readouterr().err


def test_a_converter_on_the_wrong_layout_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "not-sugar.jsonl"
    source.write_text('{"hello": 1}\n')
    assert convert.main(["sugar", str(source), str(tmp_path / "o.jsonl")]) == 1
    assert "not in the expected layout" in capsys.readouterr().err


def test_to_json_keeps_optional_fields_only_when_set() -> None:
    row = RankingList(
        context=(Turn("user", "hi"),),
        candidates=(Candidate("a", 1), Candidate("b", 0, action="x")),
        group="g",
    ).to_json()
    assert row["candidates"] == [{"text": "a", "label": 1}, {"text": "b", "label": 0, "action": "x"}]
    assert "situations" not in row


def test_short_reply_lists_are_the_full_mix_lists_whose_true_reply_is_short(tmp_path: Path) -> None:
    source = topical_chat_fixture(tmp_path / "tc")
    path = source / "conversations" / "valid_freq.json"
    convs = json.loads(path.read_text())
    for i, turn in enumerate(convs["c3"]["content"]):  # the jazz conversation's replies: 10 words
        turn["message"] = f"jazz turn {i} goes on about the players and clubs"
    path.write_text(json.dumps(convs))
    mix = ["--negatives", "nearby:1,same-entity:1,random:2"]
    full, short = tmp_path / "full.jsonl", tmp_path / "short.jsonl"
    assert convert.main(["topical-chat", str(source), str(full), *mix]) == 0
    options = ["--reply-max-words", "5", "--drop-negatives", "nearby"]
    assert convert.main(["topical-chat", str(source), str(short), *mix, *options]) == 0
    expected = [
        dataclasses.replace(x, candidates=tuple(c for c in x.candidates if c.generator != "nearby"))
        for x in read_lists(full)
        if len(next(c for c in x.candidates if c.label == 1).text.split()) <= 5
    ]
    assert read_lists(short) == expected
    assert {x.group for x in expected} == {"topical-chat-c1", "topical-chat-c2"}


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["sugar", "--reply-max-words", "5"], "--reply-max-words is for topical-chat, not sugar"),
        (["topical-chat", "--reply-max-words", "0"], "--reply-max-words 0 is not >= 1"),
        (["topical-chat", "--drop-negatives", "nearby,far"], "--drop-negatives 'far' is not one of"),
    ],
)
def test_the_short_reply_options_are_refused_where_they_do_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str], problem: str
) -> None:
    dataset, *options = argv
    with pytest.raises(SystemExit):
        convert.main([dataset, str(tmp_path), str(tmp_path / "out.jsonl"), *options])
    assert problem in capsys.readouterr().err
