"""Admission by time: refuse at once a request whose candidates cannot be scored before its deadline.

Each batcher measures how fast its backend works (seconds per candidate, an exponentially
weighted mean over backend calls, so it follows the load, the requests' lengths and the
hardware). The ranker's scorer turns a request into backend seconds (the logits the cache does
not hold) and keeps a :class:`Backlog`: the backend seconds of every request admitted and not yet
answered. That sum, not the queue's length, is what a new request waits for (a request admitted
and still encoding will put its sequences ahead of a newer one). A request whose backlog plus own
work does not fit in its remaining time (times a margin for estimate error) is refused before any
encoding with 429 and a ``Retry-After`` of the seconds after which, with no new arrivals, it
would fit: a fast, truthful refusal instead of a slow 504. The estimate is conservative (a call
measured while others run beside it, the batcher's other workers or another served model, counts
their contention as its own), which costs no throughput: the backlog still holds seconds of
work. Until a backend has been measured (the batcher warms it up at start) nothing is refused on
time, and the batcher holds at most about one batch waiting.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from dialogue_ranker.serving.errors import BackendTimeout, Overloaded

#: Weight of the newest call in the running mean: about the last 10 calls count.
EWMA_WEIGHT = 0.2


class ServiceRate:
    """Running estimate of a backend's seconds per candidate (a logit).

    Per candidate, not per token: admission happens before a request is encoded, when its candidate
    count is known and its token count is not.
    """

    def __init__(self, *, weight: float = EWMA_WEIGHT) -> None:
        self.weight = weight
        self.seconds_per_candidate: float | None = None

    def observe(self, *, candidates: int, seconds: float) -> None:
        """Fold in one backend call that computed ``candidates`` logits in ``seconds``."""
        if candidates <= 0 or seconds <= 0:
            return
        new = seconds / candidates
        old = self.seconds_per_candidate
        self.seconds_per_candidate = new if old is None else old + self.weight * (new - old)

    def seconds_for(self, candidates: int) -> float | None:
        """Estimated backend seconds for ``candidates`` logits (None until measured)."""
        return None if self.seconds_per_candidate is None else candidates * self.seconds_per_candidate


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
