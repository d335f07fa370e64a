"""SUGAR as ranking lists: one list per example.

The request, its 12 statements (the gold ones marked relevant), its three rated responses. With
``--negatives``, wrong replies (label 0) are added, named in their ``generator``: ``statement``
(one of the example's distractor statements, said as the reply: about the situation, but not
about the request) and ``other-reply`` (the best reply to another request: a fitting assistant
reply, to something else). CC BY-SA 4.0.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.training.converters.negatives import take_negatives

#: Wrong replies ``--negatives`` can add to SUGAR lists (none by default).
SUGAR_NEGATIVE_KINDS = ("statement", "other-reply")


def convert_sugar(
    path: Path, *, seed: int = 0, negatives: dict[str, int] | None = None
) -> Iterator[RankingList]:
    """SUGAR examples as ranking lists, with ``negatives`` (see the module doc) added when asked."""
    from dialogue_ranker.data.sugar import load_sugar

    mix = negatives or {}
    examples = list(load_sugar(path))
    best_replies = [
        (x.index, x.candidates[x.labels.index(max(x.labels))]) for x in examples if max(x.labels) == 2
    ]
    rng = random.Random(seed)
    for example in examples:
        candidates = [
            Candidate(t, label) for t, label in zip(example.candidates, example.labels, strict=True)
        ]
        seen = {c.text.lower() for c in candidates}
        added: list[Candidate] = []
        relevant = set(example.gold)
        distractors = [s for i, s in enumerate(example.statements) if i not in relevant]
        take_negatives(rng, distractors, mix.get("statement", 0), "statement", seen, added)
        others = [text for index, text in best_replies if index != example.index]
        # A few more than asked for: another request's best reply can repeat one of this list's.
        take_negatives(
            rng,
            rng.sample(others, min(len(others), 4 * mix.get("other-reply", 0))),
            mix.get("other-reply", 0),
            "other-reply",
            seen,
            added,
        )
        yield RankingList(
            context=tuple(example.turns),
            situations=example.statements,
            relevant_situations=example.gold,
            candidates=(*candidates, *added),
            group=f"sugar-{example.index}",
        )
