"""A served bank: the version requests search, replaced whole by a reload, and what its loads did.

A :class:`BankVersion` is complete and never changes: the file's responses, their vectors, the
index and the hubness. A :class:`ServedBank` holds the one being served in ``current``; a reload
builds the next version beside it and then replaces that one reference, so a request that has
taken the old version finishes on it and the next request gets the new one, and none ever sees
half of each.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np

from dialogue_ranker.serving.banks.bank_file import Bank
from dialogue_ranker.serving.banks.index import ExactIndex
from dialogue_ranker.serving.banks.text_vectors import KeyedVectors


class BankState(StrEnum):
    """Where a bank is: its first load, then served (reloads keep it served) or failed."""

    WAITING = "waiting"  # behind another bank
    EMBEDDING = "embedding"  # being read from the cache or computed
    READY = "ready"  # a version is served (a failed reload keeps the last one)
    FAILED = "failed"  # its first load failed: the error is logged and shown by GET /v1/banks


class LoadTrigger(StrEnum):
    """What loaded a bank's file: the start, ``POST /v1/banks/{name}/reload``, SIGHUP or the file watch."""

    START = "start"
    API = "api"
    SIGNAL = "signal"
    WATCH = "watch"


def now() -> dt.datetime:
    """The current UTC time, to the second."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


@dataclass(frozen=True)
class BankVersion:
    """One version of a bank, whole: what a request searches."""

    bank: Bank
    vectors: KeyedVectors
    index: ExactIndex
    #: Each response's centred hubness (None: the fusion does not use it).
    hubness: np.ndarray | None
    #: When the file was read, and when the vectors were ready (UTC).
    read_at: dt.datetime
    ready_at: dt.datetime
    #: Texts embedded for it (0: every vector was reused), rows whose vector was reused, and how
    #: long it took to build.
    embedded: int
    reused: int
    seconds: float

    @property
    def version(self) -> str:
        """The digest of the file's records."""
        return self.bank.version


@dataclass(frozen=True)
class LoadRecord:
    """One load of a bank's file: what started it, when, its outcome and the vectors it embedded or reused."""

    trigger: LoadTrigger
    at: dt.datetime
    ok: bool
    seconds: float
    embedded: int = 0
    reused: int = 0
    #: Why it failed (the file, line and field for a bad file); None when it succeeded.
    error: str | None = None


@dataclass(eq=False)
class ServedBank:
    """A bank by name: its file, the version served, and its loads.

    Written on the event loop, but for ``embedded``, the first load's progress, which the
    embedding thread counts.
    """

    name: str
    path: Path
    #: The file as read at start: what the first load embeds, and what is listed until it is ready.
    first: Bank
    state: BankState = BankState.WAITING
    #: The version requests search; None until the first load is ready.
    current: BankVersion | None = None
    #: Responses whose vectors the first load has so far.
    embedded: int = 0
    error: str | None = None
    last_load: LoadRecord | None = None
    reloading: bool = False
    #: One reload of this bank at a time: a second waits for the first, then reads the file again.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def bank(self) -> Bank:
        """The served version's file, else the one read at start."""
        return self.first if self.current is None else self.current.bank

    def describe(self) -> str:
        """One line for ``/readyz`` and a 503: the bank, its state and progress."""
        name = repr(self.name)
        if self.state is BankState.FAILED:
            return f"bank {name} failed: {self.error}"
        if self.state is BankState.EMBEDDING:
            return f"bank {name} is embedding ({self.embedded:,} of {self.first.size:,} responses)"
        return f"bank {name} is {self.state.value}"
