"""A bank's next version, built whole off to the side; blocking (it runs on the banks' embedding thread).

The file is read and checked whole, each text's vector taken from the known ones by digest (the
served version's in memory, else the disk cache's) and only new texts embedded, then the index and
the hubness are made and the cache written when something changed. Nothing here touches the
version being served: the caller swaps the finished one in.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from dialogue_ranker.serving.banks.bank_file import Bank, read_bank
from dialogue_ranker.serving.banks.cache import EmbeddingCache
from dialogue_ranker.serving.banks.encoder import TextEncoder
from dialogue_ranker.serving.banks.hubness import hubness
from dialogue_ranker.serving.banks.index import ExactIndex, QuantizedVectors
from dialogue_ranker.serving.banks.served import BankVersion, now
from dialogue_ranker.serving.banks.text_vectors import KeyedVectors, assemble, text_digests
from dialogue_ranker.serving.fusion import Fusion

logger = logging.getLogger(__name__)

#: Called with the bank's responses whose vectors are ready so far.
Progress = Callable[[int], None]


class VersionBuilder:
    """Reads bank files and builds their versions with one encoder, cache and fusion."""

    def __init__(
        self,
        encoder: TextEncoder,
        cache: EmbeddingCache,
        fusion: Fusion,
        *,
        max_text_chars: int,
        stop: threading.Event,
    ) -> None:
        self.encoder = encoder
        self.cache = cache
        self.fusion = fusion
        self.max_text_chars = max_text_chars
        #: Set at shutdown: an embedding stops at its next call (EmbeddingStopped).
        self.stop = stop

    def read(self, name: str, path: Path) -> Bank:
        """The bank's file, read and checked whole.

        Raises:
            BankError: the file cannot be read or a line is bad (the message names the file, line and field).
        """
        return read_bank(name, path, max_text_chars=self.max_text_chars)

    def build(
        self,
        bank: Bank,
        known: KeyedVectors | None,
        *,
        read_at: dt.datetime,
        bulk: bool,
        progress: Progress | None = None,
    ) -> BankVersion:
        """The bank's version: vectors reused by digest from ``known`` (None: the cache's), the rest embedded.

        ``read_at``: when the file was read; ``bulk``: embed on the bulk session (the start) rather
        than the query session (a reload, beside requests).

        Raises:
            EmbeddingStopped: the service is shutting down.
            BackendError: the encoder failed.
        """
        started = time.perf_counter()
        encoder = self.encoder
        digests = text_digests(bank.texts, encoder.identity)
        if known is None:
            known = self.cache.load(bank, encoder.identity, encoder.dim)

        def embed(texts: Sequence[str]) -> np.ndarray:
            # Progress counts the bank's responses: those reused are ready already.
            offset = bank.size - len(texts)
            logger.info("bank embedding bank=%s texts=%d responses=%d", bank.name, len(texts), bank.size)
            report = None if progress is None else (lambda done: progress(offset + done))
            if report is not None:
                report(0)
            return encoder.embed_all(texts, progress=report, stop=self.stop, bulk=bulk)

        assembled = assemble(bank.texts, digests, known, embed, dim=encoder.dim)
        vectors = assembled.vectors
        kept_hubness = self._hubness(bank, vectors, known)
        if kept_hubness is not None:
            neighbours = self.fusion.hubness_neighbours
            vectors = KeyedVectors(vectors.digests, vectors.vectors, {neighbours: kept_hubness})
        # An unchanged bank (a restart, a reload of the same texts) leaves the file as it is.
        if known is None or not known.same_rows(digests) or vectors.hubness.keys() - known.hubness.keys():
            self.cache.save(bank, encoder.identity, vectors)
        return BankVersion(
            bank=bank,
            vectors=vectors,
            index=ExactIndex(vectors.vectors),
            hubness=kept_hubness,
            read_at=read_at,
            ready_at=now(),
            embedded=assembled.embedded,
            reused=assembled.reused,
            seconds=time.perf_counter() - started,
        )

    def _hubness(self, bank: Bank, vectors: KeyedVectors, known: KeyedVectors | None) -> np.ndarray | None:
        """The rows' hubness when the fusion uses it: the known one for the same rows, else computed."""
        if self.fusion.hubness_weight <= 0:
            return None
        neighbours = self.fusion.hubness_neighbours
        if known is not None and known.same_rows(vectors.digests) and neighbours in known.hubness:
            return known.hubness[neighbours]
        return self._computed_hubness(bank, vectors.vectors)

    def _computed_hubness(self, bank: Bank, vectors: QuantizedVectors) -> np.ndarray:
        neighbours, started = self.fusion.hubness_neighbours, time.perf_counter()
        values = hubness(vectors, neighbours)
        logger.info("bank hubness bank=%s neighbours=%d seconds=%.2f", bank.name, neighbours,
                    time.perf_counter() - started)  # fmt: skip
        return values

    def cache_path(self, bank: Bank) -> Path:
        """Where the bank's vectors are kept on disk."""
        return self.cache.path(bank, self.encoder.identity)
