"""One log line per failed batch, and a traceback at most once per interval.

A backend that fails on every call must not flood the logs (thousands of tracebacks a minute
bury everything else and cost CPU), yet the first traceback is what an operator needs.
"""

from __future__ import annotations

import logging
import time


class FailureLog:
    """Logs failures of one model's backend calls; tracebacks are rate-limited."""

    def __init__(self, logger: logging.Logger, *, model: str, traceback_interval_s: float) -> None:
        self.logger = logger
        self.model = model
        self.traceback_interval_s = traceback_interval_s
        self._last_traceback: float | None = None

    def batch_failed(
        self, error: BaseException, *, backend: str, sequences: int, failed_pairs: int, failed_calls: int
    ) -> None:
        """One line for a batch in which some backend calls failed."""
        now = time.perf_counter()
        with_traceback = (
            self._last_traceback is None or now - self._last_traceback >= self.traceback_interval_s
        )
        if with_traceback:
            self._last_traceback = now
        self.logger.error(
            "batch failed model=%s backend=%s sequences=%d failed_sequences=%d failed_calls=%d error=%s: %s",
            self.model,
            backend,
            sequences,
            failed_pairs,
            failed_calls,
            type(error).__name__,
            error,
            exc_info=error if with_traceback else None,
        )
