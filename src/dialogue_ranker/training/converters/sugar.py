"""SUGAR as ranking lists: one list per example.

The request, its 12 statements (the gold ones marked relevant), its three rated responses. With
``--negatives``, wrong replies (label 0) are added, named in their ``generator``: ``statement``
(one of the example's distractor statements, said as the reply: about the situation, but not
about the request), ``other-reply`` (the best reply to another request: a fitting assistant
reply, to something else) and ``situation-flip`` (the best reply of another example with the
same request whose situation calls for the opposite answer, accept against decline: the same
words asked, only the statements tell the two replies apart). An example with such partners
gets their replies in its own list, and each partner's list gets this one's (the mirrored
contrast), so both orders of a pair are trained and measured. ``contradicted`` goes one step
further for accepting examples: a declining partner's reason, said the other way ("The store is
open."), joins the statements, and the partner's reply joins the candidates, so the wrong
reply names a statement that is there and says the opposite
(:mod:`~dialogue_ranker.training.converters.contradiction`). ``plain-yes`` adds a bare yes
(:data:`PLAIN_YES`), acceptable where the example accepts and wrong where it declines (so not
always a wrong reply, despite the option's name). CC BY-SA 4.0.

``group_by``: ``example`` (each example its own group, how models up to 2.8.0 split SUGAR) or
``request`` (:func:`dialogue_ranker.data.sugar.sugar_group`).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.training.converters.contradiction import negate, reason_statement
from dialogue_ranker.training.converters.negatives import take_negatives

if TYPE_CHECKING:
    from dialogue_ranker.data.sugar import SugarExample

#: Wrong replies ``--negatives`` can add to SUGAR lists (none by default).
SUGAR_NEGATIVE_KINDS = ("statement", "other-reply", "situation-flip", "contradicted", "plain-yes")
#: ``plain-yes``: a bare compliance, written here (no dataset's text). Acceptable (label 1) where the
#: example accepts, wrong (label 0) where it declines: the same words, right or wrong by the
#: statements alone. SUGAR's accepting replies all offer something more ("Sure, ... Would you
#: like ...?"), so without these a plain "Done, it's booked." reads as worse than any decline.
PLAIN_YES = (
    "Done!",
    "Sure, right away.",
    "Okay, it's done.",
    "All set, it's taken care of.",
    "Of course, doing it now.",
    "Sure thing, I'm on it.",
    "Done, you're all set.",
    "Okay, I've done that for you.",
)


def convert_sugar(
    path: Path,
    *,
    seed: int = 0,
    negatives: dict[str, int] | None = None,
    group_by: str = "example",
    strip_openers: float = 0.0,
) -> Iterator[RankingList]:
    """SUGAR examples as ranking lists, with ``negatives`` (see the module doc) added when asked."""
    from dialogue_ranker.data.sugar import load_sugar, sugar_group

    mix = negatives or {}
    examples = list(load_sugar(path))
    best_replies = [(x.index, x.best_reply) for x in examples if max(x.labels) == 2]
    by_request = defaultdict(list)
    for x in examples:
        by_request[x.request].append(x)
    # Each declining example's reason said the other way, found once (every accepting example of
    # its request draws from it).
    denials = _denials(examples) if mix.get("contradicted", 0) else {}
    rng = random.Random(seed)
    # Its own draws, so the lists and their negatives are the same with and without it.
    opener_rng = random.Random(seed + 1)
    for example in examples:
        candidates = [
            Candidate(t, label) for t, label in zip(example.candidates, example.labels, strict=True)
        ]
        seen = {c.text.lower() for c in candidates}
        added: list[Candidate] = []
        relevant = set(example.gold)
        distractors = [s for i, s in enumerate(example.statements) if i not in relevant]
        take_negatives(rng, distractors, mix.get("statement", 0), "statement", seen, added)
        partners = [
            x
            for x in by_request[example.request]
            if x.index != example.index and x.polarity != example.polarity
        ]
        flips = [x.best_reply for x in partners]
        statements, gold = list(example.statements), list(example.gold)
        if example.polarity == "yes" and mix.get("contradicted", 0):
            denied = [(x.best_reply, denials[x.index]) for x in partners if x.index in denials]
            for reply, statement in _contradictions(rng, denied, mix["contradicted"], seen):
                at = rng.randint(0, len(statements))
                statements.insert(at, statement)
                gold = [i + (i >= at) for i in gold] + [at]
                seen.add(reply.lower())
                added.append(Candidate(reply, 0, "contradicted"))
        take_negatives(rng, flips, mix.get("situation-flip", 0), "situation-flip", seen, added)
        for text in rng.sample(PLAIN_YES, min(mix.get("plain-yes", 0), len(PLAIN_YES))):
            added.append(Candidate(text, int(example.polarity == "yes"), "plain-yes"))
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
        replies = [*candidates, *added]
        if strip_openers:
            replies = [
                dataclasses.replace(c, text=without_opener(c.text))
                if opener_rng.random() < strip_openers
                else c
                for c in replies
            ]
        yield RankingList(
            context=tuple(example.turns),
            situations=tuple(statements),
            relevant_situations=tuple(sorted(gold)),
            candidates=tuple(replies),
            group=sugar_group(example, group_by),
        )


#: A reply's opener: every SUGAR reply that accepts says "Sure", every one that declines "Sorry".
_OPENER = re.compile(
    r"^(?:(?:i am |i'm )?sorry|sure|of course|okay|ok|absolutely|certainly|yes|unfortunately)"
    r"(?: thing)?[,.!]?(?:\s+but\b)?[,.!]?\s+",
    re.IGNORECASE,
)


def without_opener(text: str) -> str:
    """``text`` without its opener ("Sorry, but the store is closed." -> "The store is closed.").

    As it is when nothing would be left ("Sure!").
    """
    rest = _OPENER.sub("", text, count=1)
    return rest[0].upper() + rest[1:] if rest.strip() else text


def _denials(examples: list[SugarExample]) -> dict[int, str]:
    """Declining example index -> its best reply's reason said the other way (where the rules can)."""
    out = {}
    for x in examples:
        if x.polarity != "yes":
            reason = reason_statement(x.best_reply, x.statements, x.gold)
            opposite = negate(reason) if reason else None
            if opposite:
                out[x.index] = opposite
    return out


def _contradictions(
    rng: random.Random, denied: list[tuple[str, str]], n: int, seen: set[str]
) -> list[tuple[str, str]]:
    """Up to ``n`` (declining reply, its reason said the other way) from ``denied``, none seen."""
    pairs = {reply: statement for reply, statement in denied if reply.lower() not in seen}
    return rng.sample(list(pairs.items()), min(n, len(pairs)))  # one statement per reply
