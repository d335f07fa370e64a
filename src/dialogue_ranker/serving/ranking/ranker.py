"""The Ranker: one ranking request in three steps, from its candidates to a calibrated ranking.

1. :mod:`.candidates`: the request's own candidates and its bank's nearest responses, with their
   retrieval scores and mask reasons, decided once.
2. :mod:`.scorer`: a logit per scored candidate (context views, logit cache, admission,
   encoding, batching).
3. :mod:`.reading`: fusion, calibration and threshold chosen once per request, then masking,
   abstention and the result.

It takes and returns plain dataclasses; the API layer maps them to its schemas, so this package
knows nothing of HTTP. With request logs on (``--logs.dir``) the ranker hands each ranked request
to them here, the one place where the request, its candidates (a bank's, with their texts) and
the answer are all known; they queue the line and return at once.
:mod:`dialogue_ranker.serving.runtime` builds the three steps of each served model and hands
them to its Ranker.
"""

from __future__ import annotations

import logging
import time

from dialogue_ranker.serving.rank_query import RankQuery, RankResult
from dialogue_ranker.serving.ranking.candidates import CandidateGatherer
from dialogue_ranker.serving.ranking.reading import ScoreReader
from dialogue_ranker.serving.ranking.scorer import LogitScorer
from dialogue_ranker.serving.ranking.steps import Candidates
from dialogue_ranker.serving.request_logs import RequestLogs
from dialogue_ranker.serving.settings import RankingSettings

logger = logging.getLogger(__name__)


class Ranker:
    """Ranks candidates with one model bundle: candidates, then logits, then their reading."""

    def __init__(
        self,
        *,
        candidates: CandidateGatherer,
        scorer: LogitScorer,
        reader: ScoreReader,
        settings: RankingSettings,
        request_timeout_s: float,
        logs: RequestLogs | None = None,
    ) -> None:
        self.candidates = candidates
        self.scorer = scorer
        self.reader = reader
        self.settings = settings
        self.request_timeout_s = request_timeout_s
        #: The request logs (None: off).
        self.logs = logs

    async def rank(self, query: RankQuery, *, timeout_s: float | None = None) -> RankResult:
        """Score, mask and order the query's candidates (its own and its bank's).

        ``timeout_s``: the client's deadline, capped by the configured request timeout.

        Raises:
            UnknownBank, NotReady: the bank is not served, or its vectors are not ready yet.
            UnknownIntent: the intent is not in the guidelines.
            Overloaded: the request would not be scored before its deadline, or a queue is full.
            BackendTimeout, BackendError, BackendUnavailable: the backend failed or was too slow.
        """
        timeout = self.request_timeout_s if timeout_s is None else min(timeout_s, self.request_timeout_s)
        deadline = time.perf_counter() + timeout
        candidates = await self.candidates.gather(query)
        self._log_text(query, candidates)
        logits = await self.scorer.score(
            query.turns,
            query.statements,
            candidates.texts,
            max_candidate_tokens=query.max_candidate_tokens,
            deadline=deadline,
            timeout_s=timeout,
        )
        result = self.reader.result(query, candidates, logits)
        if self.logs is not None:
            self.logs.ranked(query, candidates.all, candidates.reasons, result)
        return result

    def _log_text(self, query: RankQuery, candidates: Candidates) -> None:
        """The request's text in the log, only when ``ranking.log_request_text`` asks for it."""
        if self.settings.log_request_text:
            logger.info(
                "rank request turns=%r statements=%r candidates=%r",
                [t.text for t in query.turns], list(query.statements), [c.text for c in candidates.all],
            )  # fmt: skip
