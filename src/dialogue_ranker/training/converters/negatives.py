"""Negative mining shared by the converters: drawing wrong replies, and the two pools that need an index.

``overlap`` negatives are the turns of other conversations nearest a context in TF-IDF;
``shared-word`` negatives are sentences that reuse one of its content words (:class:`SharedWordIndex`).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Callable
from itertools import zip_longest

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

from dialogue_ranker.data.ranking_data import Candidate
from dialogue_ranker.evaluation.retrieval import top_k

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
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def sentences_of(text: str) -> list[str]:
    """``text`` cut into sentences (at ., ! or ? before a capital, a digit or a quote)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def take_negatives(
    rng: random.Random, pool: list[str], n: int, kind: str, seen: set[str], out: list[Candidate]
) -> None:
    """Add up to ``n`` negatives of ``kind`` drawn from ``pool``, none seen before in the list."""
    options = [p for p in dict.fromkeys(s.strip() for s in pool) if p and p.lower() not in seen]
    for text in rng.sample(options, min(n, len(options))):
        seen.add(text.lower())
        out.append(Candidate(text, 0, kind))


def overlap_neighbours(
    queries: list[str], docs: list[str], doc_group: np.ndarray, query_group: np.ndarray, k: int
) -> list[list[int]]:
    """For each query, the ``k`` docs of other groups nearest in TF-IDF cosine (indices, best first).

    scikit-learn's vectorizer does the weighting; the search is :func:`nearest_of_other_groups`
    over sparse products, since its nearest-neighbour classes cannot exclude a query's own
    conversation.
    """
    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True, dtype=np.float32)
    doc_matrix = vectorizer.fit_transform(docs)
    query_matrix = vectorizer.transform(queries)
    return nearest_of_other_groups(
        lambda rows: (query_matrix[rows] @ doc_matrix.T).toarray(),
        len(queries),
        doc_group,
        query_group,
        min(k, len(docs)),
    )


def nearest_of_other_groups(
    score_rows: Callable[[slice], np.ndarray],
    queries: int,
    doc_group: np.ndarray,
    query_group: np.ndarray,
    k: int,
    block: int = 512,
) -> list[list[int]]:
    """For each query, the ``k`` best-scored docs of groups other than its own, best first.

    ``score_rows(rows)``: the dense scores of a block of queries against every doc; blocks keep
    the (queries x docs) matrix from being held at once. A query whose other groups hold fewer than
    ``k`` docs gets them all and no more: its own group's docs never fill the row (a small corpus).
    """
    out: list[list[int]] = []
    for start in range(0, queries, block):
        rows = slice(start, start + block)
        scores = score_rows(rows)
        scores[query_group[rows, None] == doc_group[None, :]] = -np.inf
        best = top_k(scores, k)
        usable = np.isfinite(np.take_along_axis(scores, best, axis=1))
        out.extend(
            [int(j) for j, ok in zip(row, keep, strict=True) if ok]
            for row, keep in zip(best, usable, strict=True)
        )
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
                for sentence in sentences_of(turn["message"]):
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
