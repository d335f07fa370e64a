"""A true reply made wrong by one fact: a value swapped, or a persona line said the other way.

For the ``contradicted`` negatives of the dialogue converters (SGD, Taskmaster, Synthetic-Persona-Chat).
Such a negative keeps almost every word of the true reply, so it is never dropped by the paraphrase
filter (:mod:`dialogue_ranker.training.converters.dialogue_lists`); it is wrong only because a fact
it states is not the one the conversation or a statement gives:

- :class:`ValueSwapper`: a value of the reply that the context or a statement also holds (a time,
  an amount of money, a count, a weekday, a month day, or a phrase of a named category such as a
  menu's milk options) replaced by another value of the same type. Values the conversation never
  gave are left alone: the assistant may have found them, and another one would not be wrong.
- :func:`contradict_persona`: the reply's sentence that restates one of the responder's persona lines,
  said the other way ("I have a turtle." -> "I don't have a turtle.").
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from difflib import SequenceMatcher

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from dialogue_ranker.training.converters.contradiction import negate
from dialogue_ranker.training.converters.negatives import content_words, sentences_of

_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_COUNT_WORDS = "one|two|three|four|five|six|seven|eight|nine|ten"
#: Typed values, tried in this order (a time's digits are not also a count). Each match's text is
#: swapped for another text the same pattern matched elsewhere in the corpus.
VALUE_TYPES: dict[str, re.Pattern[str]] = {
    "time": re.compile(r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b", re.IGNORECASE),
    "money": re.compile(r"\$\s?\d[\d,]*(?:\.\d{2})?"),
    "date": re.compile(rf"\b(?:{_MONTHS})\s\d{{1,2}}(?:st|nd|rd|th)?\b", re.IGNORECASE),
    "weekday": re.compile(rf"\b(?:{_WEEKDAYS})\b", re.IGNORECASE),
    # A count with the word it counts ("2 people", "three nights"): the pair must be in the
    # conversation, so a number that only happens to occur there ("1 flight" against "1 layover")
    # does not count; only the number is swapped, for another from 1 to 9 in the same form.
    "count": re.compile(rf"\b(?:[1-9]|{_COUNT_WORDS})\s+[a-z]{{3,}}\b", re.IGNORECASE),
}
_DIGITS = [str(i) for i in range(1, 10)]
_WORDS = _COUNT_WORDS.split("|")[:9]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


#: A phrase value is a name of one to four words (annotators sometimes typed a whole request there).
_PHRASE = re.compile(r"[\w%'&-]{2,}(?: [\w%'&-]+){0,3}")
#: Values spelt this alike are one value typed two ways ("Macchiato", "Machiatto"), not a swap.
SAME_SPELLING = 0.8


def _same_value(candidate: str, value: str) -> bool:
    return SequenceMatcher(None, _norm(candidate), value).ratio() >= SAME_SPELLING


class ValueSwapper:
    """Swaps a value a reply shares with its conversation for another value of the same type.

    ``corpus``: texts whose values make the pools (the dataset's turns); ``phrases``: named
    categories of phrases (e.g. ``{"Milk": ["Oat Milk", "Whole Milk"]}``), matched whole-word and
    case-insensitively, tried before the typed values (a phrase may hold a count: "2% Milk").
    """

    def __init__(self, corpus: Iterable[str], phrases: Mapping[str, Sequence[str]] | None = None) -> None:
        self.pools: dict[str, list[str]] = {}
        for text in corpus:
            for kind, pattern in VALUE_TYPES.items():
                for match in pattern.finditer(text):
                    self.pools.setdefault(kind, []).append(match.group(0))
        # Sorted and deduplicated by their normal form, so the pools do not depend on corpus order.
        self.pools = {k: sorted({_norm(v): v for v in vs}.values()) for k, vs in self.pools.items()}
        # Category names as the annotators typed them ("Milk", "milk-options") are one kind.
        merged: dict[str, set[str]] = {}
        for name, values in (phrases or {}).items():
            key = " ".join(name.lower().replace("-", " ").replace("_", " ").split())
            merged.setdefault(key, set()).update(
                " ".join(v.split()) for v in values if _PHRASE.fullmatch(" ".join(v.split()))
            )
        #: Per kind: its values (longest first, so "Oat Milk" wins over "Milk") and one pattern.
        self.phrases = {
            name: (values, re.compile("|".join(rf"(?<!\w){re.escape(v)}(?!\w)" for v in values), re.I))
            for name, values in (
                (name, sorted(found, key=lambda v: (-len(v), v))) for name, found in sorted(merged.items())
            )
            if len(values) > 1
        }

    def _phrase_spans(self, reply: str) -> list[tuple[int, int, str, list[str]]]:
        """Spans of ``reply`` that name a value of a kind, as ``(start, end, kind, its values)``.

        Only a span written as a name (a capital or a digit first) or of two words or more, and
        not a common word: "the coffee bar" and "Here is" are not a drink and an order type.
        """
        spans = []
        for name, (values, pattern) in self.phrases.items():
            for m in pattern.finditer(reply):
                text = m.group(0)
                if text.lower() in ENGLISH_STOP_WORDS:  # "Here is your order", not the order type
                    continue
                if text[0].isupper() or text[0].isdigit() or " " in text:
                    spans.append((m.start(), m.end(), name, values))
        return spans

    def _value_spans(self, reply: str) -> list[tuple[int, int, str, list[str]]]:
        spans: list[tuple[int, int, str, list[str]]] = self._phrase_spans(reply)
        for kind, pattern in VALUE_TYPES.items():
            for m in pattern.finditer(reply):
                if not any(s < m.end() and m.start() < e for s, e, _, _ in spans):
                    spans.append((m.start(), m.end(), kind, self.pools.get(kind, [])))
        return sorted(spans)

    def swap(self, rng: random.Random, reply: str, known: Sequence[str]) -> str | None:
        """``reply`` with one value that ``known`` (context turns, statements) holds swapped, or None.

        The new value is of the same type, differs from the old one and is not in ``known`` (so
        the reply does not merely pick another value the conversation offered). None where the
        reply holds no such value or its type has no other value.
        """
        said = _norm(" ".join(known))
        for start, end, kind, pool in self._value_spans(reply):
            value = _norm(reply[start:end])
            if not re.search(rf"(?<!\w){re.escape(value)}(?!\w)", said):
                continue
            if kind == "count":
                number, noun = reply[start:end].split(None, 1)
                forms = _DIGITS if number.isdigit() else _WORDS
                pool = [f"{n} {noun}" for n in forms if n != number.lower()]
            others = [v for v in pool if not _same_value(v, value) and _norm(v) not in said]
            if others:
                new = rng.choice(others)
                return reply[:start] + new + reply[end:]
        return None


#: "I have", "I like", "I'm": a first-person statement, said the other way with "don't" or "not".
_FIRST_PERSON = (
    (re.compile(r"\bI am\b"), "I am not"),
    (re.compile(r"\bI'm\b"), "I'm not"),
    (re.compile(r"\bI've\b"), "I haven't"),
    (re.compile(r"\bI (can|will|would|should)\b"), r"I \1 not"),
    (re.compile(r"\bI (?:really |also |just )?([a-z]+)(?<!ed)\b(?=\s)"), r"I don't \1"),
    (re.compile(r"\b(My \w+(?: \w+)?) (is|are|was)\b"), r"\1 \2 not"),
)
#: Words after "I" that are not a present-tense verb "don't" can go before.
_NOT_VERBS = frozenset(
    "don't do did didn't was have'nt had think guess mean hope bet know agree see am a the to and so "
    "never not too".split()
)
_DENIES = re.compile(r"\bnot\b|n't\b|\bnever\b|\bno\b", re.IGNORECASE)
_ABOUT_ME = re.compile(r"\b(I|I'm|I've|my|My)\b")
#: A persona line and the reply's sentence share this many content words at least.
PERSONA_OVERLAP = 2


def negate_first_person(sentence: str) -> str | None:
    """A first-person sentence said the other way ("I love dogs." -> "I don't love dogs."), or None.

    None for a question (it states nothing), a sentence that already denies (its negation is
    often not the opposite) and one that is not about the speaker ("You have to ...").
    """
    if sentence.rstrip().endswith("?") or _DENIES.search(sentence) or not _ABOUT_ME.search(sentence):
        return None
    for pattern, replacement in _FIRST_PERSON:
        m = pattern.search(sentence)
        if m is None:
            continue
        if m.lastindex and m.group(m.lastindex).lower() in _NOT_VERBS:
            continue
        return sentence[: m.start()] + m.expand(replacement) + sentence[m.end() :]
    return negate(sentence)


def contradict_persona(reply: str, persona: Sequence[str]) -> str | None:
    """``reply`` with its sentence that restates a persona line said the other way, or None.

    The sentence is the one sharing most content words (at least :data:`PERSONA_OVERLAP`) with
    any one persona line: the fact that line gives is the one the reply then denies.
    """
    sentences = sentences_of(reply)
    lines = [content_words(p) for p in persona]
    best, best_overlap = -1, PERSONA_OVERLAP - 1
    for i, sentence in enumerate(sentences):
        words = content_words(sentence)
        overlap = max((len(words & line) for line in lines), default=0)
        if overlap > best_overlap:
            best, best_overlap = i, overlap
    if best < 0:
        return None
    turned = negate_first_person(sentences[best])
    if turned is None or turned == sentences[best]:
        return None
    return " ".join([*sentences[:best], turned, *sentences[best + 1 :]])
