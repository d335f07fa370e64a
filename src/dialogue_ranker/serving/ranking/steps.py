"""What each step of a ranking request hands the next: its candidates, then their logits.

Plain data, importing neither the banks nor the batching path, so that reading the scores
(:mod:`.reading`) depends on neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.rank_query import Candidate


@dataclass(frozen=True)
class Candidates:
    """A request's candidates (its own, then its bank's), each one's mask reason, and those scored."""

    all: Sequence[Candidate]
    #: Per candidate of ``all``: why it is masked (None: it is not).
    reasons: Sequence[MaskReason | None]
    #: Indices into ``all`` of the candidates scored (every one but the hard-masked), in order.
    scored: Sequence[int]

    @property
    def texts(self) -> list[str]:
        """The scored candidates' texts, in order: what the scorer computes a logit for."""
        return [self.all[i].text for i in self.scored]

    def retrieval_scores(self) -> np.ndarray:
        """The scored candidates' cosines with the query (0 where there is none), float32."""
        return np.asarray([self.all[i].retrieval_score or 0.0 for i in self.scored], dtype=np.float32)

    def hubness(self) -> np.ndarray:
        """The scored candidates' centred hubness (0 for a request's own), float32."""
        return np.asarray([self.all[i].hubness for i in self.scored], dtype=np.float32)


@dataclass(frozen=True)
class Logits:
    """A request's logits, one per scored candidate, and what they cost."""

    logits: np.ndarray
    #: Tokens of the full-context view's sequences, kept or computed (rerank clients' ``usage``).
    input_tokens: int
    #: Tokens of the sequences computed for it (every view; none for the logits the cache kept).
    computed_tokens: int
