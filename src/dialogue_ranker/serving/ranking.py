"""The Ranker: one ranking request from statements to a calibrated, masked ranking.

Steps: a bank's nearest responses added to the candidates (when the request names a bank) ->
guideline check -> admission (will it finish before its deadline?) -> statement
selection (when the bundle has a selector) -> pair encoding (off the event loop) -> batching
with other requests' pairs -> for a bank request, each logit fused with its retrieval cosine
(:mod:`dialogue_ranker.serving.fusion`) -> calibration -> masking -> abstention. It takes and
returns plain dataclasses; the API layer maps them to its schemas, so this module knows nothing
of HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from opentelemetry import trace

from dialogue_ranker.serving import context_views, tracing
from dialogue_ranker.serving.banks import BankSet
from dialogue_ranker.serving.batching import Scorer
from dialogue_ranker.serving.batching.admission import Backlog, admit
from dialogue_ranker.serving.batching.backend_calls import Encoded
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.encoding import OffLoopEncoder
from dialogue_ranker.serving.errors import BackendTimeout, UnknownBank
from dialogue_ranker.serving.fusion import Fusion
from dialogue_ranker.serving.guidelines import Guidelines, MaskReason
from dialogue_ranker.serving.logit_cache import Kept, LogitCache
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.model_bundle import ModelBundle
from dialogue_ranker.serving.rank_query import (
    Candidate,
    MaskedCandidate,
    MaskMode,
    RankedCandidate,
    RankQuery,
    RankResult,
)
from dialogue_ranker.serving.repeats import repeats
from dialogue_ranker.serving.selection import StatementSelector
from dialogue_ranker.serving.settings import RankingSettings
from dialogue_ranker.serving.tokenization import Turn

logger = logging.getLogger(__name__)


#: Each view's candidates: their cache key and what the cache keeps under it (None: to compute).
Known = list[list[tuple[bytes, Kept | None]]]


def _misses(known: Known) -> int:
    """How many logits of a request the cache does not hold."""
    return sum(kept is None for entries in known for _, kept in entries)


class Ranker:
    """Ranks candidates with one model bundle."""

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
        selector: StatementSelector | None = None,
        admission_margin: float = 1.0,
        tracer: trace.Tracer | None = None,
        name: str | None = None,
        banks: BankSet | None = None,
    ) -> None:
        self.bundle = bundle
        self.encoder = encoder
        self.batcher = batcher
        self.guidelines = guidelines
        self.metrics = metrics
        self.settings = settings
        self.request_timeout_s = request_timeout_s
        self.selector = selector
        self.admission_margin = admission_margin
        self.backlog = Backlog()
        self.cache = LogitCache(settings.logit_cache_entries)
        self.tracer = tracer or trace.NoOpTracer()
        #: The served model's name: a metric label and what requests select it by.
        self.name = name or bundle.name
        #: The service's response banks (shared by every served model), None when it serves none.
        self.banks = banks
        fitted_on = None if banks is None else banks.fusion.ranker
        if fitted_on is not None and fitted_on != bundle.model_id:
            logger.warning(
                "bank fusion fitted on another ranker model=%s fitted_on=%s: refit it with "
                "`ranker evaluate-bank --model DIR --write`", bundle.model_id, fitted_on,
            )  # fmt: skip

    async def rank(self, query: RankQuery, *, timeout_s: float | None = None) -> RankResult:
        """Score, mask and order the query's candidates.

        Args:
            query: the request.
            timeout_s: the client's deadline, capped by the configured request timeout.

        Raises:
            UnknownBank: the request names a bank the service does not serve.
            NotReady: the bank's vectors are not ready yet.
            UnknownIntent: the intent is not in the guidelines.
            Overloaded: the request would not be scored before its deadline, or a queue is full.
            BackendTimeout: scores did not come back before the deadline.
            BackendError, BackendUnavailable: the backend failed.
        """
        timeout = self.request_timeout_s if timeout_s is None else min(timeout_s, self.request_timeout_s)
        deadline = time.perf_counter() + timeout
        query = await self._with_bank(query)
        reasons = self._mask_reasons(query)
        if self.settings.log_request_text:
            logger.info(
                "rank request turns=%r situations=%r candidates=%r",
                [t.text for t in query.turns],
                list(query.situations),
                [c.text for c in query.candidates],
            )
        scored = [i for i, reason in enumerate(reasons) if reason is None or query.mask_mode is MaskMode.SOFT]
        texts = [query.candidates[i].text for i in scored]
        weights = self.bundle.views if self.settings.last_turn_view else context_views.ONE_VIEW
        views = context_views.views(query.turns, weights)
        # Without statement selection the statements are known now, and so is what the cache holds:
        # admission then counts only the logits still to compute.
        known = None if self._selects(query) else self._cached(views, query.situations, texts, query)
        pending = len(texts) * len(views) if known is None else _misses(known)
        ranker_s, selector_s = self._work(query, pending)
        admit(
            wait_s=self.backlog.seconds + ranker_s + selector_s,
            remaining_s=deadline - time.perf_counter(),
            margin=self.admission_margin,
            what="ranking",
        )
        try:
            async with asyncio.timeout(timeout):
                with self.backlog.hold(ranker_s):
                    with (
                        self.backlog.hold(selector_s),
                        self.tracer.start_as_current_span("select statements") as span,
                    ):
                        statements_used = await self._statements(query, deadline)
                        span.set_attributes(
                            {
                                tracing.STATEMENTS_GIVEN: len(query.situations),
                                tracing.STATEMENTS_KEPT: len(statements_used),
                            }
                        )
                    self.metrics.backlog.labels(self.name).set(self.backlog.seconds)
                    statements = [query.situations[i] for i in statements_used]
                    if known is None:
                        known = self._cached(views, statements, texts, query)
                    with self.tracer.start_as_current_span("encode pairs") as span:
                        pairs = await self._encode_missing(views, known, statements, texts, query)
                        span.set_attributes(
                            {tracing.PAIRS: len(pairs), tracing.TOKENS: sum(len(p) for p in pairs)}
                        )
                    computed = await self.batcher.score(pairs, deadline=deadline) if pairs else np.empty(0)
                    kept = self._fill(known, computed, [n for pair in pairs for n in pair.output_tokens()])
                    logits = context_views.combine(
                        np.asarray([k.logit for k in kept], dtype=np.float32), len(views), weights
                    )
                    logits = self._fused(query, scored, logits)
        except TimeoutError:
            raise BackendTimeout(f"no scores within {timeout:g} s") from None
        finally:
            self.metrics.backlog.labels(self.name).set(self.backlog.seconds)
        # The full-context view comes first: its pairs are the request's input as the client sent it.
        tokens = (sum(k.tokens for k in kept[: len(texts)]), sum(len(pair) for pair in pairs))
        return self._result(query, reasons, scored, logits, statements_used, tokens)

    async def _with_bank(self, query: RankQuery) -> RankQuery:
        """The query with its bank's nearest responses after its own candidates (as is without a bank)."""
        if query.bank is None:
            return query
        if self.banks is None:
            raise UnknownBank(query.bank, [])
        # The request's own candidates need their cosine with the query only when it enters the score.
        own = [c.text for c in query.candidates] if self.banks.fusion.cosine_weight > 0 else []
        retrieved, own_cosines = await self.banks.retrieve(
            query.bank, query.turns, k=query.retrieve_k, explicit=len(query.candidates), own=own
        )
        drawn = [
            Candidate(
                r.entry.id, r.entry.text, r.entry.generator, r.entry.action, query.bank, r.cosine, r.hubness
            )
            for r in retrieved
        ]
        mine = list(query.candidates)
        if own:
            mine = [replace(c, retrieval_score=cos) for c, cos in zip(mine, own_cosines, strict=True)]
        return replace(query, candidates=[*mine, *drawn])

    def _fused(self, query: RankQuery, scored: list[int], logits: np.ndarray) -> np.ndarray:
        """A bank request's logits fused with their candidates' cosines (any other request's as they are)."""
        fusion = self._fusion_of(query)
        if fusion is None or (fusion.cosine_weight == 0 and fusion.hubness_weight == 0):
            return logits
        # A request's own candidates have no cosine when the fusion does not weigh it (never read then).
        cosines = [query.candidates[i].retrieval_score or 0.0 for i in scored]
        hubness = [query.candidates[i].hubness for i in scored]
        return fusion.fuse(
            logits, np.asarray(cosines, dtype=np.float32), np.asarray(hubness, dtype=np.float32)
        )

    def _fusion_of(self, query: RankQuery) -> Fusion | None:
        """The bank fusion a request's scores go through (None: a request without a bank)."""
        return None if query.bank is None or self.banks is None else self.banks.fusion

    def _calibration(self, query: RankQuery) -> tuple[Calibrator, float]:
        """The map and threshold a request's scores are read with: a bank fusion's own, else the bundle's."""
        fusion = self._fusion_of(query)
        if fusion is not None and fusion.calibration is not None and fusion.threshold is not None:
            return fusion.calibration, fusion.threshold
        return self.bundle.calibration, self.bundle.threshold

    def _cached(
        self, views: list[Sequence[Turn]], statements: Sequence[str], texts: list[str], query: RankQuery
    ) -> Known:
        """Each view's candidates: their cache key and what is kept under it (None: to compute)."""
        out = []
        for turns in views:
            prefix = self.cache.prefix_key(turns, statements, query.max_candidate_tokens)
            keys = [self.cache.key(prefix, text) for text in texts]
            out.append([(key, self.cache.get(key)) for key in keys])
        return out

    async def _encode_missing(
        self,
        views: list[Sequence[Turn]],
        known: Known,
        statements: Sequence[str],
        texts: list[str],
        query: RankQuery,
    ) -> list[Encoded]:
        """The sequences of every candidate whose logit is not kept, each view's after the other's."""
        pairs: list[Encoded] = []
        for turns, entries in zip(views, known, strict=True):
            missing = [text for text, (_, kept) in zip(texts, entries, strict=True) if kept is None]
            if missing:
                pairs += await self.encoder.encode(turns, statements, missing, query.max_candidate_tokens)
        return pairs

    def _fill(self, known: Known, computed: np.ndarray, tokens: list[int]) -> list[Kept]:
        """Every view's candidates, one view after another: kept ones, and computed ones (now kept too).

        ``computed`` and ``tokens`` hold a logit and its token count per missing candidate, in order.
        """
        fresh = zip(computed, tokens, strict=True)
        out = []
        for key, kept in (entry for entries in known for entry in entries):
            if kept is None:
                logit, count = next(fresh)
                kept = Kept(float(logit), count)
                self.cache.put(key, kept)
            out.append(kept)
        misses = _misses(known)
        self.metrics.logit_cache.labels(self.name, "hit").inc(len(out) - misses)
        self.metrics.logit_cache.labels(self.name, "miss").inc(misses)
        self.metrics.logit_cache_entries.labels(self.name).set(len(self.cache))
        return out

    def _work(self, query: RankQuery, candidates: int) -> tuple[float, float]:
        """Estimated backend seconds of the request's ranker and selector pairs (0 when unmeasured)."""
        ranker_s = self.batcher.estimated_seconds(candidates) or 0.0
        selector_s = 0.0
        if self.selector is not None and self._selects(query):
            selector_s = self.selector.batcher.estimated_seconds(len(query.situations)) or 0.0
        return ranker_s, selector_s

    def _mask_reasons(self, query: RankQuery) -> list[MaskReason | None]:
        if query.intent is not None:
            self.guidelines.check_intent(query.intent)  # an unknown intent is an error in every mode
        reasons: list[MaskReason | None] = [None] * len(query.candidates)
        if query.mask_mode is MaskMode.OFF:
            return reasons
        if query.intent is not None:
            reasons = [self.guidelines.mask_reason(query.intent, c.action) for c in query.candidates]
        if self.settings.mask_repeats:
            said = repeats((t.text for t in query.turns), [c.text for c in query.candidates])
            reasons = [
                r or (MaskReason.REPEATS_A_TURN if s else None) for r, s in zip(reasons, said, strict=True)
            ]
        return reasons

    def _selects(self, query: RankQuery) -> bool:
        return self.selector is not None and query.select_statements and bool(query.situations)

    async def _statements(self, query: RankQuery, deadline: float) -> list[int]:
        if self.selector is None or not self._selects(query):
            return list(range(len(query.situations)))
        return await self.selector.select(query.turns, query.situations, deadline=deadline)

    def _result(
        self,
        query: RankQuery,
        reasons: list[MaskReason | None],
        scored: list[int],
        logits: np.ndarray,
        statements_used: list[int],
        tokens: tuple[int, int] = (0, 0),
    ) -> RankResult:
        calibration, bundle_threshold = self._calibration(query)
        probabilities = calibration(logits)
        ranking: list[RankedCandidate] = []
        for index, logit, probability in zip(scored, logits, probabilities, strict=True):
            candidate, reason = query.candidates[index], reasons[index]
            score = float(probability)
            if reason is not None:  # soft mode: kept, penalised and flagged
                score *= self.settings.soft_mask_penalty
            ranking.append(
                RankedCandidate(
                    id=candidate.id,
                    score=score,
                    logit=float(logit),
                    generator=candidate.generator,
                    action=candidate.action,
                    masked=reason is not None,
                    mask_reason=reason,
                    bank=candidate.bank,
                    retrieval_score=candidate.retrieval_score,
                )
            )
        ranking.sort(key=lambda r: -r.score)  # stable: ties keep the request's order
        masked = [
            MaskedCandidate(id=c.id, action=c.action, reason=reason, bank=c.bank)
            for c, reason in zip(query.candidates, reasons, strict=True)
            if reason is not None and query.mask_mode is MaskMode.HARD
        ]
        threshold = bundle_threshold if query.min_score is None else query.min_score
        abstain = not ranking or ranking[0].score < threshold
        self._observe(query, reasons, ranking, abstain)
        if query.top_k is not None:
            ranking = ranking[: query.top_k]
        return RankResult(
            model=self.bundle.model_id,
            ranking=ranking,
            masked=masked,
            abstain=abstain,
            threshold=threshold,
            statements_used=statements_used,
            input_tokens=tokens[0],
            computed_tokens=tokens[1],
        )

    def _observe(
        self,
        query: RankQuery,
        reasons: list[MaskReason | None],
        ranking: list[RankedCandidate],
        abstain: bool,
    ) -> None:
        m = self.metrics
        m.candidates.labels(self.name).observe(len(query.candidates))
        for reason in reasons:
            if reason is not None:
                m.masked.labels(self.name, reason.value).inc()
        for entry in ranking:
            m.scores.labels(self.name, m.generator_label(entry.generator)).observe(entry.score)
        if abstain:
            m.abstentions.labels(self.name).inc()
        else:
            m.top1.labels(self.name, m.generator_label(ranking[0].generator)).inc()
