"""Step 1 of a ranking request: which candidates it ranks, decided once.

A request's candidates are its own, then (when it names a bank) the bank's nearest responses with
their retrieval cosines and hubness; each gets its mask reason (an action the intent's guidelines
do not allow, a repeat of a turn) and whether it is scored at all (a hard-masked one is not). The
steps after this one read the candidates from here and never go back to the bank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dialogue_ranker.serving.banks import BankSet
from dialogue_ranker.serving.errors import UnknownBank
from dialogue_ranker.serving.guidelines import Guidelines, MaskReason
from dialogue_ranker.serving.rank_query import Candidate, MaskMode, RankQuery
from dialogue_ranker.serving.ranking.steps import Candidates
from dialogue_ranker.serving.repeats import repeats


class CandidateGatherer:
    """Decides a request's candidates: its own, its bank's nearest responses, and their masks."""

    def __init__(self, *, guidelines: Guidelines, banks: BankSet | None, mask_repeats: bool) -> None:
        self.guidelines = guidelines
        #: The service's response banks (shared by every served model), None when it serves none.
        self.banks = banks
        self.mask_repeats = mask_repeats

    async def gather(self, query: RankQuery) -> Candidates:
        """The request's candidates with their mask reasons.

        Raises:
            UnknownBank: the request names a bank the service does not serve.
            NotReady: the bank's vectors are not ready yet.
            UnknownIntent: the intent is not in the guidelines.
        """
        candidates = await self._with_bank(query)
        reasons = self._mask_reasons(query, candidates)
        scored = [i for i, reason in enumerate(reasons) if reason is None or query.mask_mode is MaskMode.SOFT]
        return Candidates(candidates, reasons, scored)

    async def _with_bank(self, query: RankQuery) -> list[Candidate]:
        """The request's own candidates, then its bank's nearest responses (its own alone without a bank)."""
        if query.bank is None:
            return list(query.candidates)
        if self.banks is None:
            raise UnknownBank(query.bank, [])
        # The request's own candidates need their cosine with the query only when it enters the score.
        own = [c.text for c in query.candidates] if self.banks.fusion.cosine_weight > 0 else []
        retrieved, own_cosines = await self.banks.retrieve(
            query.bank, query.turns, k=query.retrieve_k, explicit=len(query.candidates), own=own
        )
        mine = list(query.candidates)
        if own:
            mine = [replace(c, retrieval_score=cos) for c, cos in zip(mine, own_cosines, strict=True)]
        drawn = [
            Candidate(
                r.entry.id, r.entry.text, r.entry.generator, r.entry.action, query.bank, r.cosine, r.hubness
            )
            for r in retrieved
        ]
        return [*mine, *drawn]

    def _mask_reasons(self, query: RankQuery, candidates: Sequence[Candidate]) -> list[MaskReason | None]:
        if query.intent is not None:
            self.guidelines.check_intent(query.intent)  # an unknown intent is an error in every mode
        reasons: list[MaskReason | None] = [None] * len(candidates)
        if query.mask_mode is MaskMode.OFF:
            return reasons
        if query.intent is not None:
            reasons = [self.guidelines.mask_reason(query.intent, c.action) for c in candidates]
        if self.mask_repeats:
            said = repeats((t.text for t in query.turns), [c.text for c in candidates])
            reasons = [
                r or (MaskReason.REPEATS_A_TURN if s else None) for r, s in zip(reasons, said, strict=True)
            ]
        return reasons
