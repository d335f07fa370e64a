"""Statements that never hurt: train lists again with their statements dropped, shuffled or padded.

``ranker convert ... --statement-variants dropped,shuffled,irrelevant`` follows each list that has
situations with copies of it (same context, candidates and labels, same group):

| variant | the copy's situations |
| --- | --- |
| ``dropped`` | none; and the candidates that only statements make wrong are left out (see below) |
| ``shuffled`` | the same, in another order (relevant indices follow them) |
| ``irrelevant`` | the same, with :data:`IRRELEVANT` statements of other groups put in at random places |

So a model trained on them sees the same ranking with and without statements that do not decide
it, and learns that a statement it cannot use must not move a score: what the 2.10.0 model did not
(persona lines sent as situations made it worse on persona chat).

**What is kept apart.** A list whose statements decide its ranking would teach the opposite when
they are dropped, so ``dropped`` skips lists that mark ``relevant_situations`` (SUGAR's, the
written situations) and leaves out the candidates whose kind is :data:`STATEMENT_KINDS` (a reply
that denies a persona line is only wrong beside that line). An ``irrelevant`` statement shares no
content word with any candidate of the list (another persona's "I hate dogs" is not added to a list
whose reply says "I love dogs"), and no group's statement is added to its own lists.

**Only the train part.** Copies are made for lists whose group falls in the train part of the group
split (:func:`evaluation.domains.group_split`); dev and test lists are written as they are, so
early stopping, calibration and evaluation read the same lists with or without this option.

Why in the converter and not in ``ranker train``: the variants are data (a file records what a run
trained on, and its counts go in a research note), they stay in their list's group so no split is
cut, and SUGAR's ``--strip-openers`` set the precedent for augmentations drawn at conversion.
Training still shuffles every list's statements each epoch (:func:`training.train_lists.encode`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Iterator

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.training.converters.negatives import content_words

STATEMENT_VARIANTS = ("dropped", "shuffled", "irrelevant")
#: Negative kinds that only the list's statements make wrong (dropped with the statements).
STATEMENT_KINDS = frozenset({"contradicted", "situation-flip", "plain-yes", "statement"})
#: Statements of other groups added by the ``irrelevant`` variant.
IRRELEVANT = 2
#: Draws of another group's statement before a list gets fewer than :data:`IRRELEVANT`.
DRAWS = 20


def dropped(x: RankingList) -> RankingList | None:
    """``x`` without its statements and the candidates only they make wrong; None where it cannot be."""
    if x.relevant_situations:
        return None
    kept = tuple(c for c in x.candidates if c.generator not in STATEMENT_KINDS)
    # A ranking list left with one candidate ranks nothing; a pointwise list (one rated reply,
    # for calibration) was one candidate to begin with and stays useful.
    if not kept or (len(kept) == 1 and len(x.candidates) > 1):
        return None
    return dataclasses.replace(x, situations=(), relevant_situations=(), candidates=kept)


def shuffled(x: RankingList, rng: random.Random) -> RankingList | None:
    """``x`` with its statements in another order (None for a single statement)."""
    if len(x.situations) < 2:
        return None
    order = list(range(len(x.situations)))
    while order == sorted(order):
        rng.shuffle(order)
    return reorder(x, order, [])


def reorder(x: RankingList, order: list[int], added: list[str]) -> RankingList:
    """``x``'s statements as ``order`` picks them (indices; beyond the list's own, ``added``'s)."""
    pool = [*x.situations, *added]
    where = {old: new for new, old in enumerate(order)}
    return dataclasses.replace(
        x,
        situations=tuple(pool[i] for i in order),
        relevant_situations=tuple(sorted(where[i] for i in x.relevant_situations)),
    )


def with_irrelevant(x: RankingList, rng: random.Random, pool: list[tuple[str, str]]) -> RankingList | None:
    """``x`` with up to :data:`IRRELEVANT` statements of other groups, none about its candidates."""
    about = set().union(*(content_words(c.text) for c in x.candidates))
    own = {s.lower() for s in x.situations}
    added: list[str] = []
    for _ in range(DRAWS):
        if len(added) == IRRELEVANT:
            break
        group, statement = pool[rng.randrange(len(pool))]
        if group != x.group and statement.lower() not in own and not content_words(statement) & about:
            own.add(statement.lower())
            added.append(statement)
    if not added:
        return None
    order = list(range(len(x.situations)))
    for i in range(len(x.situations), len(x.situations) + len(added)):
        order.insert(rng.randrange(len(order) + 1), i)
    return reorder(x, order, added)


def statement_variants(
    lists: Iterable[RankingList], kinds: Iterable[str] = STATEMENT_VARIANTS, *, seed: int = 0
) -> Iterator[RankingList]:
    """Every list, each train list with statements followed by its variants of ``kinds`` (module doc)."""
    kinds = tuple(kinds)
    if unknown := sorted(set(kinds) - set(STATEMENT_VARIANTS)):
        raise ValueError(f"statement variant {unknown[0]!r} is not one of {', '.join(STATEMENT_VARIANTS)}")
    lists = list(lists)
    rng = random.Random(seed)
    pool = sorted({(x.group, s) for x in lists for s in x.situations})
    for x in lists:
        yield x
        if not x.situations or group_split(x.group) != "train":
            continue
        made = {
            "dropped": lambda x=x: dropped(x),
            "shuffled": lambda x=x: shuffled(x, rng),
            "irrelevant": lambda x=x: with_irrelevant(x, rng, pool),
        }
        for kind in kinds:
            variant = made[kind]()
            if variant is not None:
                yield variant
