"""Topical-Chat as ranking lists: one list per turn (from the second on) of each conversation.

The true next turn (label 1) against negatives mined to look right on the surface, each named in
its ``generator`` (the kinds are listed in :mod:`dialogue_ranker.training.convert`). Half the lists
(seeded) carry as situations the lead sentences of the wiki sections the responder read about its
entities. The responder is ``bot``, its partner ``user``. Community Data License Agreement -
Sharing 1.0: a model trained on it may ship.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.serving.banks.encoder import TextEncoder
from dialogue_ranker.serving.cpu import available_cpus
from dialogue_ranker.serving.model_bundle import load_retriever
from dialogue_ranker.serving.tokenization import Turn
from dialogue_ranker.training.converters.negatives import (
    SharedWordIndex,
    nearest_of_other_groups,
    overlap_neighbours,
    sentences_of,
    take_negatives,
)

TOPICAL_CHAT_SPLITS = ("valid_freq", "valid_rare", "test_freq", "test_rare")
#: Topical-Chat negatives per list, by kind: 9 in all, so a list is "1 of 10". The evaluation
#: lists use this mix; ``--negatives`` writes other mixes (e.g. for training) from the same turns.
NEGATIVES = {"context": 2, "nearby": 3, "same-entity": 2, "random": 2}
NEGATIVE_KINDS = (
    "echo",
    "context",
    "nearby",
    "same-entity",
    "overlap",
    "shared-word",
    "fact",
    "short",
    "retrieved",
    "random",
)
#: ``overlap`` negatives are drawn from this many nearest turns of other conversations.
OVERLAP_POOL = 10
#: ``retrieved`` negatives are drawn from this many turns of other conversations nearest in the
#: retrieval encoder: the replies a response bank would put before the ranker for this context.
RETRIEVED_POOL = 10
#: Contexts scored against every turn at once in the dense search (a block is this many rows of
#: float32 scores against each of about 190,000 turns: about 190 MB).
SEARCH_BLOCK = 256
#: A ``short`` negative has at most this many words.
SHORT_WORDS = 10
#: Context turns kept before the next turn (older ones add length, not signal).
MAX_CONTEXT_TURNS = 6
#: Wiki lead sentences given as situations, when a list gets them.
MAX_SITUATIONS = 4


@dataclass(frozen=True)
class TopicalChat:
    """Every split's conversations (turns with a message, two or more) and what each agent read."""

    conversations: dict[str, list[dict]]
    #: Per conversation and agent: the entities of the wiki sections the agent read (lower case).
    entities: dict[str, dict[str, set[str]]]
    #: Per conversation and agent: the first two lead sentences of each of those sections.
    leads: dict[str, dict[str, list[str]]]


def read_topical_chat(directory: Path) -> TopicalChat:
    """The conversations and reading sets of :data:`TOPICAL_CHAT_SPLITS` under ``directory``."""
    wiki = json.loads((directory / "wiki.json").read_text(encoding="utf-8"))
    wiki_text = {kind: {int(i): text for text, i in table.items()} for kind, table in wiki.items()}
    chat = TopicalChat({}, {}, {})
    for split in TOPICAL_CHAT_SPLITS:
        convs = json.loads((directory / "conversations" / f"{split}.json").read_text(encoding="utf-8"))
        reading = json.loads((directory / "reading_sets" / f"{split}.json").read_text(encoding="utf-8"))
        for conv_id, conv in convs.items():
            turns = [t for t in conv["content"] if str(t.get("message", "")).strip()]
            if len(turns) < 2:
                continue
            chat.conversations[conv_id] = turns
            chat.entities[conv_id], chat.leads[conv_id] = {}, {}
            for agent in ("agent_1", "agent_2"):
                sections = reading.get(conv_id, {}).get(agent, {}).values()
                chat.entities[conv_id][agent], chat.leads[conv_id][agent] = agent_reading(sections, wiki_text)
    return chat


def agent_reading(sections, wiki_text: dict[str, dict[int, str]]) -> tuple[set[str], list[str]]:
    """An agent's reading set: the entities it read about, and their sections' first lead sentences."""
    known, sentences = set(), []
    for section in sections:
        if not isinstance(section, dict) or "entity" not in section:
            continue
        known.add(str(section["entity"]).lower())
        for kind in ("shortened_wiki_lead_section", "summarized_wiki_lead_section"):
            if kind in section and int(section[kind]) in wiki_text.get(kind, {}):
                sentences.extend(sentences_of(wiki_text[kind][int(section[kind])])[:2])
    return known, sentences


@dataclass(frozen=True)
class TurnIndex:
    """Every (conversation, turn) a list is built from, and every turn's text: the pools' search space."""

    slots: list[tuple[str, int]]
    texts: list[str]
    #: Each text's and each slot's conversation (an index), so a slot's own turns can be left out.
    text_group: np.ndarray
    slot_group: np.ndarray

    @classmethod
    def of(cls, conversations: dict[str, list[dict]]) -> TurnIndex:
        """The index of ``conversations``' turns."""
        conv_index = {c: i for i, c in enumerate(conversations)}
        slots = [(c, t) for c in conversations for t in range(1, len(conversations[c]))]
        docs = [(c, m["message"].strip()) for c in conversations for m in conversations[c]]
        return cls(
            slots,
            [text for _, text in docs],
            np.array([conv_index[c] for c, _ in docs]),
            np.array([conv_index[c] for c, _ in slots]),
        )

    def pools(self, hits: list[list[int]]) -> dict[tuple[str, int], list[str]]:
        """Each slot's pool: the texts of its row of ``hits`` (indices into ``texts``)."""
        return {slot: [self.texts[j] for j in row] for slot, row in zip(self.slots, hits, strict=True)}


def nearest_turns(conversations: dict[str, list[dict]]) -> dict[tuple[str, int], list[str]]:
    """``overlap``'s pools: per (conversation, turn), the turns of others nearest its last two turns."""
    turns = TurnIndex.of(conversations)
    hits = overlap_neighbours(
        [" ".join(m["message"] for m in conversations[c][max(0, t - 2) : t]) for c, t in turns.slots],
        turns.texts,
        turns.text_group,
        turns.slot_group,
        OVERLAP_POOL,
    )
    return turns.pools(hits)


def retrieved_turns(
    conversations: dict[str, list[dict]], retriever: Path
) -> dict[tuple[str, int], list[str]]:
    """``retrieved``'s pools: per (conversation, turn), the turns of others nearest in ``retriever``.

    Each context is queried as a bank request is (:meth:`TextEncoder.embed_queries`) against every
    turn of every conversation, by the retriever's cosine, its own conversation left out: the other
    conversations' true replies a bank would offer for it.
    """
    spec = load_retriever(retriever)
    encoder = TextEncoder(spec, bulk_threads=available_cpus())
    encoder.start()
    turns = TurnIndex.of(conversations)
    contexts = [[Turn("user", m["message"].strip()) for m in conversations[c][:t]] for c, t in turns.slots]
    doc_vectors = encoder.embed_all(turns.texts)
    query_vectors = encoder.embed_queries(contexts, bulk=True)
    encoder.close()
    hits = nearest_of_other_groups(
        lambda rows: query_vectors[rows] @ doc_vectors.T,
        len(turns.slots),
        turns.text_group,
        turns.slot_group,
        min(RETRIEVED_POOL, len(turns.texts)),
        SEARCH_BLOCK,
    )
    return turns.pools(hits)


class NegativeMiner:
    """Draws a turn's negatives, kind by kind in a fixed order, from one seeded generator.

    Kinds the mix leaves out draw nothing from the generator, so the default lists stay the same
    whichever kinds exist; the pools a kind needs are built only when the mix asks for it.
    """

    def __init__(
        self, chat: TopicalChat, mix: dict[str, int], rng: random.Random, retriever: Path | None = None
    ) -> None:
        self.chat, self.mix, self.rng = chat, mix, rng
        if mix.get("retrieved") and retriever is None:
            raise ValueError("retrieved negatives need a retrieval encoder (--retriever DIR)")
        self.conv_ids = list(chat.conversations)
        self.by_entity: dict[str, list[str]] = defaultdict(list)
        for conv_id, per_agent in chat.entities.items():
            for entity in sorted(set().union(*per_agent.values())):
                self.by_entity[entity].append(conv_id)
        self.nearest = nearest_turns(chat.conversations) if mix.get("overlap") else {}
        self.retrieved = (
            retrieved_turns(chat.conversations, retriever)
            if mix.get("retrieved") and retriever is not None
            else {}
        )
        self.shared_words = (
            SharedWordIndex(
                chat.conversations, {c: set().union(*e.values()) for c, e in chat.entities.items()}
            )
            if mix.get("shared-word")
            else None
        )
        self.short_turns = (
            [
                (c, m["message"].strip())
                for c in self.conv_ids
                for m in chat.conversations[c]
                if len(m["message"].split()) <= SHORT_WORDS
            ]
            if mix.get("short")
            else []
        )

    def negatives(self, conv_id: str, t: int, context: list[dict], seen: set[str]) -> list[Candidate]:
        """The negatives of turn ``t``'s list (``seen``: the texts already in it, lower case)."""
        negatives: list[Candidate] = []
        self.from_this_conversation(conv_id, t, context, seen, negatives)
        self.from_elsewhere(conv_id, t, context, seen, negatives)
        mix, rng, conversations = self.mix, self.rng, self.chat.conversations
        while len(negatives) < sum(mix.values()):  # top up (and the random ones) from anywhere
            other = conversations[rng.choice(self.conv_ids)]
            before = len(negatives)
            take_negatives(rng, [rng.choice(other)["message"]], 1, "random", seen, negatives)
            if len(negatives) == before and len(self.conv_ids) < 2:
                break
        return negatives

    def from_this_conversation(
        self, conv_id: str, t: int, context: list[dict], seen: set[str], out: list[Candidate]
    ) -> None:
        """``echo``, ``context`` and ``nearby``: turns of the list's own conversation."""
        mix, rng, turns = self.mix, self.rng, self.chat.conversations[conv_id]
        responder = turns[t]["agent"]
        if mix.get("echo"):
            partner = [x["message"] for x in context if x["agent"] != responder][-1:]
            take_negatives(rng, partner, mix["echo"], "echo", seen, out)
        if mix.get("context"):
            take_negatives(rng, [x["message"] for x in context], mix["context"], "context", seen, out)
        if mix.get("nearby"):
            near = [
                turns[i]["message"] for i in range(max(0, t - 6), min(len(turns), t + 6)) if abs(i - t) >= 2
            ]
            take_negatives(rng, near, mix["nearby"], "nearby", seen, out)

    def from_elsewhere(
        self, conv_id: str, t: int, context: list[dict], seen: set[str], out: list[Candidate]
    ) -> None:
        """The kinds drawn from other conversations or the wiki: ``same-entity`` to ``short``."""
        mix, rng, chat = self.mix, self.rng, self.chat
        if mix.get("same-entity"):
            # Sorted: set order changes with the hash seed, and the lists must not.
            mine = sorted(chat.entities[conv_id].get(chat.conversations[conv_id][t]["agent"], set()))
            others = sorted({c for e in mine for c in self.by_entity.get(e, ()) if c != conv_id})
            same = [
                m["message"] for c in rng.sample(others, min(4, len(others))) for m in chat.conversations[c]
            ]
            take_negatives(rng, same, mix["same-entity"], "same-entity", seen, out)
        if mix.get("overlap"):
            take_negatives(rng, self.nearest[(conv_id, t)], mix["overlap"], "overlap", seen, out)
        if mix.get("retrieved"):
            take_negatives(rng, self.retrieved[(conv_id, t)], mix["retrieved"], "retrieved", seen, out)
        if self.shared_words is not None:
            recent = " ".join(x["message"] for x in context[-2:])
            drawn_sentences = self.shared_words.draw(rng, conv_id, recent, 2 * mix["shared-word"])
            take_negatives(rng, drawn_sentences, mix["shared-word"], "shared-word", seen, out)
        if mix.get("fact"):
            facts = [s for agent in sorted(chat.leads[conv_id]) for s in chat.leads[conv_id][agent]]
            take_negatives(rng, facts, mix["fact"], "fact", seen, out)
        if mix.get("short") and self.short_turns:
            # A few more than asked for: a drawn turn may be this conversation's or already in
            # the list (the top-up fills any shortfall with random turns).
            drawn = (rng.choice(self.short_turns) for _ in range(4 * mix["short"]))
            take_negatives(rng, [text for c, text in drawn if c != conv_id], mix["short"], "short", seen, out)


def convert_topical_chat(
    directory: Path,
    *,
    seed: int = 0,
    negatives: dict[str, int] | None = None,
    reply_max_words: int | None = None,
    drop_negatives: frozenset[str] = frozenset(),
    retriever: Path | None = None,
) -> Iterator[RankingList]:
    """Topical-Chat turns as ranking lists with mined negatives (see the module doc).

    ``reply_max_words``: only the lists whose true reply has at most that many words;
    ``drop_negatives``: the mined negatives of those kinds left out. Both filter the lists once
    they are drawn, so the rest are the very lists (same candidates, same order) the mix gives
    without them. ``retriever``: a retrieval encoder's directory (``retriever.json``), which the
    ``retrieved`` kind needs.
    """
    mix = dict(NEGATIVES if negatives is None else negatives)
    rng = random.Random(seed)
    chat = read_topical_chat(directory)
    miner = NegativeMiner(chat, mix, rng, retriever)
    for conv_id, turns in chat.conversations.items():
        for t in range(1, len(turns)):
            responder = turns[t]["agent"]
            true_text = turns[t]["message"].strip()
            context = turns[max(0, t - MAX_CONTEXT_TURNS) : t]
            found = miner.negatives(conv_id, t, context, {true_text.lower()})
            situations: tuple[str, ...] = ()
            if rng.random() < 0.5:
                situations = tuple(chat.leads[conv_id].get(responder, [])[:MAX_SITUATIONS])
            candidates = [Candidate(true_text, 1, "human"), *found]
            rng.shuffle(candidates)
            if reply_max_words is not None and len(true_text.split()) > reply_max_words:
                continue
            candidates = [c for c in candidates if c.generator not in drop_negatives]
            yield RankingList(
                context=tuple(
                    Turn("bot" if x["agent"] == responder else "user", x["message"].strip()) for x in context
                ),
                situations=situations,
                candidates=tuple(candidates),
                group=f"topical-chat-{conv_id}",
            )
