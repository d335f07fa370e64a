"""Which candidates repeat a turn of the conversation (the repeat mask).

A retrieval generator often returns a turn already said, and a cross-encoder scores such a
candidate high: it is as close to the context as a reply can be. Socialbots filter these before
ranking; here they are masked like an invalid action, so the response says why they went.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def repeat_key(text: str) -> str:
    """The text case-folded, with punctuation dropped and spaces collapsed ("Any pets?" == "any pets")."""
    kept = "".join(ch if ch.isalnum() else " " for ch in text.casefold())
    return " ".join(kept.split())


def repeats(turns: Iterable[str], candidates: Sequence[str]) -> list[bool]:
    """For each candidate, whether it says a turn again (texts with no letters or digits never do)."""
    said = {key for key in map(repeat_key, turns) if key}
    return [bool(key) and key in said for key in map(repeat_key, candidates)]
