"""Admission by time: refuse at once a request whose pairs cannot be scored before its deadline.

The batcher measures how fast its backend works (seconds per real token, an exponentially
weighted mean over backend calls, so it follows the load and the hardware it runs on) and turns
the tokens waiting ahead of a request into an estimated wait. A request whose estimated wait
does not fit in its remaining time (times a margin for estimate error) is refused at once with
429 and a ``Retry-After`` of the seconds after which, with no new arrivals, it would fit: a fast,
truthful refusal instead of a slow 504. Until the first call has been measured no wait can be
estimated, so the batcher holds at most one batch of pairs waiting.
"""

from __future__ import annotations

import math

from service.errors import BackendTimeout, Overloaded

#: Weight of the newest call in the running mean: about the last 10 calls count.
EWMA_WEIGHT = 0.2


class ServiceRate:
    """Running estimate of a backend's seconds per token and tokens per pair."""

    def __init__(self, *, weight: float = EWMA_WEIGHT) -> None:
        self.weight = weight
        self.seconds_per_token: float | None = None
        self.tokens_per_pair: float | None = None

    def observe(self, *, pairs: int, tokens: int, seconds: float) -> None:
        """Fold in one backend call of ``pairs`` pairs holding ``tokens`` real tokens."""
        if pairs <= 0 or tokens <= 0 or seconds <= 0:
            return
        self.seconds_per_token = self._mix(self.seconds_per_token, seconds / tokens)
        self.tokens_per_pair = self._mix(self.tokens_per_pair, tokens / pairs)

    def seconds_for(self, *, tokens: int = 0, pairs: int = 0) -> float | None:
        """Estimated backend time for ``tokens`` tokens plus ``pairs`` pairs of unknown length."""
        if self.seconds_per_token is None or self.tokens_per_pair is None:
            return None
        return (tokens + pairs * self.tokens_per_pair) * self.seconds_per_token

    def _mix(self, old: float | None, new: float) -> float:
        return new if old is None else old + self.weight * (new - old)


def admit(*, wait_s: float | None, remaining_s: float, margin: float, what: str) -> None:
    """Refuse a request that cannot be served in time.

    Args:
        wait_s: estimated seconds until its pairs are scored (None: not measured yet).
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
    if wait_s is None or wait_s <= budget:
        return
    retry_after = max(1, math.ceil(wait_s - budget))
    raise Overloaded(
        f"{what}: estimated wait {wait_s:.2f} s does not fit the {budget:.2f} s this request has left",
        retry_after_s=retry_after,
    )
