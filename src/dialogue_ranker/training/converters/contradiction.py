"""A declining reply's reason, found among its statements, and that statement said the other way.

For ``contradicted`` negatives (:mod:`dialogue_ranker.training.converters.sugar`): SUGAR's
declining replies open with their reason ("Sorry, but the store is closed. Shall I ...?"), and
one of the example's relevant statements says it ("The bike store is closed."). Said the other
way ("The bike store is open.") and added to an accepting example of the same request, the
statement makes that reply wrong while it still shares the statements' words: what a person
asking "Book me a table at Luigi's" under "Luigi's is open every evening" expects the service to
see, and what a model that matches words alone misses.

The negation is a handful of rules on SUGAR's short declarative statements, written here because
no library we may install negates a sentence (spaCy or a parser would find the verb, not say the
opposite). A statement the rules cannot turn (no auxiliary, "never", "no longer") is skipped, so
a list is only made where the rules speak.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Said the other way in a word where one exists ("The store is closed." -> "The store is open."),
#: which reads as a person states a situation; elsewhere "not" goes in.
_OPPOSITES = {
    "closed": "open",
    "shut": "open",
    "broken": "working",
    "jammed": "working",
    "locked": "unlocked",
    "dirty": "clean",
    "unavailable": "available",
    "blocked": "clear",
    "empty": "full",
    "dead": "charged",
    "canceled": "going ahead",
    "cancelled": "going ahead",
    "sold out": "in stock",
}
_OPPOSITE = re.compile(
    r"\b(is|are|was|were)((?: currently| now| all)?) (" + "|".join(map(re.escape, _OPPOSITES)) + r")\b"
)
#: "The pen is out of ink." -> "The pen has plenty of ink."
_OUT_OF = re.compile(r"\b(is|are) (?:all |currently )?out of\b")
_HAVE_PLENTY = {"is": "has plenty of", "are": "have plenty of"}
#: Contractions and negatives undone first: the statement already says "not".
_UNDO = (
    (r"\b(?:does not|doesn't) have\b", "has"),
    (r"\b(?:do not|don't) have\b", "have"),
    (r"\bisn't\b", "is"),
    (r"\baren't\b", "are"),
    (r"\bwasn't\b", "was"),
    (r"\bweren't\b", "were"),
    (r"\bdoesn't\b", "does"),
    (r"\bdon't\b", "do"),
    (r"\bdidn't\b", "did"),
    (r"\bcan't\b", "can"),
    (r"\bcannot\b", "can"),
    (r"\bhasn't\b", "has"),
    (r"\bhaven't\b", "have"),
    (r"\bwon't\b", "will"),
    (r"\bcouldn't\b", "could"),
    (r"\bnot ", ""),
    (r"\bno\b", "some"),
    (r"\bnothing\b", "something"),
)
#: Words whose opposite the rules cannot say in a word.
_UNTURNABLE = re.compile(r"\b(never|nobody|no one|no longer|neither|nor)\b", re.IGNORECASE)
_AUXILIARY = re.compile(r"\b(is|are|was|were|can|will|could|should|has been|have been|had been)\b")
#: "has run out", "has left": a perfect tense takes "not" after "has", not "does not have".
_PERFECT = re.compile(r"\b(has|have|had) (\w+)")
_PARTICIPLES = {"run", "got", "left", "gone", "come", "lost", "been", "made", "put", "set"}
_POSSESSION = ((re.compile(r"\bhas\b"), "does not have"), (re.compile(r"\bhave\b"), "do not have"))
#: Words that say nothing about which statement a reply's reason is.
_STOP = frozenset(
    "the a an is are was were be to of and or in on at for with your you i it this that there but "
    "sorry would like shall should me my we our can could will do does not no user someone some any "
    "has have now right currently".split()
)
_WORD = re.compile(r"[a-z']+")
#: Where a declining reply's reason ends and its offer begins.
_REASON_END = re.compile(
    r"[.?!;]|, (?:would|shall|but|do|i|so|can)\b| (?:would you|shall i|do you want|i can)\b"
)
_APOLOGY = re.compile(r"^(i am |i'm )?sorry,?( but)?")


def negate(statement: str) -> str | None:
    """``statement`` said the other way, or None where the rules cannot say it."""
    if _UNTURNABLE.search(statement):
        return None
    opposite = _OPPOSITE.search(statement)
    if opposite and " not " not in statement:
        word = _OPPOSITES[opposite.group(3)]
        return statement[: opposite.start(3)] + word + statement[opposite.end(3) :]
    out_of = _OUT_OF.search(statement)
    if out_of:
        return statement[: out_of.start()] + _HAVE_PLENTY[out_of.group(1)] + statement[out_of.end() :]
    for pattern, replacement in _UNDO:
        if re.search(pattern, statement, re.IGNORECASE):
            return re.sub(pattern, replacement, statement, count=1, flags=re.IGNORECASE)
    perfect = _PERFECT.search(statement)
    if perfect and (perfect.group(2).endswith(("ed", "en")) or perfect.group(2) in _PARTICIPLES):
        return statement[: perfect.end(1)] + " not" + statement[perfect.end(1) :]
    auxiliary = _AUXILIARY.search(statement)
    if auxiliary:
        return statement[: auxiliary.end()] + " not" + statement[auxiliary.end() :]
    for pattern, replacement in _POSSESSION:
        if pattern.search(statement):
            return pattern.sub(replacement, statement, count=1)
    return None


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def reason_statement(reply: str, statements: Sequence[str], relevant: Sequence[int]) -> str | None:
    """The relevant statement that shares most words with the reply's reason (its first clause).

    None when no relevant statement shares a content word with it (the reason is not among the
    statements), or two share as many (no one statement is the reason).
    """
    clauses = (c for c in _REASON_END.split(_APOLOGY.sub("", reply.lower())) if c and c.strip())
    reason = _content_words(next(clauses, reply))
    ranked = sorted(
        ((len(_content_words(statements[i]) & reason), statements[i]) for i in relevant), reverse=True
    )
    if not ranked or ranked[0][0] == 0 or (len(ranked) > 1 and ranked[1][0] == ranked[0][0]):
        return None
    return ranked[0][1]
