"""The service's request and feedback logs: what the ranker and ``POST /v1/feedback`` call.

:meth:`RequestLogs.ranked` is called once per ranked request, by the ranker, where the request,
its candidates (a bank's included, with their texts) and the answer are all known; it decides
the sample, remembers the request's ids for feedback and queues the line, and returns at once.
:meth:`RequestLogs.feedback` checks a judgement against the requests remembered and queues its
line. Both lines are written by :class:`~.writer.LineWriter` on its own thread.
"""

from __future__ import annotations

import functools
import random
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from dialogue_ranker.serving.errors import Overloaded, UnknownCandidate
from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.rank_query import Candidate, RankQuery, RankResult
from dialogue_ranker.serving.request_logs.files import check_writable
from dialogue_ranker.serving.request_logs.lines import FEEDBACK, REQUESTS, feedback_line, request_line
from dialogue_ranker.serving.request_logs.recent import RecentRequests
from dialogue_ranker.serving.request_logs.writer import LineWriter
from dialogue_ranker.serving.settings import LogsSettings

#: How many of a request's candidate ids an unknown-candidate message lists.
LISTED_IDS = 10


class LogsError(Exception):
    """The logs directory (``--logs.dir``) cannot be made or written."""


def check_logs(settings: LogsSettings) -> None:
    """Refuse a logs directory that cannot be written, before the service starts (nothing when off).

    Raises:
        LogsError: ``settings.dir`` cannot be made or written.
    """
    if settings.dir is not None:
        try:
            check_writable(settings.dir)
        except OSError as e:
            raise LogsError(f"--logs.dir {settings.dir}: cannot be written ({type(e).__name__}: {e})") from e


class RequestLogs:
    """Request lines (sampled), feedback lines, and the recent requests feedback is checked against."""

    def __init__(self, settings: LogsSettings, directory: Path, metrics: Metrics) -> None:
        self.texts = settings.texts
        self.sample = settings.sample
        self.metrics = metrics
        self.recent = RecentRequests(settings.recent_requests)
        self.writer = LineWriter(
            directory,
            max_bytes=settings.max_bytes,
            max_files=settings.max_files,
            queue_lines=settings.queue_lines,
            metrics=metrics,
        )
        self._random = random.Random()

    @classmethod
    def start(cls, settings: LogsSettings, metrics: Metrics) -> RequestLogs | None:
        """The started logs, or None when ``settings.dir`` is not set. Blocks (makes the directory).

        Raises:
            LogsError: the directory cannot be made or written.
        """
        if settings.dir is None:
            return None
        check_logs(settings)
        logs = cls(settings, settings.dir, metrics)
        logs.writer.start()
        return logs

    def ranked(
        self,
        query: RankQuery,
        candidates: Sequence[Candidate],
        reasons: Sequence[MaskReason | None],
        result: RankResult,
    ) -> None:
        """Log a ranked request (when the sample draws it); never blocks, never raises.

        A request the writer has no room for is answered unlogged and counted as dropped.
        """
        if self.sample < 1.0 and self._random.random() >= self.sample:
            return
        request_id = query.request_id or uuid.uuid4().hex
        build = functools.partial(
            request_line, query, candidates, reasons, result,
            request_id=request_id, time_s=time.time(), texts=self.texts,
        )  # fmt: skip
        if self.writer.offer(REQUESTS, build):
            self.recent.add(request_id, [c.id for c in candidates])
        else:
            self.metrics.log_lines_dropped.labels(REQUESTS, "queue_full").inc()

    def feedback(
        self, *, request_id: str, candidate_id: str, label: int | float | None, reward: float | None
    ) -> bool:
        """Log a judgement of one candidate; True when its request is among the recent ones logged here.

        A request not held here (logged longer ago, by another replica or before a restart, or not
        sampled) cannot be checked: its feedback is written all the same, and the reader joins it.

        Raises:
            UnknownCandidate: the request is held and had no candidate ``candidate_id``.
            Overloaded: the writer is behind (nothing was written; retry).
        """
        known = self.recent.candidates(request_id)
        if known is not None and candidate_id not in known:
            self.metrics.feedback.labels("unknown_candidate").inc()
            listed = ", ".join(repr(c) for c in known[:LISTED_IDS])
            more = ", ..." if len(known) > LISTED_IDS else ""
            raise UnknownCandidate(
                f"candidate_id: request {request_id!r} had no candidate {candidate_id!r} "
                f"(its candidates: {listed}{more})"
            )
        matched = known is not None
        build = functools.partial(
            feedback_line, request_id=request_id, candidate_id=candidate_id, label=label, reward=reward,
            matched=matched, time_s=time.time(),
        )  # fmt: skip
        if not self.writer.offer(FEEDBACK, build):
            self.metrics.feedback.labels("overloaded").inc()
            raise Overloaded("feedback: the log writer is behind; retry after the Retry-After seconds")
        self.metrics.feedback.labels("matched" if matched else "unmatched").inc()
        return matched

    def close(self) -> None:
        """Write the lines still queued and close the files. Blocks (for a few seconds at most)."""
        self.writer.close()
