"""The project's one ranking-data format: JSONL, one ranking list per line.

    {"context": [{"speaker": "user", "text": "It is so hot in here."}],
     "situations": ["The window is closed.", "There is a fan in the closet."],
     "relevant_situations": [0],
     "candidates": [{"text": "Shall I open the window?", "label": 2, "generator": "retrieval"},
                    {"text": "Pizza is great.", "label": 0}],
     "group": "dialogue-17"}

- ``context``: the conversation, oldest turn first (``speaker`` optional, default ``user``), or
  one string (one user turn).
- ``situations``: optional statements the responder knows (situational facts, persona lines,
  knowledge snippets), highest priority first; ``relevant_situations`` optionally marks the
  relevant ones by index (what a statement selector learns from).
- ``candidates``: ``text`` and ``label``, with optional ``generator`` and ``action``. An integer
  label is a grade (0 bad, 1 acceptable, 2 best); a float is a probability in [0, 1]. A candidate
  is *appropriate* at grade 1 or more, or probability 0.5 or more.
- ``group``: the dialogue the list comes from; splits never cut a group.

:func:`read_lists` rejects a bad line with the file, line number and field, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError, field_validator

from dialogue_ranker.serving.tokenization import DEFAULT_SPEAKER, Turn

Text = Annotated[str, Field(min_length=1, pattern=r"\S")]


class DataError(ValueError):
    """A ranking-data line that does not follow the format; the message names file, line and field."""


def exit_on_data_error(main: Callable[[], object]) -> None:
    """Run a command-line ``main``; a :class:`DataError` ends it with its message and status 2.

    What a user gets for a bad file or option is the file, line and field, not a traceback.
    """
    try:
        main()
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


class _TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    speaker: str = DEFAULT_SPEAKER
    text: Text


class _CandidateIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: Text
    label: StrictInt | StrictFloat
    generator: str | None = None
    action: str | None = None

    @field_validator("label")
    @classmethod
    def _label_range(cls, value: int | float) -> int | float:
        if isinstance(value, int) and value not in (0, 1, 2):
            raise ValueError("an integer label is a grade: 0, 1 or 2")
        if isinstance(value, float) and not 0.0 <= value <= 1.0:
            raise ValueError("a float label is a probability in [0, 1]")
        return value


class _ListIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    context: list[_TurnIn] | Text
    situations: list[Text] = Field(default_factory=list)
    relevant_situations: list[StrictInt] = Field(default_factory=list)
    candidates: list[_CandidateIn] = Field(min_length=1)
    group: Text


@dataclass(frozen=True)
class Candidate:
    """One candidate with its label."""

    text: str
    label: int | float
    generator: str | None = None
    action: str | None = None

    @property
    def appropriate(self) -> bool:
        """Grade 1 or more, or probability 0.5 or more."""
        return self.label >= 1 if isinstance(self.label, int) else self.label >= 0.5

    @property
    def gain(self) -> float:
        """The label on the grade scale (0 to 2), for nDCG."""
        return float(self.label) if isinstance(self.label, int) else 2.0 * float(self.label)


@dataclass(frozen=True)
class RankingList:
    """One ranking request with labelled candidates."""

    context: tuple[Turn, ...]
    candidates: tuple[Candidate, ...]
    group: str
    situations: tuple[str, ...] = ()
    relevant_situations: tuple[int, ...] = ()
    #: Where it was read from (``file:line``), for messages.
    origin: str = field(default="", compare=False)

    def to_json(self) -> dict:
        """The list as one line of the format."""
        row: dict = {"context": [{"speaker": t.speaker, "text": t.text} for t in self.context]}
        if self.situations:
            row["situations"] = list(self.situations)
        if self.relevant_situations:
            row["relevant_situations"] = list(self.relevant_situations)
        row["candidates"] = [
            {"text": c.text, "label": c.label}
            | ({"generator": c.generator} if c.generator is not None else {})
            | ({"action": c.action} if c.action is not None else {})
            for c in self.candidates
        ]
        row["group"] = self.group
        return row


def parse_line(line: str, origin: str) -> RankingList:
    """One line of the format.

    Raises:
        DataError: not JSON, or a field breaks the format (the message names it).
    """
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{origin}: not JSON ({e.msg} at column {e.colno})") from None
    try:
        row = _ListIn.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "line"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise DataError(f"{origin}: {where}: {first['msg']}{more}") from None
    context = (
        (Turn(DEFAULT_SPEAKER, row.context),)
        if isinstance(row.context, str)
        else tuple(Turn(t.speaker, t.text) for t in row.context)
    )
    bad = [i for i in row.relevant_situations if not 0 <= i < len(row.situations)]
    if bad:
        raise DataError(f"{origin}: relevant_situations: index {bad[0]} is not a situation")
    return RankingList(
        context=context,
        candidates=tuple(Candidate(c.text, c.label, c.generator, c.action) for c in row.candidates),
        group=row.group,
        situations=tuple(row.situations),
        relevant_situations=tuple(row.relevant_situations),
        origin=origin,
    )


def read_lists(path: str | Path) -> list[RankingList]:
    """Every ranking list of a JSONL file (blank lines skipped).

    Raises:
        DataError: the file cannot be read, holds no list, or a line breaks the format.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot be read ({type(e).__name__})") from None
    lists = [parse_line(line, f"{path}:{n}") for n, line in enumerate(lines, start=1) if line.strip()]
    if not lists:
        raise DataError(f"{path}: no ranking list")
    return lists


def write_lists(path: str | Path, lists: Iterable[RankingList]) -> int:
    """Write lists as JSONL; how many were written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for ranking_list in lists:
            out.write(json.dumps(ranking_list.to_json(), ensure_ascii=False) + "\n")
            count += 1
    return count


def groups(lists: Sequence[RankingList]) -> list[str]:
    """The distinct groups, in order of first appearance."""
    return list(dict.fromkeys(lst.group for lst in lists))
