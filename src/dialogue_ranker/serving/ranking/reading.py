"""Step 3 of a ranking request: reading its logits into a calibrated, masked ranking.

The way a request's scores are read is chosen once, from whether it names a bank: a bank request's
logits are fused with their retrieval cosines and hubness (:mod:`dialogue_ranker.serving.fusion`)
and read with the fusion's own calibration map and threshold when it carries them; any other
request's logits are read as they are, with the bundle's. Then: calibration -> the soft-mask
penalty -> the order -> abstention (the best score under the threshold) -> ``top_k``. It never
sees a backend: it reads logits and candidates only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.fusion import NO_FUSION, Fusion
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.rank_query import (
    MaskedCandidate,
    MaskMode,
    RankedCandidate,
    RankQuery,
    RankResult,
)
from dialogue_ranker.serving.ranking.steps import Candidates, Logits

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reading:
    """How one request's logits become scores: its fusion, calibration map and threshold."""

    fusion: Fusion
    calibration: Calibrator
    threshold: float

    def scores(self, logits: np.ndarray, candidates: Candidates) -> np.ndarray:
        """The scored candidates' fused logits (the logits as they are when the fusion weighs nothing)."""
        if self.fusion.cosine_weight == 0 and self.fusion.hubness_weight == 0:
            return logits
        # A request's own candidates have no cosine when the fusion does not weigh it (never read then).
        return self.fusion.fuse(logits, candidates.retrieval_scores(), candidates.hubness())


class ScoreReader:
    """Reads a served model's logits: chooses each request's :class:`Reading`, then ranks."""

    def __init__(
        self,
        *,
        model_id: str,
        calibration: Calibrator,
        threshold: float,
        bank_fusion: Fusion | None,
        soft_mask_penalty: float,
        metrics: Metrics,
        model: str,
    ) -> None:
        self.model_id = model_id
        self.calibration = calibration
        self.threshold = threshold
        #: The banks' fusion (None: the service serves no bank).
        self.bank_fusion = bank_fusion
        self.soft_mask_penalty = soft_mask_penalty
        self.metrics = metrics
        self.model = model
        fitted_on = None if bank_fusion is None else bank_fusion.ranker
        if fitted_on is not None and fitted_on != model_id:
            logger.warning(
                "bank fusion fitted on another ranker model=%s fitted_on=%s: refit it with "
                "`ranker evaluate-bank --model DIR --write`", model_id, fitted_on,
            )  # fmt: skip

    def reading(self, query: RankQuery) -> Reading:
        """How ``query``'s logits are read: a bank's fusion (and its own map, if any), else the bundle's."""
        fusion = self.bank_fusion if query.bank is not None and self.bank_fusion is not None else NO_FUSION
        if fusion.calibration is not None and fusion.threshold is not None:
            return Reading(fusion, fusion.calibration, fusion.threshold)
        return Reading(fusion, self.calibration, self.threshold)

    def result(self, query: RankQuery, candidates: Candidates, logits: Logits) -> RankResult:
        """The ranking of ``candidates`` from their logits, with masks, abstention and ``top_k`` applied."""
        reading = self.reading(query)
        fused = reading.scores(logits.logits, candidates)
        probabilities = reading.calibration(fused)
        ranking: list[RankedCandidate] = []
        for index, logit, probability in zip(candidates.scored, fused, probabilities, strict=True):
            candidate, reason = candidates.all[index], candidates.reasons[index]
            score = float(probability)
            if reason is not None:  # soft mode: kept, penalised and flagged
                score *= self.soft_mask_penalty
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
            for c, reason in zip(candidates.all, candidates.reasons, strict=True)
            if reason is not None and query.mask_mode is MaskMode.HARD
        ]
        threshold = reading.threshold if query.min_score is None else query.min_score
        abstain = not ranking or ranking[0].score < threshold
        self._observe(candidates, ranking, abstain)
        if query.top_k is not None:
            ranking = ranking[: query.top_k]
        return RankResult(
            model=self.model_id,
            ranking=ranking,
            masked=masked,
            abstain=abstain,
            threshold=threshold,
            # Every statement reaches the model, in the request's order.
            statements_used=list(range(len(query.statements))),
            input_tokens=logits.input_tokens,
            computed_tokens=logits.computed_tokens,
        )

    def _observe(self, candidates: Candidates, ranking: list[RankedCandidate], abstain: bool) -> None:
        m, name = self.metrics, self.model
        m.candidates.labels(name).observe(len(candidates.all))
        for reason in candidates.reasons:
            if reason is not None:
                m.masked.labels(name, reason.value).inc()
        for entry in ranking:
            m.scores.labels(name, m.generator_label(entry.generator)).observe(entry.score)
        if abstain:
            m.abstentions.labels(name).inc()
        else:
            m.top1.labels(name, m.generator_label(ranking[0].generator)).inc()
