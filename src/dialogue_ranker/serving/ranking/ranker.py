"""The Ranker: one ranking request in three steps, from its candidates to a calibrated ranking.

1. :mod:`.candidates`: the request's own candidates and its bank's nearest responses, with their
   retrieval scores and mask reasons, decided once.
2. :mod:`.scorer`: a logit per scored candidate (context views, logit cache, admission,
   encoding, batching).
3. :mod:`.reading`: fusion, calibration and threshold chosen once per request, then masking,
   abstention and the result.

It takes and returns plain dataclasses; the API layer maps them to its schemas, so this package
knows nothing of HTTP.
"""

from __future__ import annotations

import logging
import time

from opentelemetry import trace

from dialogue_ranker.serving import context_views
from dialogue_ranker.serving.banks import BankSet
from dialogue_ranker.serving.batching import Scorer
from dialogue_ranker.serving.encoding import OffLoopEncoder
from dialogue_ranker.serving.guidelines import Guidelines
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.model_bundle import ModelBundle
from dialogue_ranker.serving.rank_query import RankQuery, RankResult
from dialogue_ranker.serving.ranking.candidates import CandidateGatherer
from dialogue_ranker.serving.ranking.reading import ScoreReader
from dialogue_ranker.serving.ranking.scorer import LogitScorer
from dialogue_ranker.serving.ranking.steps import Candidates
from dialogue_ranker.serving.settings import RankingSettings

logger = logging.getLogger(__name__)


class Ranker:
    """Ranks candidates with one model bundle: candidates, then logits, then their reading."""

    def __init__(
        self,
        *,
        bundle: ModelBundle,
        encoder: OffLoopEncoder,
        batcher: Scorer,
        guidelines: Guidelines,
        metrics: Metrics,
        settings: RankingSettings,
        request_timeout_s: float,
        admission_margin: float = 1.0,
        tracer: trace.Tracer | None = None,
        name: str | None = None,
        banks: BankSet | None = None,
    ) -> None:
        self.bundle = bundle
        self.settings = settings
        self.request_timeout_s = request_timeout_s
        #: The served model's name: a metric label and what requests select it by.
        self.name = name or bundle.name
        self.candidates = CandidateGatherer(
            guidelines=guidelines, banks=banks, mask_repeats=settings.mask_repeats
        )
        self.scorer = LogitScorer(
            encoder=encoder,
            batcher=batcher,
            views=bundle.views if settings.last_turn_view else context_views.ONE_VIEW,
            cache_entries=settings.logit_cache_entries,
            metrics=metrics,
            model=self.name,
            admission_margin=admission_margin,
            tracer=tracer,
        )
        self.reader = ScoreReader(
            model_id=bundle.model_id,
            calibration=bundle.calibration,
            threshold=bundle.threshold,
            bank_fusion=None if banks is None else banks.fusion,
            soft_mask_penalty=settings.soft_mask_penalty,
            metrics=metrics,
            model=self.name,
        )
        fitted_on = None if banks is None else banks.fusion.ranker
        if fitted_on is not None and fitted_on != bundle.model_id:
            logger.warning(
                "bank fusion fitted on another ranker model=%s fitted_on=%s: refit it with "
                "`ranker evaluate-bank --model DIR --write`", bundle.model_id, fitted_on,
            )  # fmt: skip

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
        return self.reader.result(query, candidates, logits)

    def _log_text(self, query: RankQuery, candidates: Candidates) -> None:
        """The request's text in the log, only when ``ranking.log_request_text`` asks for it."""
        if self.settings.log_request_text:
            logger.info(
                "rank request turns=%r statements=%r candidates=%r",
                [t.text for t in query.turns], list(query.statements), [c.text for c in candidates.all],
            )  # fmt: skip
