"""Turn-level ranking lists from two-party dialogues, with negatives that are on topic but wrong.

The converters of SGD, Synthetic-Persona-Chat and Taskmaster-4 read their files into
:class:`Dialogue` objects and call :func:`dialogue_lists`: one list per responder turn, the true turn
(label 1, ``human``) against negatives of these kinds, each named in its ``generator``:

- ``retrieved``: a responder turn of another dialogue among the 10 nearest the context in the
  bank's retrieval encoder (as the Topical-Chat converter's ``retrieved``);
- ``earlier``: one of this dialogue's earlier responder turns, said again;
- ``later``: one of this dialogue's later responder turns: on topic, at the wrong time;
- ``same-service``: a responder turn of another dialogue of the same service (SGD), from another
  stage of it (at least :data:`OTHER_STAGE` of a dialogue away: the files carry no dialogue
  states, so the stage stands for one);
- ``contradicted``: the true turn with one fact changed (:mod:`.contradicted_replies`);
- ``random``: a responder turn of another dialogue; it also tops up kinds that found too few.

**Paraphrase filter.** A mined negative (all kinds but ``contradicted``) is dropped when it says
what the true turn says: it states the same values (the same numbers, times, weekdays and months,
none in either counts as the same) and its content-word Jaccard with the true turn is >=
:data:`MAX_JACCARD` or, with a retriever, its cosine in the retriever's embedding is >=
:data:`MAX_COSINE`. Task dialogues repeat templates ("What type of food would you like?" / "What
kind of food do you prefer?": cosine 0.88, Jaccard 0.40), which share few words but embed close
together, so word overlap alone keeps them; yet a close turn with other values ("Your savings
account has a balance of $8,675.83." / "The balance from your savings is $13,840.68": cosine 0.87)
is a different fact, the hardest negative there is, so cosine alone would drop the best ones.
``contradicted`` negatives share nearly every word by design and are exempt.

**Paraphrases as right replies** (``paraphrases="right"``). What the filter drops is another way of
saying the true turn, so it may instead join the list as a second right reply (label 1,
``paraphrase``): task dialogues then give lists with several right replies, as SUGAR's and
DailyDialog++'s are, where the true turn alone gives one in ten. The ``retrieved`` kind then looks
through its whole pool for them, not only until it has its negatives; a list takes at most
:data:`MAX_PARAPHRASE_RIGHTS`.
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.serving.banks.encoder import TextEncoder
from dialogue_ranker.serving.cpu import available_cpus
from dialogue_ranker.serving.model_bundle import load_retriever
from dialogue_ranker.serving.tokenization import Turn
from dialogue_ranker.training.converters.negatives import content_words, nearest_of_other_groups

DIALOGUE_NEGATIVE_KINDS = ("retrieved", "earlier", "later", "same-service", "contradicted", "random")
#: ``retrieved`` negatives are drawn from this many nearest responder turns of other dialogues.
RETRIEVED_POOL = 10
#: Context turns kept before the reply (as Topical-Chat's lists).
MAX_CONTEXT_TURNS = 6
#: Paraphrase filter (see the module doc): a negative stating the true turn's values is dropped at
#: this content-word overlap ("Reservation confirmed!" / "Your reservation is confirmed.": 1.0;
#: at 0.5, "It is a metal song." / "It's a pop song." would go, since "pop" is too short a word) ...
MAX_JACCARD = 0.6
#: ... or this cosine in the bank's retrieval encoder. On 13,830 retrieved pairs of 150 SGD dev
#: dialogues, rewordings of one act reach down to about 0.81 ("What type of food would you like?" /
#: "What kind of food?"; "Your alarm has been created." / "I've created that alarm for you": 0.82);
#: 1.5% of the pairs are at 0.8 or above.
MAX_COSINE = 0.8
#: Paraphrases a list takes as right replies (``paraphrases="right"``), besides the true turn.
MAX_PARAPHRASE_RIGHTS = 2
#: What a paraphrase the filter finds becomes: dropped, or a right reply.
PARAPHRASE_USES = ("drop", "right")
#: ``same-service``: a turn at least this far (share of its dialogue) from the true turn's stage.
OTHER_STAGE = 0.25
#: Contexts scored against every responder turn at once in the dense search.
SEARCH_BLOCK = 256


@dataclass(frozen=True)
class Reply:
    """A responder turn to build a list for: its index in the dialogue and what the responder knows."""

    index: int
    situations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dialogue:
    """One dialogue: its group (split unit), turns ``(speaker, text)``, replies and service."""

    group: str
    turns: tuple[tuple[str, str], ...]
    replies: tuple[Reply, ...]
    service: str = ""

    def responder_turns(self) -> list[int]:
        """Indices of the turns lists are built for."""
        return [r.index for r in self.replies]


#: ``contradict(rng, dialogue, reply, context_texts)``: the true turn with one fact changed, or None.
Contradict = Callable[[random.Random, Dialogue, Reply, list[str]], str | None]


def contradict_by(swap: Callable[[random.Random, str, list[str]], str | None]) -> Contradict:
    """A :data:`Contradict` that applies ``swap(rng, true_turn_text, known)`` to the reply's own turn."""

    def contradict(rng: random.Random, dialogue: Dialogue, reply: Reply, known: list[str]) -> str | None:
        return swap(rng, dialogue.turns[reply.index][1], known)

    return contradict


_MONTHS_DAYS = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)


def stated_values(text: str) -> frozenset[str]:
    """The values a turn states: its tokens with a digit, and weekday and month names."""
    return frozenset(w for w in _words(text) if any(ch.isdigit() for ch in w) or w in _MONTHS_DAYS)


def _words(text: str) -> frozenset[str]:
    return frozenset(w.strip(".,!?;:'\"()").lower() for w in text.split()) - {""}


def jaccard(a: str, b: str) -> float:
    """Share of the two texts' distinct content words that both use (0 where neither has one).

    Content words (:func:`.negatives.content_words`), not all words: "What genre would you like?"
    and "What movie would you like?" share five words of seven and ask different things.
    """
    x, y = content_words(a), content_words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


class ParaphraseFilter:
    """Whether a negative says what the true turn says (word overlap, and cosine where embedded)."""

    def __init__(self, vectors: dict[str, np.ndarray] | None = None) -> None:
        self.vectors = vectors or {}

    def same(self, true_text: str, other: str) -> bool:
        """True where ``other`` states ``true_text``'s values and is that close by either measure."""
        if stated_values(true_text) != stated_values(other):
            return False
        if jaccard(true_text, other) >= MAX_JACCARD:
            return True
        a, b = self.vectors.get(true_text), self.vectors.get(other)
        return a is not None and b is not None and float(a @ b) >= MAX_COSINE


@dataclass
class Corpus:
    """Every dialogue's responder turns: the pools other dialogues' negatives are drawn from."""

    dialogues: list[Dialogue]

    def __post_init__(self) -> None:
        self.slots = [(d, r) for d in self.dialogues for r in d.replies]
        self.texts = [d.turns[r.index][1] for d, r in self.slots]
        self.slot_group = np.array([i for i, d in enumerate(self.dialogues) for _ in d.replies])
        self.by_service: dict[str, list[int]] = defaultdict(list)
        for n, (d, _) in enumerate(self.slots):
            self.by_service[d.service].append(n)

    def position(self, n: int) -> float:
        """Where slot ``n``'s turn falls in its dialogue, 0 (first) to 1 (last)."""
        d, r = self.slots[n]
        return r.index / max(1, len(d.turns) - 1)


def context_turns(dialogue: Dialogue, reply: Reply) -> tuple[Turn, ...]:
    """The reply's context, the responder as ``bot``, the partner as ``user``."""
    responder = dialogue.turns[reply.index][0]
    return tuple(
        Turn("bot" if speaker == responder else "user", text)
        for speaker, text in dialogue.turns[max(0, reply.index - MAX_CONTEXT_TURNS) : reply.index]
    )


def retrieved_pools(corpus: Corpus, retriever: Path) -> tuple[list[list[int]], dict[str, np.ndarray]]:
    """Per slot, the other dialogues' slots nearest its context in ``retriever``; and each text's vector.

    Contexts are queried as a bank request is (:meth:`TextEncoder.embed_queries`); each distinct
    responder text is embedded once (task dialogues repeat many).
    """
    encoder = TextEncoder(load_retriever(retriever), bulk_threads=available_cpus())
    encoder.start()
    unique = list(dict.fromkeys(corpus.texts))
    unique_vectors = encoder.embed_all(unique)
    queries = encoder.embed_queries([context_turns(d, r) for d, r in corpus.slots], bulk=True)
    encoder.close()
    row = {text: i for i, text in enumerate(unique)}
    doc_vectors = unique_vectors[[row[t] for t in corpus.texts]]
    hits = nearest_of_other_groups(
        lambda rows: queries[rows] @ doc_vectors.T,
        len(corpus.slots),
        corpus.slot_group,
        corpus.slot_group,
        min(RETRIEVED_POOL, len(corpus.texts)),
        SEARCH_BLOCK,
    )
    return hits, {text: unique_vectors[i] for text, i in row.items()}


class DialogueMiner:
    """Draws a reply's negatives kind by kind, in a fixed order, from one seeded generator."""

    def __init__(
        self,
        corpus: Corpus,
        mix: dict[str, int],
        rng: random.Random,
        *,
        retriever: Path | None = None,
        contradict: Contradict | None = None,
        paraphrases: str = "drop",
    ) -> None:
        if paraphrases not in PARAPHRASE_USES:
            raise ValueError(f"paraphrases is one of {', '.join(PARAPHRASE_USES)}, not {paraphrases!r}")
        if mix.get("retrieved") and retriever is None:
            raise ValueError("retrieved negatives need a retrieval encoder (--retriever DIR)")
        self.corpus, self.mix, self.rng, self.contradict = corpus, mix, rng, contradict
        self.pools: list[list[int]] = []
        vectors: dict[str, np.ndarray] = {}
        if retriever is not None:
            self.pools, vectors = retrieved_pools(corpus, retriever)
        self.paraphrase = ParaphraseFilter(vectors)
        self.keep_paraphrases = paraphrases == "right"
        #: Paraphrases the filter found, per kind (for the conversion's report): dropped, or with
        #: ``paraphrases="right"`` taken as right replies up to :data:`MAX_PARAPHRASE_RIGHTS` a list.
        self.dropped: dict[str, int] = defaultdict(int)
        #: Lists by how many paraphrases they took as right replies (``paraphrases="right"``).
        self.rights_per_list: dict[int, int] = defaultdict(int)

    def _take(self, pool: Sequence[str], n: int, kind: str, true_text: str, out: list[Candidate]) -> None:
        seen = {true_text.lower(), *(c.text.lower() for c in out)}
        options = [t for t in dict.fromkeys(p.strip() for p in pool) if t and t.lower() not in seen]
        self.rng.shuffle(options)
        # A retrieved pool is small and the likeliest place for paraphrases: taking them as right
        # replies, it is read to its end.
        read_all = self.keep_paraphrases and kind == "retrieved"
        taken = 0
        for text in options:
            if taken == n and not read_all:
                break
            if kind != "contradicted" and self.paraphrase.same(true_text, text):
                self.dropped[kind] += 1
                kept = (
                    self.keep_paraphrases
                    and sum(c.generator == "paraphrase" for c in out) < MAX_PARAPHRASE_RIGHTS
                )
                if kept:
                    out.append(Candidate(text, 1, "paraphrase"))
                continue
            if taken < n:
                out.append(Candidate(text, 0, kind))
                taken += 1

    def negatives(self, n: int, dialogue: Dialogue, reply: Reply) -> list[Candidate]:
        """The negatives of the ``n``-th slot's list (slot order is :class:`Corpus`'s)."""
        mix, rng, corpus = self.mix, self.rng, self.corpus
        true_text = dialogue.turns[reply.index][1]
        own = dialogue.responder_turns()
        out: list[Candidate] = []
        if mix.get("retrieved"):
            near = [corpus.texts[j] for j in self.pools[n]]
            self._take(near, mix["retrieved"], "retrieved", true_text, out)
        if mix.get("earlier"):
            earlier = [dialogue.turns[i][1] for i in own if i < reply.index]
            self._take(earlier, mix["earlier"], "earlier", true_text, out)
        if mix.get("later"):
            later = [dialogue.turns[i][1] for i in own if i > reply.index]
            self._take(later, mix["later"], "later", true_text, out)
        if mix.get("same-service") and dialogue.service:
            here = corpus.position(n)
            same = corpus.by_service[dialogue.service]
            drawn = (same[rng.randrange(len(same))] for _ in range(8 * mix["same-service"]))
            other = [
                corpus.texts[j]
                for j in drawn
                if corpus.slots[j][0] is not dialogue and abs(corpus.position(j) - here) >= OTHER_STAGE
            ]
            self._take(other, mix["same-service"], "same-service", true_text, out)
        if mix.get("contradicted") and self.contradict is not None:
            known = [text for _, text in dialogue.turns[: reply.index]] + list(reply.situations)
            made = self.contradict(rng, dialogue, reply, known)
            if made is not None and made.strip() != true_text:
                self._take([made], mix["contradicted"], "contradicted", true_text, out)
        wanted = sum(mix.values())
        for _ in range(8 * wanted):  # top up (and the random ones) from other dialogues
            if sum(c.label == 0 for c in out) >= wanted:
                break
            j = rng.randrange(len(corpus.texts))
            if corpus.slots[j][0] is not dialogue:
                self._take([corpus.texts[j]], 1, "random", true_text, out)
        if self.keep_paraphrases:
            self.rights_per_list[sum(c.generator == "paraphrase" for c in out)] += 1
        return out


def dialogue_lists(
    dialogues: list[Dialogue],
    mix: dict[str, int],
    *,
    seed: int = 0,
    retriever: Path | None = None,
    contradict: Contradict | None = None,
    paraphrases: str = "drop",
) -> Iterator[RankingList]:
    """One list per reply of each dialogue: the true turn (label 1) and its negatives, shuffled.

    ``paraphrases="right"``: the paraphrases the filter finds join as right replies (module doc).
    """
    rng = random.Random(seed)
    corpus = Corpus(dialogues)
    miner = DialogueMiner(
        corpus, mix, rng, retriever=retriever, contradict=contradict, paraphrases=paraphrases
    )
    for n, (dialogue, reply) in enumerate(corpus.slots):
        true_text = dialogue.turns[reply.index][1]
        candidates = [Candidate(true_text, 1, "human"), *miner.negatives(n, dialogue, reply)]
        rng.shuffle(candidates)
        yield RankingList(
            context=context_turns(dialogue, reply),
            situations=reply.situations,
            candidates=tuple(candidates),
            group=dialogue.group,
        )
    dropped = ", ".join(f"{kind} {n}" for kind, n in sorted(miner.dropped.items())) or "none"
    if miner.keep_paraphrases:
        shares = ", ".join(f"{n} {lists}" for n, lists in sorted(miner.rights_per_list.items()))
        print(f"paraphrase filter: paraphrases found (right replies): {dropped}", file=sys.stderr)
        print(f"paraphrase filter: lists by paraphrases taken as right: {shares}", file=sys.stderr)
    else:
        print(f"paraphrase filter: negatives dropped: {dropped}", file=sys.stderr)
