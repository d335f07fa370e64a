"""A bounded FIFO of sequences waiting for a batch, with admission per request.

Admission is all-or-nothing: a request's sequences enter together or the request is refused with
:class:`~dialogue_ranker.serving.errors.Overloaded` (429 with Retry-After), so a full queue fails fast instead
of growing everyone's latency. (The sequence bound is the memory guard; admission by time is the
ranker's, see :mod:`serving.batching.admission`.) Sequences whose request was cancelled (client gone,
timeout) or whose deadline has passed are dropped when taken, before they reach a backend.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from opentelemetry.trace import SpanContext

from dialogue_ranker.serving.errors import BackendTimeout, Overloaded
from dialogue_ranker.serving.list_encoding import EncodedList
from dialogue_ranker.serving.tokenization import EncodedPair

#: Why a sequence was dropped unscored: its request was cancelled, or its deadline passed.
CANCELLED = "cancelled"
EXPIRED = "expired"


@dataclass(eq=False, slots=True)
class WorkItem:
    """One sequence (or shared-prefix sequence), the future its logits go to, and its request's deadline."""

    sequence: EncodedPair | EncodedList
    future: asyncio.Future[np.ndarray]
    enqueued_at: float = field(default_factory=time.perf_counter)
    deadline: float | None = None
    #: The request's span (a backend call links to it) and wall-clock times for the queue-wait span.
    context: SpanContext | None = None
    enqueued_ns: int = field(default_factory=time.time_ns)
    started_ns: int | None = None


def drop_reason(item: WorkItem, now: float) -> str | None:
    """Why ``item`` must not be scored (``CANCELLED``/``EXPIRED``), or None when it is live.

    An expired item's waiter gets :class:`BackendTimeout` here, so nothing waits on it.
    """
    if item.future.done():
        return CANCELLED
    if item.deadline is not None and now >= item.deadline:
        item.future.set_exception(BackendTimeout("the request's deadline passed while it was queued"))
        return EXPIRED
    return None


class SequenceQueue:
    """FIFO of :class:`WorkItem` bounded in sequences; event-loop only (not thread-safe)."""

    def __init__(self, *, max_pairs: int) -> None:
        self.max_pairs = max_pairs
        self._items: deque[WorkItem] = deque()
        self._tokens = 0
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def tokens(self) -> int:
        """Tokens of the sequences waiting (before padding)."""
        return self._tokens

    def put_all(self, items: Sequence[WorkItem]) -> None:
        """Admit all of ``items`` or none.

        Raises:
            Overloaded: the queue cannot take them all.
        """
        if len(self._items) + len(items) > self.max_pairs:
            raise Overloaded(
                f"queue full: {len(self._items)} sequences waiting, {len(items)} more would pass "
                f"{self.max_pairs}"
            )
        self._items.extend(items)
        self._tokens += sum(len(item.sequence) for item in items)
        self._changed.set()

    def oldest_enqueued_at(self) -> float | None:
        """When the oldest waiting sequence arrived (perf_counter), or None when empty."""
        return self._items[0].enqueued_at if self._items else None

    async def wait_for_items(self, timeout_s: float | None = None) -> None:
        """Return once a put happens (or at once when non-empty and no timeout is given)."""
        if timeout_s is None and self._items:
            return
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout_s)
        except TimeoutError:
            pass

    def take(
        self, *, max_pairs: int, max_tokens: int, on_drop: Callable[[str], None] | None = None
    ) -> list[WorkItem]:
        """Pop up to ``max_pairs`` live items within ``max_tokens`` (at least one), oldest first.

        Dead items (see :func:`drop_reason`) are popped and reported to ``on_drop``, not returned.
        """
        taken: list[WorkItem] = []
        tokens = 0
        now = time.perf_counter()
        while self._items and len(taken) < max_pairs:
            item = self._items[0]
            size = len(item.sequence)
            if taken and tokens + size > max_tokens:
                break
            self._items.popleft()
            self._tokens -= size
            reason = drop_reason(item, now)
            if reason is not None:
                if on_drop is not None:
                    on_drop(reason)
                continue
            taken.append(item)
            tokens += size
        return taken

    def fail_all(self, error: BaseException) -> None:
        """Fail every waiting item (shutdown)."""
        while self._items:
            item = self._items.popleft()
            if not item.future.done():
                item.future.set_exception(error)
        self._tokens = 0
