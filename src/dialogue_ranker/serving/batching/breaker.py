"""A circuit breaker per backend, fed by whole batches.

A batch counts as failed only when every pair in it failed after isolation (a poison pair among
healthy ones says nothing about the backend). After ``failure_threshold`` failed batches in a
row the breaker opens: new requests get 503 at once and ``/readyz`` is 503, so the orchestrator
stops sending traffic. After ``cooldown_s`` it is half-open: requests are admitted again, and the
next batch is the trial: a success closes it, a failure opens it for another cooldown. Readiness
in the half-open state is the backend's own probe, so a replica taken out of rotation comes
back by itself.
"""

from __future__ import annotations

import time
from enum import StrEnum

from dialogue_ranker.serving.errors import BackendUnavailable


class BreakerState(StrEnum):
    """Where the breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Consecutive failed batches open it; time half-opens it; a good batch closes it."""

    def __init__(self, *, failure_threshold: int, cooldown_s: float, name: str = "backend") -> None:
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self.name = name
        self.consecutive_failures = 0
        self._opened_at: float | None = None

    @property
    def state(self) -> BreakerState:
        """Closed, open, or half-open once the cooldown has passed."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if time.perf_counter() - self._opened_at >= self.cooldown_s:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def check(self) -> None:
        """Raise while open.

        Raises:
            BackendUnavailable: the breaker is open (503).
        """
        if self.state is BreakerState.OPEN:
            raise BackendUnavailable(f"{self.name} backend keeps failing; circuit breaker open")

    def record(self, *, failed: bool) -> None:
        """Fold in one batch that ran."""
        if not failed:
            self.consecutive_failures = 0
            self._opened_at = None
            return
        self.consecutive_failures += 1
        half_open = self.state is BreakerState.HALF_OPEN
        if half_open or (self.failure_threshold and self.consecutive_failures >= self.failure_threshold):
            self._opened_at = time.perf_counter()
