"""The banks a service serves: embedded in the background at start, then searched per request.

The start does not wait for the vectors. :meth:`BankSet.start` loads the retrieval encoder;
once the models are started (``--backend auto`` times the runtimes on a quiet CPU),
:meth:`BankSet.embed_in_background` starts a task that makes each bank's vectors, one bank after
another on a thread of its own (the event loop and the request executor stay free): read from the
cache when it holds them, else computed, logged as they progress and cached. Until every bank is
ready ``/readyz`` answers 503 saying which is not and how far it is, and a request naming such a
bank gets 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from dialogue_ranker.serving.banks.bank_file import Bank, BankEntry
from dialogue_ranker.serving.banks.cache import EmbeddingCache, cache_key
from dialogue_ranker.serving.banks.configured import read_banks, retriever_of
from dialogue_ranker.serving.banks.encoder import EmbeddingStopped, TextEncoder
from dialogue_ranker.serving.banks.hubness import hubness
from dialogue_ranker.serving.banks.index import ExactIndex, QuantizedVectors
from dialogue_ranker.serving.cpu import available_cpus, intra_op_threads
from dialogue_ranker.serving.errors import NotReady, UnknownBank
from dialogue_ranker.serving.fusion import Fusion
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Turn

logger = logging.getLogger(__name__)

#: Progress is logged each time a bank passes another tenth of its responses.
PROGRESS_STEPS = 10


class BankState(StrEnum):
    """Where a bank's vectors are."""

    WAITING = "waiting"  # behind another bank
    EMBEDDING = "embedding"  # being read from the cache or computed
    READY = "ready"
    FAILED = "failed"  # the error is logged and shown by GET /v1/banks


@dataclass
class ServedBank:
    """A bank and the state of its vectors (written by the embedding thread, read by requests)."""

    bank: Bank
    loaded_at: dt.datetime
    state: BankState = BankState.WAITING
    embedded: int = 0
    index: ExactIndex | None = None
    #: Each response's centred hubness (None: the fusion does not use it).
    hubness: np.ndarray | None = None
    from_cache: bool | None = None
    embedded_at: dt.datetime | None = None
    seconds: float | None = None
    error: str | None = None

    def describe(self) -> str:
        """One line for ``/readyz`` and a 503: the bank, its state and progress."""
        name = repr(self.bank.name)
        if self.state is BankState.FAILED:
            return f"bank {name} failed: {self.error}"
        if self.state is BankState.EMBEDDING:
            return f"bank {name} is embedding ({self.embedded:,} of {self.bank.size:,} responses)"
        return f"bank {name} is {self.state.value}"


@dataclass(frozen=True, slots=True)
class Retrieved:
    """A bank response near a request's query, its cosine with it, and its centred hubness."""

    entry: BankEntry
    cosine: float
    hubness: float = 0.0


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


class BankSet:
    """The served banks by name, their encoder, and the background task that embeds them."""

    def __init__(
        self,
        banks: Sequence[Bank],
        encoder: TextEncoder,
        *,
        cache: EmbeddingCache,
        metrics: Metrics,
        executor: Executor,
        retrieve_k: int,
        max_candidates: int,
    ) -> None:
        loaded_at = _now()
        self.banks = {bank.name: ServedBank(bank, loaded_at) for bank in banks}
        self.encoder = encoder
        self.cache = cache
        self.metrics = metrics
        #: Runs each request's query embedding and search (the runtime's executor).
        self.executor = executor
        self.retrieve_k = retrieve_k
        self.max_candidates = max_candidates
        self._stop = threading.Event()
        self._embedding_thread = ThreadPoolExecutor(1, thread_name_prefix="bank-embed")
        self._task: asyncio.Task[None] | None = None
        for bank in banks:
            metrics.bank_responses.labels(bank.name).set(bank.size)
            metrics.bank_embedded.labels(bank.name).set(0)
            metrics.bank_ready.labels(bank.name).set(0)

    @classmethod
    async def start(
        cls, settings: Settings, metrics: Metrics, executor: Executor, banks: Sequence[Bank] | None = None
    ) -> BankSet | None:
        """The configured banks with their encoder loaded, not embedded yet (None: no bank).

        ``banks``: already read (``ranker serve`` checks them before the server starts).

        Raises:
            BankError: a bank file is malformed, or there is no retrieval encoder.
            BundleError: the encoder's graph is not the one its metadata describes.
            BackendUnavailable: the encoder's graph does not load.
        """
        if not settings.bank:
            return None
        loop = asyncio.get_running_loop()
        spec = retriever_of(settings)
        if banks is None:
            banks = await loop.run_in_executor(executor, read_banks, settings)
        encoder = TextEncoder(
            spec,
            query_threads=settings.onnx.intra_op_threads or intra_op_threads(settings.batching.workers),
            bulk_threads=settings.onnx.solo_threads or available_cpus(),
        )
        await loop.run_in_executor(executor, encoder.start)
        cache = EmbeddingCache(settings.banks.cache_dir)
        bank_set = cls(
            banks, encoder, cache=cache, metrics=metrics, executor=executor,
            retrieve_k=settings.banks.retrieve_k, max_candidates=settings.limits.max_candidates,
        )  # fmt: skip
        return bank_set

    def embed_in_background(self) -> None:
        """Start making the banks' vectors; ``/readyz`` is ready once every bank is."""
        if self._task is None:
            self._task = asyncio.create_task(self._embed_all(), name="embed banks")

    @property
    def ready(self) -> bool:
        """True once every bank's vectors are in memory."""
        return all(served.state is BankState.READY for served in self.banks.values())

    def waiting(self) -> str | None:
        """What is not ready yet, one clause a bank (None when every bank is)."""
        pending = [served.describe() for served in self.banks.values() if served.state is not BankState.READY]
        return "; ".join(pending) or None

    def get(self, name: str) -> ServedBank:
        """The ready bank called ``name``.

        Raises:
            UnknownBank: no bank has that name (422 naming the field).
            NotReady: its vectors are not ready, or could not be made (503).
        """
        served = self.banks.get(name)
        if served is None:
            raise UnknownBank(name, list(self.banks))
        if served.state is not BankState.READY:
            raise NotReady(f"bank: {served.describe()}")
        return served

    @property
    def fusion(self) -> Fusion:
        """How a bank request's logits and cosines make its final score (the encoder's ``fusion``)."""
        return self.encoder.spec.fusion

    async def retrieve(
        self, name: str, turns: Sequence[Turn], *, k: int | None, explicit: int, own: Sequence[str] = ()
    ) -> tuple[list[Retrieved], list[float]]:
        """The bank responses nearest the request's query, best first, and the cosines of ``own`` texts.

        ``k``: the request's ``retrieve_k``; None: ``banks.retrieve_k``, at most
        ``limits.max_candidates`` less the request's ``explicit`` candidates. ``own``: the
        request's own candidates' texts, embedded with the query encoder when the fusion needs
        their cosine with the query (a few texts).

        Raises:
            UnknownBank, NotReady: as :meth:`get`.
            BackendError: the encoder failed on the query.
        """
        served = self.get(name)
        if k is None:
            k = max(0, min(self.retrieve_k, self.max_candidates - explicit))
        if k == 0 and not own:
            return [], []
        loop = asyncio.get_running_loop()
        rows, cosines, own_cosines = await loop.run_in_executor(
            self.executor, self._search, served, turns, k, own
        )
        entries, hubness = served.bank.entries, served.hubness
        drawn = [
            Retrieved(entries[row], float(cosine), 0.0 if hubness is None else float(hubness[row]))
            for row, cosine in zip(rows, cosines, strict=True)
        ]
        return drawn, [float(c) for c in own_cosines]

    def _search(
        self, served: ServedBank, turns: Sequence[Turn], k: int, own: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        assert served.index is not None  # a ready bank has its index
        started = time.perf_counter()
        vector = self.encoder.embed_queries([turns])[0]
        # Apart from the query: its vector stays what it is without them (no padding to their length).
        own_cosines = self.encoder.embed(own) @ vector if own else np.empty(0, dtype=np.float32)
        embedded = time.perf_counter()
        rows, cosines = served.index.search(vector, k)
        name = served.bank.name
        self.metrics.retrieval_duration.labels(name, "embed").observe(embedded - started)
        self.metrics.retrieval_duration.labels(name, "search").observe(time.perf_counter() - embedded)
        return rows, cosines, own_cosines

    async def _embed_all(self) -> None:
        """Each bank in turn on the embedding thread; a failed bank is logged, the others still load."""
        loop = asyncio.get_running_loop()
        for served in self.banks.values():
            try:
                await loop.run_in_executor(self._embedding_thread, self._make_ready, served)
            except EmbeddingStopped:
                return
            except Exception as e:  # whatever failed, the bank is reported, never silently missing
                served.state, served.error = BankState.FAILED, f"{type(e).__name__}: {e}"
                logger.error("bank failed bank=%s", served.bank.name, exc_info=e)
        self.encoder.release_bulk()
        if self.ready:
            logger.info("banks ready banks=%d responses=%d", len(self.banks), self._responses())

    def _responses(self) -> int:
        return sum(served.bank.size for served in self.banks.values())

    def _make_ready(self, served: ServedBank) -> None:
        """One bank's vectors from the cache, else computed and cached; blocking."""
        bank, started = served.bank, time.perf_counter()
        served.state = BankState.EMBEDDING
        key = cache_key(bank, self.encoder.identity)
        vectors = self.cache.load(bank, key, self.encoder.dim)
        source, written = "cache", None
        if vectors is None:
            source = "computed"
            logger.info("bank embedding bank=%s responses=%d", bank.name, bank.size)
            floats = self.encoder.embed_all(bank.texts, progress=_Progress(self, served), stop=self._stop)
            vectors = QuantizedVectors.from_float(floats)
            kept = {}
            if self.fusion.hubness_weight > 0:  # one write: the vectors with the hubness
                served.hubness = kept[self.fusion.hubness_neighbours] = self._hubness(bank, vectors)
            written = self.cache.save(bank, key, vectors, kept)
        elif self.fusion.hubness_weight > 0:
            served.hubness = self.cache.load_hubness(bank, key, self.fusion.hubness_neighbours)
            if served.hubness is None:  # cached before a fusion used it: computed once and kept
                served.hubness = self._hubness(bank, vectors)
                self.cache.save(bank, key, vectors, {self.fusion.hubness_neighbours: served.hubness})
        served.index = ExactIndex(vectors)
        served.seconds, served.embedded, served.from_cache = (
            time.perf_counter() - started,
            bank.size,
            source == "cache",
        )
        served.embedded_at, served.state = _now(), BankState.READY
        m = self.metrics
        m.bank_embedded.labels(bank.name).set(bank.size)
        m.bank_load.labels(bank.name, source).set(served.seconds)
        m.bank_ready.labels(bank.name).set(1)
        logger.info(
            "bank ready bank=%s responses=%d source=%s seconds=%.2f memory_mb=%.1f cache=%s",
            bank.name, bank.size, source, served.seconds, vectors.nbytes / 1e6,
            written or self.cache.path(bank, key),
        )  # fmt: skip

    def _hubness(self, bank: Bank, vectors: QuantizedVectors) -> np.ndarray:
        """The bank's hubness over the fusion's neighbours, computed (logged with its seconds)."""
        neighbours, started = self.fusion.hubness_neighbours, time.perf_counter()
        values = hubness(vectors, neighbours)
        logger.info("bank hubness bank=%s neighbours=%d seconds=%.2f", bank.name, neighbours,
                    time.perf_counter() - started)  # fmt: skip
        return values

    async def close(self) -> None:
        """Stop the embedding (at its next call) and drop the encoder."""
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            # The task only waits on the embedding thread: it ends at once, never left pending.
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._embedding_thread.shutdown(wait=False, cancel_futures=True)
        self.encoder.close()


class _Progress:
    """Counts a bank's embedded responses for the metric, and logs each tenth."""

    def __init__(self, bank_set: BankSet, served: ServedBank) -> None:
        self.served = served
        self.gauge = bank_set.metrics.bank_embedded.labels(served.bank.name)
        self.logged = 0

    def __call__(self, done: int) -> None:
        served = self.served
        served.embedded = done
        self.gauge.set(done)
        step = done * PROGRESS_STEPS // served.bank.size
        if step > self.logged and done < served.bank.size:
            self.logged = step
            logger.info("bank embedding bank=%s embedded=%d of %d", served.bank.name, done, served.bank.size)
