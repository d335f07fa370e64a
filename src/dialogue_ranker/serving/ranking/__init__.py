"""Ranking a request: its candidates, their logits, and the reading of those logits into a ranking.

:class:`Ranker` runs the three steps in order (:mod:`.candidates`, :mod:`.scorer`,
:mod:`.reading`); each is a module with one job and its own tests.
"""

from dialogue_ranker.serving.rank_query import Candidate, MaskMode, RankQuery, RankResult
from dialogue_ranker.serving.ranking.ranker import Ranker

# The request and answer types too: the API layer reads them from here.
__all__ = ["Candidate", "MaskMode", "RankQuery", "RankResult", "Ranker"]
