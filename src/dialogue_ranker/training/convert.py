"""Convert the data in ``../shared/data`` to the ranking-data format (:mod:`data.ranking_data`).

    ranker convert sugar ../shared/data/sugar/sugar.jsonl runs/data/sugar.jsonl
    ranker convert topical-chat ../shared/data/topical_chat runs/data/topical_chat.jsonl
    ranker convert dailydialog-pp ../shared/data/dailydialog_pp/dev.jsonl runs/data/ddpp.jsonl

- **sugar**: one list per example: the request, its 12 statements (the gold ones marked
  relevant), its three rated responses. With ``--negatives``, wrong replies (label 0) are added,
  named in their ``generator``: ``statement`` (one of the example's distractor statements, said as
  the reply: about the situation, but not about the request) and ``other-reply`` (the best reply
  to another request: a fitting assistant reply, to something else). CC BY-SA 4.0.
- **topical-chat**: one list per turn (from the second on) of each conversation: the true next
  turn (label 1) against negatives mined to look right on the surface, each named in its
  ``generator``: ``context`` (one of the context's own earlier turns, repeated), ``nearby`` (a
  turn of the same conversation a few turns away), ``same-entity`` (a turn of another
  conversation about one of the same entities), ``random``; and, when ``--negatives`` asks for
  them, ``echo`` (the partner's last turn, repeated) and ``overlap`` (a turn of another
  conversation among the 10 whose words, TF-IDF weighted, are nearest the last two turns: it
  reuses the context's words without answering it) and ``fact`` (a wiki lead sentence about one
  of the conversation's entities, said as the reply: on topic, but a statement, not an answer)
  and ``shared-word`` (one sentence of a turn of a conversation about none of this one's
  entities that uses one of the last two turns' content words: it reuses a word of the context
  and is about something else, as DailyDialog++'s adversarial replies are; unlike ``overlap`` it is
  drawn at random among such sentences, not the nearest, so it is seldom a fitting reply)
  and ``short`` (a turn of another conversation of at most 10 words: "Haha, I know it's
  crazy.", "Sounds good. Nice chatting with you." Topical-Chat's turns average 20 words, so its
  ``random`` negatives are long and specific, where off-context replies in open chat are often
  short and generic).
  Half the lists (seeded) carry as situations the lead sentences of the wiki sections the
  responder read about its entities.
  The responder is ``bot``, its partner ``user``. Community Data License Agreement - Sharing 1.0:
  a model trained on it may ship.
- **dailydialog-pp**: one list per context: 5 positives (label 1, ``human``), 5 adversarial
  (label 0, ``adversarial``: they reuse the context's words) and 5 random negatives (label 0,
  ``random``). CC BY-NC-SA 4.0: for evaluation and model selection only, never for a model
  that ships.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

from dialogue_ranker.data.ranking_data import Candidate, RankingList, write_lists
from dialogue_ranker.serving.tokenization import Turn

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
    "random",
)
#: Wrong replies ``--negatives`` can add to SUGAR lists (none by default).
SUGAR_NEGATIVE_KINDS = ("statement", "other-reply")
#: ``overlap`` negatives are drawn from this many nearest turns of other conversations.
OVERLAP_POOL = 10
#: A ``short`` negative has at most this many words.
SHORT_WORDS = 10
#: A ``shared-word`` negative is a sentence of this many words (fewer is often a generic reply that
#: fits anything; more is a second topic).
SHARED_WORD_SENTENCE = (5, 30)
#: Content words (``shared-word``): at least this many letters, not a stop word, and in at most
#: this share of the sentences (common words such as "really" say nothing about a topic).
CONTENT_WORD_LETTERS = 4
CONTENT_WORD_MAX_SHARE = 0.002
#: Sentences drawn a word before those of conversations about the same entities are dropped.
SHARED_WORD_DRAWS = 32
_WORD = re.compile(r"[a-z]+")
#: Context turns kept before the next turn (older ones add length, not signal).
MAX_CONTEXT_TURNS = 6
#: Wiki lead sentences given as situations, when a list gets them.
MAX_SITUATIONS = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


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
        _take(rng, distractors, mix.get("statement", 0), "statement", seen, added)
        others = [text for index, text in best_replies if index != example.index]
        # A few more than asked for: another request's best reply can repeat one of this list's.
        _take(
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


def convert_dailydialog_pp(path: Path) -> Iterator[RankingList]:
    """DailyDialog++ contexts as ranking lists (evaluation only: non-commercial licence)."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        turns = [str(t) for t in row["context"]]
        # The responder speaks next: the last context turn is its partner's.
        speakers = ["user" if (len(turns) - i) % 2 == 1 else "bot" for i in range(len(turns))]
        candidates = [
            *(Candidate(t, 1, "human") for t in row["positive_responses"]),
            *(Candidate(t, 0, "adversarial") for t in row["adversarial_negative_responses"]),
            *(Candidate(t, 0, "random") for t in row["random_negative_responses"]),
        ]
        yield RankingList(
            context=tuple(Turn(s, t) for s, t in zip(speakers, turns, strict=True)),
            candidates=tuple(c for c in candidates if c.text.strip()),
            group=f"ddpp-{row.get('id', number)}",
        )


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _take(
    rng: random.Random, pool: list[str], n: int, kind: str, seen: set[str], out: list[Candidate]
) -> None:
    """Add up to ``n`` negatives of ``kind`` drawn from ``pool``, none seen before in the list."""
    options = [p for p in dict.fromkeys(s.strip() for s in pool) if p and p.lower() not in seen]
    for text in rng.sample(options, min(n, len(options))):
        seen.add(text.lower())
        out.append(Candidate(text, 0, kind))


def parse_negatives(text: str, kinds: tuple[str, ...] = NEGATIVE_KINDS) -> dict[str, int]:
    """``KIND:N,KIND:N,...`` (kinds from ``kinds``) as a negative mix."""
    mix: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, count = part.partition(":")
        if kind not in kinds or not count.isdigit():
            raise argparse.ArgumentTypeError(
                f"--negatives takes KIND:N,... with KIND in {', '.join(kinds)}; got {part!r}"
            )
        mix[kind] = int(count)
    if sum(mix.values()) < 1:
        raise argparse.ArgumentTypeError("--negatives needs at least one negative")
    return mix


def overlap_neighbours(
    queries: list[str], docs: list[str], doc_group: np.ndarray, query_group: np.ndarray, k: int
) -> np.ndarray:
    """For each query, the ``k`` docs of other groups nearest in TF-IDF cosine (row-wise indices).

    scikit-learn's vectorizer does the weighting; the search is a chunked sparse product, since
    its nearest-neighbour classes cannot exclude a query's own conversation.
    """
    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True, dtype=np.float32)
    doc_matrix = vectorizer.fit_transform(docs)
    query_matrix = vectorizer.transform(queries)
    k = min(k, len(docs))
    out = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 512):
        rows = slice(start, start + 512)
        scores = (query_matrix[rows] @ doc_matrix.T).toarray()
        scores[query_group[rows, None] == doc_group[None, :]] = -1.0
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        out[rows] = np.take_along_axis(top, order, axis=1)
    return out


def content_words(text: str) -> set[str]:
    """The words of ``text`` that can name a topic (lower case, long enough, not stop words)."""
    return {
        w
        for w in _WORD.findall(text.lower())
        if len(w) >= CONTENT_WORD_LETTERS and w not in ENGLISH_STOP_WORDS
    }


class SharedWordIndex:
    """Sentences of every conversation's turns by the content words they use (``shared-word``)."""

    def __init__(self, conversations: dict[str, list[dict]], entities: dict[str, set[str]]) -> None:
        self.entities = entities
        self.sentences: list[tuple[str, str]] = []
        by_word: dict[str, list[int]] = defaultdict(list)
        low, high = SHARED_WORD_SENTENCE
        for conv_id, turns in conversations.items():
            for turn in turns:
                for sentence in _sentences(turn["message"]):
                    if low <= len(sentence.split()) <= high:
                        for word in sorted(content_words(sentence)):
                            by_word[word].append(len(self.sentences))
                        self.sentences.append((conv_id, sentence))
        cap = max(2, int(CONTENT_WORD_MAX_SHARE * len(self.sentences)))
        self.by_word = {w: ids for w, ids in by_word.items() if 2 <= len(ids) <= cap}

    def draw(self, rng: random.Random, conv_id: str, text: str, n: int) -> list[str]:
        """Up to ``n`` sentences that use a content word of ``text``.

        Each from a conversation sharing no entity with ``conv_id``'s: one a word first (words in a
        seeded order), then more.
        """
        mine = self.entities.get(conv_id, set())
        words = sorted(w for w in content_words(text) if w in self.by_word)
        rng.shuffle(words)
        per_word: list[list[str]] = []
        for word in words[: 2 * n]:
            ids = self.by_word[word]
            per_word.append(
                [
                    self.sentences[i][1]
                    for i in rng.sample(ids, min(SHARED_WORD_DRAWS, len(ids)))
                    if self.sentences[i][0] != conv_id
                    and not (self.entities.get(self.sentences[i][0], set()) & mine)
                ]
            )
        found = [s for rank in zip_longest(*per_word) for s in rank if s is not None]
        return found[:n]


def convert_topical_chat(
    directory: Path, *, seed: int = 0, negatives: dict[str, int] | None = None
) -> Iterator[RankingList]:
    """Topical-Chat turns as ranking lists with mined negatives (see the module doc)."""
    mix = dict(NEGATIVES if negatives is None else negatives)
    rng = random.Random(seed)
    wiki = json.loads((directory / "wiki.json").read_text(encoding="utf-8"))
    wiki_text = {kind: {int(i): text for text, i in table.items()} for kind, table in wiki.items()}
    conversations: dict[str, list[dict]] = {}
    entities: dict[str, dict[str, set[str]]] = {}
    leads: dict[str, dict[str, list[str]]] = {}
    for split in TOPICAL_CHAT_SPLITS:
        convs = json.loads((directory / "conversations" / f"{split}.json").read_text(encoding="utf-8"))
        reading = json.loads((directory / "reading_sets" / f"{split}.json").read_text(encoding="utf-8"))
        for conv_id, conv in convs.items():
            turns = [t for t in conv["content"] if str(t.get("message", "")).strip()]
            if len(turns) < 2:
                continue
            conversations[conv_id] = turns
            entities[conv_id], leads[conv_id] = {}, {}
            for agent in ("agent_1", "agent_2"):
                known, sentences = set(), []
                for section in reading.get(conv_id, {}).get(agent, {}).values():
                    if not isinstance(section, dict) or "entity" not in section:
                        continue
                    known.add(str(section["entity"]).lower())
                    for kind in ("shortened_wiki_lead_section", "summarized_wiki_lead_section"):
                        if kind in section and int(section[kind]) in wiki_text.get(kind, {}):
                            sentences.extend(_sentences(wiki_text[kind][int(section[kind])])[:2])
                entities[conv_id][agent], leads[conv_id][agent] = known, sentences
    by_entity: dict[str, list[str]] = defaultdict(list)
    for conv_id, per_agent in entities.items():
        for entity in sorted(set().union(*per_agent.values())):
            by_entity[entity].append(conv_id)
    conv_ids = list(conversations)
    nearest: dict[tuple[str, int], list[str]] = {}
    if mix.get("overlap"):
        # Every (conversation, turn) a list is built from.
        slots = [(c, t) for c in conv_ids for t in range(1, len(conversations[c]))]
        docs = [(c, m["message"].strip()) for c in conv_ids for m in conversations[c]]
        conv_index = {c: i for i, c in enumerate(conv_ids)}
        hits = overlap_neighbours(
            [" ".join(m["message"] for m in conversations[c][max(0, t - 2) : t]) for c, t in slots],
            [text for _, text in docs],
            np.array([conv_index[c] for c, _ in docs]),
            np.array([conv_index[c] for c, _ in slots]),
            OVERLAP_POOL,
        )
        nearest = {slot: [docs[j][1] for j in row] for slot, row in zip(slots, hits, strict=True)}

    shared_words = (
        SharedWordIndex(conversations, {c: set().union(*e.values()) for c, e in entities.items()})
        if mix.get("shared-word")
        else None
    )
    short_turns = (
        [
            (c, m["message"].strip())
            for c in conv_ids
            for m in conversations[c]
            if len(m["message"].split()) <= SHORT_WORDS
        ]
        if mix.get("short")
        else []
    )

    for conv_id in conv_ids:
        turns = conversations[conv_id]
        for t in range(1, len(turns)):
            responder = turns[t]["agent"]
            true_text = turns[t]["message"].strip()
            context = turns[max(0, t - MAX_CONTEXT_TURNS) : t]
            seen = {true_text.lower()}

            negatives: list[Candidate] = []
            # Kinds the mix leaves out draw nothing from the seeded generator, so the default
            # lists stay the same whichever kinds exist.
            if mix.get("echo"):
                partner = [x["message"] for x in context if x["agent"] != responder][-1:]
                _take(rng, partner, mix["echo"], "echo", seen, negatives)
            if mix.get("context"):
                _take(rng, [x["message"] for x in context], mix["context"], "context", seen, negatives)
            if mix.get("nearby"):
                near = [
                    turns[i]["message"]
                    for i in range(max(0, t - 6), min(len(turns), t + 6))
                    if abs(i - t) >= 2
                ]
                _take(rng, near, mix["nearby"], "nearby", seen, negatives)
            if mix.get("same-entity"):
                # Sorted: set order changes with the hash seed, and the lists must not.
                mine = sorted(entities[conv_id].get(responder, set()))
                others = sorted({c for e in mine for c in by_entity.get(e, ()) if c != conv_id})
                same = [
                    m["message"] for c in rng.sample(others, min(4, len(others))) for m in conversations[c]
                ]
                _take(rng, same, mix["same-entity"], "same-entity", seen, negatives)
            if mix.get("overlap"):
                _take(rng, nearest[(conv_id, t)], mix["overlap"], "overlap", seen, negatives)
            if shared_words is not None:
                recent = " ".join(x["message"] for x in context[-2:])
                drawn_sentences = shared_words.draw(rng, conv_id, recent, 2 * mix["shared-word"])
                _take(rng, drawn_sentences, mix["shared-word"], "shared-word", seen, negatives)
            if mix.get("fact"):
                facts = [s for agent in sorted(leads[conv_id]) for s in leads[conv_id][agent]]
                _take(rng, facts, mix["fact"], "fact", seen, negatives)
            if mix.get("short") and short_turns:
                # A few more than asked for: a drawn turn may be this conversation's or already in
                # the list (the top-up below fills any shortfall with random turns).
                drawn = (rng.choice(short_turns) for _ in range(4 * mix["short"]))
                _take(
                    rng, [text for c, text in drawn if c != conv_id], mix["short"], "short", seen, negatives
                )
            while len(negatives) < sum(mix.values()):  # top up (and the random ones) from anywhere
                other = conversations[rng.choice(conv_ids)]
                before = len(negatives)
                _take(rng, [rng.choice(other)["message"]], 1, "random", seen, negatives)
                if len(negatives) == before and len(conv_ids) < 2:
                    break
            situations: tuple[str, ...] = ()
            if rng.random() < 0.5:
                situations = tuple(leads[conv_id].get(responder, [])[:MAX_SITUATIONS])
            candidates = [Candidate(true_text, 1, "human"), *negatives]
            rng.shuffle(candidates)
            yield RankingList(
                context=tuple(
                    Turn("bot" if x["agent"] == responder else "user", x["message"].strip()) for x in context
                ),
                situations=situations,
                candidates=tuple(candidates),
                group=f"topical-chat-{conv_id}",
            )


CONVERTERS = {
    "sugar": convert_sugar,
    "topical-chat": convert_topical_chat,
    "dailydialog-pp": convert_dailydialog_pp,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", choices=sorted(CONVERTERS))
    parser.add_argument(
        "source", type=Path, help="the dataset's file (sugar, dailydialog-pp) or folder (topical-chat)"
    )
    parser.add_argument("out", type=Path, help="the JSONL file to write")
    parser.add_argument(
        "--negatives",
        default=None,
        metavar="KIND:N,...",
        help="topical-chat: the negative mix, with KIND in "
        + ", ".join(NEGATIVE_KINDS)
        + " (default: "
        + ",".join(f"{k}:{n}" for k, n in NEGATIVES.items())
        + "); sugar: wrong replies to add, with KIND in "
        + ", ".join(SUGAR_NEGATIVE_KINDS)
        + " (default: none)",
    )
    args = parser.parse_args(argv)
    if args.negatives is not None:
        kinds = {"topical-chat": NEGATIVE_KINDS, "sugar": SUGAR_NEGATIVE_KINDS}.get(args.dataset)
        if kinds is None:
            parser.error(f"--negatives is for topical-chat and sugar, not {args.dataset}")
        try:
            args.negatives = parse_negatives(args.negatives, kinds)
        except argparse.ArgumentTypeError as e:
            parser.error(str(e))
    if not args.source.exists():
        parser.error(f"{args.source} does not exist")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        extra = {"negatives": args.negatives} if args.negatives is not None else {}
        count = write_lists(args.out, CONVERTERS[args.dataset](args.source, **extra))
    except (OSError, ValueError, KeyError, TypeError) as e:
        problem = f"{type(e).__name__}: {e}"
        print(
            f"ranker convert {args.dataset}: {args.source} is not in the expected layout ({problem})",
            file=sys.stderr,
        )
        return 1
    print(f"wrote {count} ranking lists to {args.out}")
    if args.dataset == "dailydialog-pp":
        print("note: DailyDialog++ is CC BY-NC-SA 4.0: evaluate and select models with it, never train on it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
