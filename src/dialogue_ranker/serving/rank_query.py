"""What a ranking request and its answer are, as the ranker sees them: plain dataclasses.

One mapping at the API boundary: the API's ``situations`` (as in SUGAR and the ranking-data
files) are the situational *statements* here and in everything the ranker calls (the logit
cache, the encoders); the answer's ``statements_used`` indexes them.

The API layer maps its schemas to a :class:`RankQuery` and a :class:`RankResult` back; the ranker
(:mod:`dialogue_ranker.serving.ranking`) knows nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.tokenization import Turn


class MaskMode(StrEnum):
    """What happens to masked candidates: an action the intent's guidelines do not allow, a repeat."""

    HARD = "hard"  # removed from the ranking, listed under ``masked``
    SOFT = "soft"  # kept, score multiplied by the soft-mask penalty, flagged
    OFF = "off"  # not masked


@dataclass(frozen=True, slots=True)
class Candidate:
    """One response to rank."""

    id: str
    text: str
    generator: str | None = None
    action: str | None = None
    #: The bank it was retrieved from (None: the request's own), its cosine with the query, and its
    #: centred hubness in the bank (0: a request's own, or a fusion that does not use it).
    bank: str | None = None
    retrieval_score: float | None = None
    hubness: float = 0.0


@dataclass(frozen=True, slots=True)
class RankQuery:
    """A validated ranking request."""

    turns: Sequence[Turn]
    candidates: Sequence[Candidate]
    #: The request's ``situations``, highest priority first: every one reaches the model, in order.
    statements: Sequence[str] = ()
    intent: str | None = None
    mask_mode: MaskMode = MaskMode.HARD
    top_k: int | None = None
    min_score: float | None = None
    #: Cut each candidate to this many tokens (rerank clients' ``max_tokens_per_doc``).
    max_candidate_tokens: int | None = None
    #: A served bank whose nearest responses are ranked too, and how many (None: the service's default).
    bank: str | None = None
    retrieve_k: int | None = None
    #: The request's id (its X-Request-ID) and the conversation it belongs to: only the request
    #: logs read them (feedback names the request by its id; the logs group by the conversation).
    request_id: str | None = None
    conversation_id: str | None = None


@dataclass(frozen=True, slots=True)
class RankedCandidate:
    """A scored candidate."""

    id: str
    score: float
    logit: float
    generator: str | None
    action: str | None
    masked: bool = False
    mask_reason: MaskReason | None = None
    bank: str | None = None
    retrieval_score: float | None = None


@dataclass(frozen=True, slots=True)
class MaskedCandidate:
    """A candidate removed by a hard mask."""

    id: str
    action: str | None
    reason: MaskReason
    bank: str | None = None


@dataclass(frozen=True, slots=True)
class RankResult:
    """The answer to a :class:`RankQuery`."""

    model: str
    ranking: list[RankedCandidate]
    masked: list[MaskedCandidate]
    abstain: bool
    threshold: float
    statements_used: list[int] = field(default_factory=list)
    #: Tokens of its scored candidates' full-context pairs, kept or computed (rerank clients' ``usage``).
    input_tokens: int = 0
    #: Tokens of the sequences computed for it (every view; none for the logits the cache kept).
    computed_tokens: int = 0
