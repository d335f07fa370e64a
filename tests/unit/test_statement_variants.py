"""Statements that never hurt: the train lists' variants, and P@1 with and without statements."""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from dialogue_ranker.data.ranking_data import Candidate, RankingList, read_lists
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.serving.tokenization import Turn
from dialogue_ranker.training import convert
from dialogue_ranker.training.converters.negatives import content_words
from dialogue_ranker.training.converters.statement_variants import statement_variants
from dialogue_ranker.training.statement_effect import statement_effect


def groups_in(split: str, n: int) -> list[str]:
    return [g for g in (f"dialogue-{i}" for i in range(500)) if group_split(g) == split][:n]


def persona_list(
    group: str, persona: tuple[str, ...], reply: str, relevant: tuple[int, ...] = ()
) -> RankingList:
    return RankingList(
        context=(Turn("user", "What do you like to do?"),),
        situations=persona,
        relevant_situations=relevant,
        candidates=(
            Candidate(reply, 1, "human"),
            Candidate("The train leaves at noon.", 0, "random"),
            Candidate(reply.replace("I ", "I don't ", 1), 0, "contradicted"),
        ),
        group=group,
    )


def test_train_lists_get_dropped_shuffled_and_padded_copies(tmp_path: Path) -> None:
    (a, b), (held,) = groups_in("train", 2), groups_in("dev", 1)
    lists = [
        persona_list(
            a, ("I love to bake bread.", "I have a cat.", "I live in Ohio."), "I bake bread every day."
        ),
        persona_list(
            b, ("I collect stamps.", "I bake cakes.", "I play the violin."), "I play the violin at night."
        ),
        persona_list(held, ("I swim daily.", "I hate rain."), "I swim in the lake."),
        RankingList(
            (Turn("user", "Hi"),), (Candidate("Hello!", 1), Candidate("Bye.", 0)), a
        ),  # no statements
    ]
    out = list(statement_variants(lists, seed=1))
    assert out[0] == lists[0]
    copies_of_a = out[1:4]
    dropped, shuffled, padded = copies_of_a
    assert dropped.situations == () and [c.generator for c in dropped.candidates] == ["human", "random"]
    assert sorted(shuffled.situations) == sorted(lists[0].situations)
    assert shuffled.situations != lists[0].situations
    assert shuffled.candidates == lists[0].candidates
    own = set(lists[0].situations)
    added = [s for s in padded.situations if s not in own]
    others = set(lists[1].situations) | set(lists[2].situations)
    assert len(added) == 2 and set(added) <= others  # statements of other groups
    about = set().union(*(content_words(c.text) for c in padded.candidates))
    assert not any(content_words(s) & about for s in added)  # none about the candidates
    assert all(x.group == a for x in copies_of_a)
    # The dev list and the list without statements get no copies.
    assert [x for x in out if x.group == held] == [lists[2]]
    assert (
        sum(1 for x in out if x.group == a and not x.situations) == 2
    )  # the no-statement list, one dropped copy


def test_dropped_skips_lists_whose_statements_decide_them_and_relevant_indices_follow_a_shuffle() -> None:
    (a, b) = groups_in("train", 2)
    decided = persona_list(
        a, ("The store is closed.", "It is raining.", "It is noon."), "I can't go then.", (0,)
    )
    other = persona_list(b, ("Tea is hot.",), "I drink tea.")
    out = list(statement_variants([decided, other], ["dropped", "shuffled"], seed=3))
    copies = [x for x in out if x.group == a][1:]
    assert len(copies) == 1  # shuffled only: its statements decide it, so no dropped copy
    (shuffled,) = copies
    assert [shuffled.situations[i] for i in shuffled.relevant_situations] == ["The store is closed."]
    # A pointwise list (one rated reply) keeps its dropped copy; a list left with its positive alone does not.
    rated = RankingList(
        (Turn("user", "A latte"),), (Candidate("One latte?", 0.0, "rated"),), a, ("menu: Latte",)
    )
    only_denied = RankingList(
        (Turn("user", "Hi"),),
        (Candidate("I bake.", 1, "human"), Candidate("I don't bake.", 0, "contradicted")),
        a,
        ("I bake.",),
    )
    copies = list(statement_variants([rated, only_denied], ["dropped"]))
    assert copies == [rated, dataclasses.replace(rated, situations=()), only_denied]
    with pytest.raises(ValueError, match="not one of"):
        list(statement_variants([other], ["reversed"]))


def test_the_convert_option_writes_the_variants(tmp_path: Path) -> None:
    rows = [
        {
            "conversation_id": f"c{i}",
            "user1_persona": ["I bake."],
            "user2_persona": ["I run."],
            "turns": [{"speaker": "user1", "text": "Hi"}, {"speaker": "user2", "text": f"I run {i} miles."}],
        }
        for i in range(6)
    ]
    spc = tmp_path / "spc.jsonl.gz"
    with gzip.open(spc, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    out = tmp_path / "out.jsonl"
    argv = ["persona-chat", str(spc), str(out), "--negatives", "random:1", "--statement-variants", "dropped"]
    assert convert.main(argv) == 0
    written = read_lists(out)
    train = sum(group_split(f"persona-chat-c{i}") == "train" for i in range(6))
    assert 0 < train < 6 and len(written) == 6 + train  # one dropped copy per train list
    assert sum(not x.situations for x in written) == train
    with pytest.raises(SystemExit):
        convert.main([*argv[:-1], "sideways"])


class PrefersDistractors:
    """A fake scorer: with statements, it puts the first wrong candidate first; without, the right one."""

    threshold = 0.5

    def probabilities(self, lists: Sequence[RankingList]) -> list[np.ndarray]:
        out = []
        for x in lists:
            right = np.array([0.9 if c.appropriate else 0.1 for c in x.candidates])
            out.append(1.0 - right if x.situations else right)
        return out


def test_statement_effect_compares_the_same_lists_with_and_without_statements() -> None:
    (a, b) = groups_in("dev", 2)
    lists = [
        persona_list(a, ("I bake.",), "I bake bread."),
        persona_list(b, ("I sing.",), "I sing songs."),
        RankingList(
            (Turn("user", "Hi"),), (Candidate("Hello!", 1), Candidate("Bye.", 0)), a
        ),  # no statements
    ]
    result = statement_effect(PrefersDistractors(), lists)
    assert result == {
        "lists": 2,
        "p_at_1_with": 0.0,
        "p_at_1_without": 1.0,
        "difference": -1.0,
        "top_changed": 1.0,
    }
    assert statement_effect(PrefersDistractors(), lists[2:])["lists"] == 0
