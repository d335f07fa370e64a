"""Schema-Guided Dialogue (SGD) as ranking lists: one list per system turn (from the second turn on).

The true system turn (label 1) against the negatives of :mod:`.dialogue_lists`; ``same-service``
draws from dialogues of the same first service, and ``contradicted`` swaps a time, amount, count or
date the system repeats from the conversation (:class:`.contradicted_replies.ValueSwapper`).
The shared files carry no API results, so the lists have no situations. Each source file (the
dataset's own train, dev and test splits) is converted on its own; a list's group is
``sgd-<split>-<dialogue_id>``, since dialogue ids repeat across SGD's splits.
CC BY-SA 4.0: a model trained on it may ship, with attribution; derived data stays CC BY-SA 4.0.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.training.converters.contradicted_replies import ValueSwapper
from dialogue_ranker.training.converters.dialogue_lists import Dialogue, Reply, contradict_by, dialogue_lists

#: Nine negatives per list, so a list is "1 of 10" as Topical-Chat's. Kinds that find too few
#: (no later turn, no value to swap) are topped up with ``random``.
SGD_NEGATIVES = {"retrieved": 3, "earlier": 1, "later": 1, "same-service": 2, "contradicted": 1, "random": 1}


def read_jsonl_gz(path: Path) -> Iterator[dict]:
    """The JSON objects of a gzipped (or plain) JSONL file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def split_name(path: Path) -> str:
    """``train`` for ``sgd_train.jsonl.gz``: the part of the name after the last underscore."""
    stem = path.name.split(".")[0]
    return re.split(r"[_-]", stem)[-1] or stem


def read_sgd(path: Path, *, max_dialogues: int | None = None, seed: int = 0) -> list[Dialogue]:
    """The file's dialogues; ``max_dialogues``: a seeded sample of that many, in file order."""
    split = split_name(path)
    dialogues = []
    for row in read_jsonl_gz(path):
        texts = ((str(t["speaker"]), " ".join(str(t["text"]).split())) for t in row["turns"])
        turns = tuple((speaker, text) for speaker, text in texts if text)
        replies = tuple(Reply(i) for i, (speaker, _) in enumerate(turns) if speaker == "system" and i > 0)
        if replies:
            services = row.get("services") or [""]
            dialogues.append(Dialogue(f"sgd-{split}-{row['dialogue_id']}", turns, replies, str(services[0])))
    if max_dialogues is not None and len(dialogues) > max_dialogues:
        kept = sorted(random.Random(seed).sample(range(len(dialogues)), max_dialogues))
        dialogues = [dialogues[i] for i in kept]
    return dialogues


def convert_sgd(
    source: Path,
    *,
    negatives: dict[str, int] | None = None,
    retriever: Path | None = None,
    paraphrases: str = "drop",
    max_dialogues: int | None = None,
    seed: int = 0,
) -> Iterator[RankingList]:
    """An SGD file's system turns as ranking lists (see the module doc)."""
    dialogues = read_sgd(source, max_dialogues=max_dialogues, seed=seed)
    swapper = ValueSwapper(text for d in dialogues for _, text in d.turns)

    yield from dialogue_lists(
        dialogues,
        dict(SGD_NEGATIVES if negatives is None else negatives),
        seed=seed,
        retriever=retriever,
        paraphrases=paraphrases,
        contradict=contradict_by(swapper.swap),
    )
