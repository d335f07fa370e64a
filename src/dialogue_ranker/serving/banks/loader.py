"""The banks a service serves: loaded in the background at start, reloaded live, searched per request.

The start does not wait for the vectors. :meth:`BankSet.start` loads the retrieval encoder;
once the models are started (``--backend auto`` times the runtimes on a quiet CPU),
:meth:`BankSet.embed_in_background` starts a task that makes each bank's first version, one bank
after another on a thread of its own (the event loop and the request executor stay free): vectors
read from the cache when it holds them, else computed, logged as they progress and cached. Until
every bank has a version ``/readyz`` answers 503 saying which is not and how far it is, and a
request naming such a bank gets 503.

:meth:`BankSet.reload` (``POST /v1/banks/{name}/reload``, SIGHUP, the file watch) reads the file
again and builds the next version on the same thread, embedding only its new texts, then swaps it
in with one assignment (:mod:`.served`). A file that fails its check leaves the served version as
it is. Reloads of one bank are serialised: a second waits for the first, then reads the file again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from dialogue_ranker.serving.banks.bank_file import Bank, BankEntry, BankError
from dialogue_ranker.serving.banks.cache import EmbeddingCache
from dialogue_ranker.serving.banks.configured import read_banks, retriever_of
from dialogue_ranker.serving.banks.encoder import EmbeddingStopped, TextEncoder
from dialogue_ranker.serving.banks.served import (
    BankState,
    BankVersion,
    LoadRecord,
    LoadTrigger,
    ServedBank,
    now,
)
from dialogue_ranker.serving.banks.versions import VersionBuilder
from dialogue_ranker.serving.cpu import available_cpus, intra_op_threads
from dialogue_ranker.serving.errors import BankNotFound, InvalidBankFile, NotReady, UnknownBank
from dialogue_ranker.serving.fusion import Fusion
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Turn

logger = logging.getLogger(__name__)

#: Progress is logged each time a bank passes another tenth of its responses.
PROGRESS_STEPS = 10


@dataclass(frozen=True, slots=True)
class Retrieved:
    """A bank response near a request's query, its cosine with it, and its centred hubness."""

    entry: BankEntry
    cosine: float
    hubness: float = 0.0


class BankSet:
    """The served banks by name, their encoder, and the thread that builds their versions."""

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
        max_text_chars: int,
    ) -> None:
        self.read_at = now()
        self.banks = {bank.name: ServedBank(bank.name, bank.path, bank) for bank in banks}
        self.encoder = encoder
        self.metrics = metrics
        #: Runs each request's query embedding and search (the runtime's executor).
        self.executor = executor
        self.retrieve_k = retrieve_k
        self.max_candidates = max_candidates
        self._stop = threading.Event()
        self.builder = VersionBuilder(
            encoder, cache, encoder.spec.fusion, max_text_chars=max_text_chars, stop=self._stop
        )
        #: One thread builds every version, so two never compete for the CPUs.
        self._embedding_thread = ThreadPoolExecutor(1, thread_name_prefix="bank-embed")
        self._task: asyncio.Task[None] | None = None
        self._reloads: set[asyncio.Task[ServedBank]] = set()
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
        limits, cache = settings.limits, EmbeddingCache(settings.banks.cache_dir)
        return cls(
            banks, encoder, cache=cache, metrics=metrics, executor=executor,
            retrieve_k=settings.banks.retrieve_k, max_candidates=limits.max_candidates,
            max_text_chars=limits.max_text_chars,
        )  # fmt: skip

    def embed_in_background(self) -> None:
        """Start making the banks' first versions; ``/readyz`` is ready once every bank has one."""
        if self._task is None:
            self._task = asyncio.create_task(self._embed_all(), name="embed banks")

    @property
    def ready(self) -> bool:
        """True once every bank has a version served."""
        return all(served.current is not None for served in self.banks.values())

    def waiting(self) -> str | None:
        """What is not ready yet, one clause a bank (None when every bank is)."""
        pending = [served.describe() for served in self.banks.values() if served.current is None]
        return "; ".join(pending) or None

    def served(self, name: str) -> ServedBank:
        """The bank called ``name``, whatever its state (the bank routes).

        Raises:
            BankNotFound: no bank has that name (404).
        """
        served = self.banks.get(name)
        if served is None:
            raise BankNotFound(name, list(self.banks))
        return served

    def get(self, name: str) -> BankVersion:
        """The version of the bank called ``name`` that a request searches now.

        Raises:
            UnknownBank: no bank has that name (422 naming the field).
            NotReady: it has no version yet, or its first load failed (503).
        """
        served = self.banks.get(name)
        if served is None:
            raise UnknownBank(name, list(self.banks))
        version = served.current  # read once: the request keeps this version whatever a reload does
        if version is None:
            raise NotReady(f"bank: {served.describe()}")
        return version

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
        version = self.get(name)
        if k is None:
            k = max(0, min(self.retrieve_k, self.max_candidates - explicit))
        if k == 0 and not own:
            return [], []
        loop = asyncio.get_running_loop()
        rows, cosines, own_cosines = await loop.run_in_executor(
            self.executor, self._search, version, turns, k, own
        )
        entries, hubness = version.bank.entries, version.hubness
        drawn = [
            Retrieved(entries[row], float(cosine), 0.0 if hubness is None else float(hubness[row]))
            for row, cosine in zip(rows, cosines, strict=True)
        ]
        return drawn, [float(c) for c in own_cosines]

    def _search(
        self, version: BankVersion, turns: Sequence[Turn], k: int, own: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        started = time.perf_counter()
        vector = self.encoder.embed_queries([turns])[0]
        # Apart from the query: its vector stays what it is without them (no padding to their length).
        own_cosines = self.encoder.embed(own) @ vector if own else np.empty(0, dtype=np.float32)
        embedded = time.perf_counter()
        rows, cosines = version.index.search(vector, k)
        name = version.bank.name
        self.metrics.retrieval_duration.labels(name, "embed").observe(embedded - started)
        self.metrics.retrieval_duration.labels(name, "search").observe(time.perf_counter() - embedded)
        return rows, cosines, own_cosines

    async def reload(self, name: str, *, trigger: LoadTrigger = LoadTrigger.API) -> ServedBank:
        """Read the bank's file again and serve it: new texts embedded, the rest reused, swapped in one step.

        A client that goes away does not stop it: the reload finishes (and swaps) on its own.

        Raises:
            BankNotFound: no bank has that name (404).
            InvalidBankFile: the file cannot be read or a line is bad; the old version stays served (422).
            NotReady: the bank's first load is not done, or the service is shutting down (503).
            BackendError: the encoder failed on a new text; the old version stays served.
        """
        served = self.served(name)
        task = asyncio.create_task(self._reload(served, trigger), name=f"reload bank {name}")
        self._reloads.add(task)
        task.add_done_callback(_forget(self._reloads))
        return await asyncio.shield(task)

    async def reload_all(self, trigger: LoadTrigger) -> None:
        """Reload every bank in turn (SIGHUP); each outcome is logged and kept in its ``last_load``."""
        for name in self.banks:
            with contextlib.suppress(Exception):  # logged by the reload; the other banks still reload
                await self.reload(name, trigger=trigger)

    async def _reload(self, served: ServedBank, trigger: LoadTrigger) -> ServedBank:
        async with served.lock:
            if served.current is None and served.state is not BankState.FAILED:
                raise NotReady(f"bank: {served.describe()}; it can be reloaded once its first load is done")
            loop = asyncio.get_running_loop()
            started = time.perf_counter()
            served.reloading = True
            try:
                version = await loop.run_in_executor(self._embedding_thread, self._next_version, served)
            except EmbeddingStopped:
                raise NotReady("the service is shutting down") from None
            except BankError as e:
                self._failed(served, trigger, str(e), started)
                raise InvalidBankFile(str(e)) from None
            except Exception as e:  # whatever failed is recorded and logged; the old version stays
                self._failed(served, trigger, f"{type(e).__name__}: {e}", started, error=e)
                raise
            finally:
                served.reloading = False
            self._swap(served, version, trigger)
            logger.info(
                "bank reloaded bank=%s trigger=%s version=%s responses=%d embedded=%d reused=%d seconds=%.2f",
                served.name, trigger.value, version.version[:12], version.bank.size, version.embedded,
                version.reused, version.seconds,
            )  # fmt: skip
        return served

    def _next_version(self, served: ServedBank) -> BankVersion:
        """The file read again and its version built beside the served one; blocking."""
        bank = self.builder.read(served.name, served.path)
        known = None if served.current is None else served.current.vectors
        return self.builder.build(bank, known, read_at=now(), bulk=False)

    def _swap(self, served: ServedBank, version: BankVersion, trigger: LoadTrigger) -> None:
        """Serve ``version`` from now on (on the event loop), and record the load."""
        served.current = version  # the one step: requests that took the old version finish on it
        served.state, served.error, served.embedded = BankState.READY, None, version.bank.size
        served.last_load = LoadRecord(
            trigger, now(), True, version.seconds, embedded=version.embedded, reused=version.reused
        )
        name, m = served.name, self.metrics
        m.bank_responses.labels(name).set(version.bank.size)
        m.bank_embedded.labels(name).set(version.bank.size)
        m.bank_ready.labels(name).set(1)
        m.bank_version.labels(name).info({"version": version.version})
        m.bank_loads.labels(name, trigger.value, "ok").inc()
        m.bank_last_load.labels(name, "ok").set(time.time())
        m.bank_embedded_texts.labels(name).inc(version.embedded)
        m.bank_reused_texts.labels(name).inc(version.reused)

    def _failed(
        self,
        served: ServedBank,
        trigger: LoadTrigger,
        message: str,
        started: float,
        *,
        error: BaseException | None = None,
    ) -> None:
        """Record a failed load (on the event loop); a bank with no version served becomes ``failed``."""
        served.last_load = LoadRecord(trigger, now(), False, time.perf_counter() - started, error=message)
        if served.current is None:
            served.state, served.error = BankState.FAILED, message
        self.metrics.bank_loads.labels(served.name, trigger.value, "failed").inc()
        self.metrics.bank_last_load.labels(served.name, "failed").set(time.time())
        logger.error("bank load failed bank=%s trigger=%s error=%s", served.name, trigger.value, message,
                     exc_info=error)  # fmt: skip

    async def _embed_all(self) -> None:
        """Each bank's first version in turn on the embedding thread; a failed bank is logged, others load."""
        loop = asyncio.get_running_loop()
        for served in self.banks.values():
            started = time.perf_counter()
            served.state = BankState.EMBEDDING
            try:
                version = await loop.run_in_executor(self._embedding_thread, self._first_version, served)
            except EmbeddingStopped:
                return
            except Exception as e:  # whatever failed, the bank is reported, never silently missing
                self._failed(served, LoadTrigger.START, f"{type(e).__name__}: {e}", started, error=e)
                continue
            self._swap(served, version, LoadTrigger.START)
            source = "cache" if version.embedded == 0 else "computed"
            self.metrics.bank_load.labels(served.name, source).set(version.seconds)
            logger.info(
                "bank ready bank=%s responses=%d source=%s embedded=%d seconds=%.2f memory_mb=%.1f cache=%s",
                served.name, version.bank.size, source, version.embedded, version.seconds,
                version.index.vectors.nbytes / 1e6, self.builder.cache_path(version.bank),
            )  # fmt: skip
        self.encoder.release_bulk()
        if self.ready:
            logger.info("banks ready banks=%d responses=%d", len(self.banks), self._responses())

    def _first_version(self, served: ServedBank) -> BankVersion:
        """The version of the file read at start: vectors from the cache, else computed; blocking."""
        return self.builder.build(
            served.first, None, read_at=self.read_at, bulk=True, progress=_Progress(self.metrics, served)
        )

    def _responses(self) -> int:
        return sum(served.bank.size for served in self.banks.values())

    async def close(self) -> None:
        """Stop the embedding (at its next call), the reloads, and drop the encoder."""
        self._stop.set()
        for task in [self._task, *self._reloads]:
            if task is not None:
                task.cancel()
                # Each only waits on the embedding thread: it ends at once, never left pending.
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._embedding_thread.shutdown(wait=False, cancel_futures=True)
        self.encoder.close()


def _forget(tasks: set[asyncio.Task[ServedBank]]) -> Callable[[asyncio.Task[ServedBank]], None]:
    """A done callback: drop the task from ``tasks`` and mark its error retrieved (its caller may be gone)."""

    def done(task: asyncio.Task[ServedBank]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()

    return done


class _Progress:
    """Counts a bank's embedded responses for the metric, and logs each tenth."""

    def __init__(self, metrics: Metrics, served: ServedBank) -> None:
        self.served = served
        self.gauge = metrics.bank_embedded.labels(served.name)
        self.logged = 0

    def __call__(self, done: int) -> None:
        served, size = self.served, self.served.first.size
        served.embedded = done
        self.gauge.set(done)
        step = done * PROGRESS_STEPS // size
        if step > self.logged and done < size:
            self.logged = step
            logger.info("bank embedding bank=%s embedded=%d of %d", served.name, done, size)
