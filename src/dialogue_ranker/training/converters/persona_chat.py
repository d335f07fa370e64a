"""Synthetic-Persona-Chat as ranking lists: one list per turn (from the second on) of each conversation.

Both users respond in turn, so each turn's responder is its speaker, and its persona lines are the
list's situations (what the responder says about itself). The true turn (label 1) is ranked against
the negatives of :mod:`.dialogue_lists`; ``contradicted`` is the true turn with its sentence that
restates a persona line said the other way (:func:`.contradicted_replies.contradict_persona`), so the
wrong reply denies a statement that is in the list. The file is Persona-Chat's test personas only;
it is split by conversation with the project's group split (a stable hash of the group
``persona-chat-<conversation_id>``: 70% train, 15% dev, 15% test), as every converted set is.
CC BY 4.0: a model trained on it may ship, with attribution.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.training.converters.contradicted_replies import contradict_persona
from dialogue_ranker.training.converters.dialogue_lists import Dialogue, Reply, dialogue_lists
from dialogue_ranker.training.converters.sgd import read_jsonl_gz

PERSONA_NEGATIVES = {"retrieved": 4, "earlier": 1, "later": 2, "contradicted": 1, "random": 1}


def read_persona_chat(path: Path) -> list[Dialogue]:
    """The file's conversations, each turn from the second on a reply under its speaker's persona."""
    dialogues = []
    for row in read_jsonl_gz(path):
        texts = ((str(t["speaker"]), " ".join(str(t["text"]).split())) for t in row["turns"])
        turns = tuple((speaker, text) for speaker, text in texts if text)
        personas = {
            speaker: tuple(" ".join(str(s).split()) for s in row.get(f"{speaker}_persona", []))
            for speaker in ("user1", "user2")
        }
        personas = {speaker: tuple(s for s in lines if s) for speaker, lines in personas.items()}
        replies = tuple(Reply(i, personas.get(speaker, ())) for i, (speaker, _) in enumerate(turns) if i > 0)
        if replies:
            dialogues.append(Dialogue(f"persona-chat-{row['conversation_id']}", turns, replies))
    return dialogues


def contradict_reply(rng: random.Random, dialogue: Dialogue, reply: Reply, known: list[str]) -> str | None:
    """The true turn with its sentence that restates a persona line said the other way (or None)."""
    return contradict_persona(dialogue.turns[reply.index][1], reply.situations)


def convert_persona_chat(
    source: Path,
    *,
    negatives: dict[str, int] | None = None,
    retriever: Path | None = None,
    paraphrases: str = "drop",
    seed: int = 0,
) -> Iterator[RankingList]:
    """Synthetic-Persona-Chat's turns as ranking lists under the responder's persona (see the module doc)."""
    yield from dialogue_lists(
        read_persona_chat(source),
        dict(PERSONA_NEGATIVES if negatives is None else negatives),
        seed=seed,
        retriever=retriever,
        paraphrases=paraphrases,
        contradict=contradict_reply,
    )
