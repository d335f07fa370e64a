"""A response bank's file: JSONL, one response a line, read and checked whole at start and at each reload.

    {"id": "greet-1", "text": "Hello! How can I help you today?"}
    {"id": "a-17", "text": "Let me pull up your account.", "action": "pull-up-account", "generator": "macro"}

``id`` (unique in the file) and ``text`` are required; ``generator`` and ``action`` are optional
and mean what they mean on a request's candidates (metrics, and guideline masks for an intent).
Blank lines are skipped. The first bad line stops the start (or refuses the reload) with the file,
its line number and the field: a bank is served whole or not at all, never with responses silently
dropped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dialogue_ranker.serving.text_constraints import NON_BLANK, Name


class BankError(ValueError):
    """A bank cannot be served: its file is missing or malformed, or no retrieval encoder is there."""


@dataclass(frozen=True, slots=True)
class BankEntry:
    """One response of a bank."""

    id: str
    text: str
    generator: str | None = None
    action: str | None = None


@dataclass(frozen=True)
class Bank:
    """A bank's responses, in file order, and the digest of their texts."""

    name: str
    path: Path
    entries: tuple[BankEntry, ...]
    #: SHA-256 of the texts in order: the vectors depend on nothing else of the file, so an edit of
    #: an id or action keeps the embedding cache and an edit of a text (or the order) does not.
    texts_sha256: str
    #: SHA-256 of the records (id, text, generator, action) in order: the bank's version, equal for
    #: two files that hold the same responses whatever their spacing or key order. Empty for a bank
    #: not read from a file.
    version: str = ""

    @property
    def size(self) -> int:
        """The number of responses."""
        return len(self.entries)

    @property
    def texts(self) -> list[str]:
        """Every response's text, in file order."""
        return [e.text for e in self.entries]


def _line_model(max_text_chars: int) -> type[BaseModel]:
    """A line's schema, its text limited as a request's candidate texts are."""

    class BankLine(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)

        id: Name
        text: str = Field(min_length=1, max_length=max_text_chars, pattern=NON_BLANK)
        generator: Name | None = None
        action: Name | None = None

    return BankLine


def _problem(error: ValidationError) -> str:
    """The first problem of a line: ``field: message`` (the field as the file spells it)."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or "line"
    return f"{field}: {first.get('msg', 'invalid')}"


def read_bank(name: str, path: str | Path, *, max_text_chars: int) -> Bank:
    """Read and check a bank file.

    Raises:
        BankError: the file cannot be read, holds no response, or a line is not JSON, lacks ``id``
            or ``text``, has a field of the wrong type or an unknown field, or repeats an id; the
            message names the file, the line number and the field.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise BankError(f"bank {name!r}: cannot read {path} ({e.strerror or e})") from None
    schema = _line_model(max_text_chars)
    entries: list[BankEntry] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(raw.splitlines(), start=1):
        where = f"bank {name!r}: {path}:{number}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise BankError(f"{where}: not UTF-8 text") from None
        if not text.strip():
            continue
        entry = _entry(schema, text, where)
        if entry.id in first_line:
            raise BankError(f"{where}: id: {entry.id!r} is already the id of line {first_line[entry.id]}")
        first_line[entry.id] = number
        entries.append(entry)
    if not entries:
        raise BankError(f"bank {name!r}: {path} holds no response (one JSON object a line: id, text)")
    texts, records = hashlib.sha256(), hashlib.sha256()
    for entry in entries:
        texts.update(entry.text.encode("utf-8") + b"\0")
        records.update(json.dumps([entry.id, entry.text, entry.generator, entry.action]).encode() + b"\n")
    return Bank(
        name=name,
        path=path.resolve(),
        entries=tuple(entries),
        texts_sha256=texts.hexdigest(),
        version=records.hexdigest(),
    )


def _entry(schema: type[BaseModel], text: str, where: str) -> BankEntry:
    try:
        data: Any = json.loads(text)
    except ValueError as e:
        raise BankError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise BankError(f"{where}: expected a JSON object with id and text, got {type(data).__name__}")
    try:
        line = schema.model_validate(data)
    except ValidationError as e:
        raise BankError(f"{where}: {_problem(e)}") from None
    return BankEntry(**line.model_dump())
