"""Admission by time: refuse at once a request whose candidates cannot be scored before its deadline.

Each batcher measures how fast its backend works: seconds per candidate over the last dozen or so
backend calls, so it follows the load, the requests' lengths and the hardware. It is a ratio of
running sums (the calls' seconds over their candidates), not a running mean of each call's ratio: a
call of one candidate on a long context (a situated request, a cache that held the rest) weighs as
one candidate, not as much as a call of 32 (a mean of ratios swung twelvefold in the load-test
smoke run, 0.018 to 0.216 s: the likely cause of a CI run's 429 to a 100-candidate request). The
ranker's scorer turns a request into backend seconds (the logits the cache does not hold) and keeps
a :class:`Backlog`: the backend seconds of every request admitted and not yet answered. That sum,
not the queue's length, is what a new request waits for (a request admitted and still encoding will
put its sequences ahead of a newer one). A request whose backlog plus own work does not fit in its
remaining time (times a margin for estimate error) is refused before any encoding with 429 and a
``Retry-After`` of the seconds after which, with no new arrivals, it would fit: a fast, truthful
refusal instead of a slow 504. The estimate is conservative on purpose: a call measured while
others run beside it (the batcher's other workers, another served model) counts their contention as
its own. That margin covers what the backend's seconds leave out: the gateway's own work, and a
batch's one-sequence calls run in turn by one worker. Counting the calls' shared time once instead
(the backlog's joint drain speed) let 504s through
(``benchmarks/results/admission-estimate-2026-12-07-zen3.md``). Until a backend has been measured
(the batcher warms it up at start) nothing is refused on time, and the batcher holds at most about
one batch waiting.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from dialogue_ranker.serving.errors import BackendTimeout, Overloaded

#: Each older call counts (1 - EWMA_WEIGHT) as much as the next in the running sums: about 10 count.
EWMA_WEIGHT = 0.2


class ServiceRate:
    """Running estimate of a backend's seconds per candidate (a logit).

    Per candidate, not per token: admission happens before a request is encoded, when its candidate
    count is known and its token count is not. Thread-safe: the batcher's call threads report to it.
    """

    def __init__(self, *, weight: float = EWMA_WEIGHT) -> None:
        self.weight = weight
        # Exponentially weighted sums of call seconds and of candidates; their ratio is the rate.
        self._seconds = 0.0
        self._candidates = 0.0
        self._lock = threading.Lock()

    @property
    def seconds_per_candidate(self) -> float | None:
        """Call seconds per candidate (None until a call has been measured)."""
        with self._lock:
            return self._seconds / self._candidates if self._candidates > 0 else None

    def observe(self, *, candidates: int, seconds: float) -> None:
        """Fold in one backend call that computed ``candidates`` logits in ``seconds``."""
        if candidates <= 0 or seconds < 0:
            return
        with self._lock:
            self._fold(candidates, seconds)

    def seconds_for(self, candidates: int) -> float | None:
        """Estimated backend seconds for ``candidates`` logits (None until measured)."""
        rate = self.seconds_per_candidate
        return None if rate is None else candidates * rate

    def _fold(self, candidates: int, seconds: float) -> None:
        # Each older call counts (1 - weight) as much as the one after it.
        self._seconds = (1 - self.weight) * self._seconds + seconds
        self._candidates = (1 - self.weight) * self._candidates + candidates


class Backlog:
    """Backend seconds of the requests admitted and not yet answered."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def hold(self, seconds: float) -> Iterator[None]:
        """Count ``seconds`` of work in the backlog while the block runs."""
        self.seconds += seconds
        try:
            yield
        finally:
            self.seconds = max(0.0, self.seconds - seconds)


def admit(*, wait_s: float, remaining_s: float, margin: float, what: str) -> None:
    """Refuse a request that cannot be served in time.

    Args:
        wait_s: estimated seconds until its candidates are scored.
        remaining_s: seconds left to its deadline.
        margin: share of ``remaining_s`` the wait may take.
        what: names the stage in the message.

    Raises:
        BackendTimeout: the deadline has already passed.
        Overloaded: the estimated wait does not fit (429; Retry-After in whole seconds, at least 1).
    """
    if remaining_s <= 0:
        raise BackendTimeout(f"{what}: the request's deadline passed before it was queued")
    budget = remaining_s * margin
    if wait_s <= budget:
        return
    retry_after = max(1, math.ceil(wait_s - budget))
    raise Overloaded(
        f"{what}: estimated wait {wait_s:.2f} s does not fit the {budget:.2f} s this request has left",
        retry_after_s=retry_after,
    )
