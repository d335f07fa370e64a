"""Request and response schemas of ``POST /rank``.

Size limits are made by :mod:`.limits` (shared with the rerank routes): the module-level request
class carries the default limits; :func:`build_rank_request` makes the subclass with the
configured ones (so the OpenAPI schema shows the limits actually enforced).
Plain strings are accepted for the context (one user turn) and for candidates; they are turned
into objects before validation, so error paths always read like ``candidates.2.text``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from dialogue_ranker.serving.api import limits as sizes
from dialogue_ranker.serving.api.limits import DEFAULTS
from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.ranking import Candidate, MaskMode, RankQuery, RankResult
from dialogue_ranker.serving.settings import LimitsSettings
from dialogue_ranker.serving.text_constraints import Name
from dialogue_ranker.serving.tokenization import DEFAULT_SPEAKER, Turn


class TurnIn(BaseModel):
    """One turn of the conversation."""

    model_config = ConfigDict(extra="forbid")

    speaker: str = Field(DEFAULT_SPEAKER, max_length=64, description="Who spoke, e.g. user or agent.")
    text: str = sizes.text(DEFAULTS.max_text_chars)


class CandidateIn(BaseModel):
    """One response to rank."""

    model_config = ConfigDict(extra="forbid")

    id: Name | None = Field(None, description="Unique in the request; defaults to the position.")
    text: str = sizes.text(DEFAULTS.max_text_chars)
    generator: Name | None = Field(None, description="Which generator proposed it (echoed, metrics).")
    action: Name | None = Field(None, description="Agent action it performs; none: a plain reply.")


def _turns_from_string(value: Any) -> Any:
    return [{"speaker": DEFAULT_SPEAKER, "text": value}] if isinstance(value, str) else value


def integral_floats_as_ints(value: Any) -> Any:
    """A number without a fraction as the int it is: 3.0 is a JSON Schema ``integer`` too.

    The count fields are strict (true, "3" and 3.5 are refused); this runs before them, so a client
    whose numbers are floats is not refused a count the published schema allows.
    """
    return int(value) if isinstance(value, float) and value.is_integer() else value


def texts_as_objects(value: Any) -> Any:
    """A list's plain strings as ``{"text": ...}`` objects (candidates, rerank documents)."""
    if isinstance(value, list):
        return [{"text": v} if isinstance(v, str) else v for v in value]
    return value


_BANK_DESCRIPTION = (
    "A served bank (GET /v1/banks): its responses nearest the context are ranked too, after the "
    "request's own candidates, each with the bank's id."
)
_RETRIEVE_K_DESCRIPTION = (
    "With a bank: how many of its responses to rank (default: the service's banks.retrieve-k, at most "
    "the candidate limit less the request's own candidates); the request's own candidates plus this "
    "stay within the candidate limit."
)
_CANDIDATES_DESCRIPTION = "Objects or plain strings; may be empty (or left out) when a bank is named."
_CONTEXT_DESCRIPTION = "The conversation, oldest turn first, or one string (one user turn)."
SITUATIONS_DESCRIPTION = "Situational statements (SUGAR), highest priority first."
CONVERSATION_ID_DESCRIPTION = (
    "The conversation this turn belongs to: with request logs on, the lists they make are grouped by it "
    "(held-out splits never cut a conversation); without it each request is its own group."
)


@functools.cache
def limited_turn(chars: int) -> type[TurnIn]:
    """A turn whose text is at most ``chars`` long (one class per limit, shared by every route)."""
    return sizes.with_text_limit(TurnIn, chars, name="LimitedTurn")


def _sized_fields(limits: LimitsSettings) -> dict[str, tuple[Any, Any]]:
    """``/rank``'s size-limited fields under ``limits``."""
    chars = limits.max_text_chars
    candidate = sizes.with_text_limit(CandidateIn, chars, name="LimitedCandidate")
    return {
        "context": (
            Sequence[limited_turn(chars)],  # type: ignore[misc]
            Field(min_length=1, max_length=limits.max_turns, description=_CONTEXT_DESCRIPTION),
        ),
        "situations": (sizes.situations_type(chars), sizes.situations(limits, SITUATIONS_DESCRIPTION)),
        "retrieve_k": (
            int | None,
            Field(None, ge=1, le=limits.max_candidates, strict=True, description=_RETRIEVE_K_DESCRIPTION),
        ),
        "candidates": (
            Sequence[candidate],  # type: ignore[valid-type]
            Field(
                default_factory=list,
                max_length=limits.max_candidates,
                validate_default=True,
                description=_CANDIDATES_DESCRIPTION,
            ),
        ),
    }


class RankRequest(BaseModel):
    """A ranking request: context, optional situations, candidates and/or a bank, guideline intent."""

    model_config = ConfigDict(extra="forbid")
    #: The candidate limit, bank responses included (the configured one in build_rank_request's subclass).
    max_candidates: ClassVar[int] = DEFAULTS.max_candidates

    # The size-limited fields as _sized_fields(DEFAULTS) makes them (the configured subclass's own).
    context: Sequence[TurnIn] = Field(
        min_length=1, max_length=DEFAULTS.max_turns, description=_CONTEXT_DESCRIPTION
    )
    situations: sizes.situations_type(DEFAULTS.max_text_chars) = sizes.situations(  # type: ignore[valid-type]
        DEFAULTS, SITUATIONS_DESCRIPTION
    )
    # Declared before the candidates: the candidates' check reads them (fields validate in order).
    bank: Name | None = Field(None, description=_BANK_DESCRIPTION)
    retrieve_k: int | None = Field(
        None, ge=1, le=DEFAULTS.max_candidates, strict=True, description=_RETRIEVE_K_DESCRIPTION
    )
    candidates: Sequence[CandidateIn] = Field(
        default_factory=list,
        max_length=DEFAULTS.max_candidates,
        validate_default=True,
        description=_CANDIDATES_DESCRIPTION,
    )
    intent: Name | None = Field(None, description="Customer intent (ABCD subflow): turns on masking.")
    model: Name | None = Field(
        None, description="A served model's name or alias (GET /v1/models); default: the first."
    )
    mask_mode: MaskMode = Field(MaskMode.HARD, description="hard: remove, soft: penalise and flag, off.")
    conversation_id: Name | None = Field(None, description=CONVERSATION_ID_DESCRIPTION)
    # Strict: JSON true is not 1, and 0 or "yes" is not a boolean (the schema says so too).
    top_k: int | None = Field(
        None, ge=1, strict=True, description="Return at most this many ranked candidates."
    )
    min_score: float | None = Field(
        None, ge=0.0, le=1.0, strict=True, description="Abstention threshold override."
    )
    select_statements: bool = Field(
        True,
        strict=True,
        deprecated=True,
        description="Deprecated, ignored (removed in the next release): every situation reaches the model.",
    )

    _context_from_string = field_validator("context", mode="before")(_turns_from_string)
    _candidates_from_strings = field_validator("candidates", mode="before")(texts_as_objects)
    _counts_integral = field_validator("retrieve_k", "top_k", mode="before")(integral_floats_as_ints)

    @field_validator("retrieve_k")
    @classmethod
    def _k_with_a_bank(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("bank") is None:
            raise ValueError("retrieve_k needs a bank")
        return value

    @field_validator("candidates")
    @classmethod
    def _candidates_or_bank(cls, value: Sequence[CandidateIn], info: ValidationInfo) -> Sequence[CandidateIn]:
        if "bank" not in info.data:  # the bank itself was invalid: its own error says so
            return value
        if not value and info.data["bank"] is None:
            raise ValueError("no candidates and no bank: send candidates, a bank (GET /v1/banks) or both")
        k = info.data.get("retrieve_k")
        if k is not None and len(value) + k > cls.max_candidates:
            raise ValueError(
                f"{len(value)} candidates and retrieve_k {k} make {len(value) + k}, over the limit of "
                f"{cls.max_candidates}"
            )
        return value

    @field_validator("candidates")
    @classmethod
    def _ids_unique(cls, value: Sequence[CandidateIn]) -> Sequence[CandidateIn]:
        seen: set[str] = set()
        for position, candidate in enumerate(value):
            cid = candidate.id if candidate.id is not None else str(position)
            if cid in seen:
                raise ValueError(f"duplicate candidate id {cid!r} at position {position}")
            seen.add(cid)
        return value

    def to_query(self, *, request_id: str | None = None) -> RankQuery:
        """The ranker's view of this request (ids filled in), named ``request_id`` in the logs."""
        return RankQuery(
            turns=[Turn(t.speaker, t.text) for t in self.context],
            statements=list(self.situations),
            candidates=[
                Candidate(
                    id=c.id if c.id is not None else str(i),
                    text=c.text,
                    generator=c.generator,
                    action=c.action,
                )
                for i, c in enumerate(self.candidates)
            ],
            intent=self.intent,
            mask_mode=self.mask_mode,
            top_k=self.top_k,
            min_score=self.min_score,
            bank=self.bank,
            retrieve_k=self.retrieve_k,
            request_id=request_id,
            conversation_id=self.conversation_id,
        )


def build_rank_request(limits: LimitsSettings) -> type[RankRequest]:
    """A :class:`RankRequest` subclass whose constraints are the configured limits."""
    model = sizes.limited(RankRequest, _sized_fields(limits), name="LimitedRankRequest")
    model.max_candidates = limits.max_candidates
    return model


class RankedCandidateOut(BaseModel):
    """A scored candidate, best first in ``ranking``."""

    id: str
    score: float = Field(description="Calibrated P(appropriate) in [0, 1] (soft-masked: times the penalty).")
    logit: float = Field(
        description="The model's raw output, the calibration's input (with the model's last-turn view, a "
        "multi-turn request's full-context and last-turn logits averaged; with a bank, fused with "
        "retrieval_score, less a bank response's hubness, as the retrieval encoder's fusion says)."
    )
    generator: str | None = None
    action: str | None = None
    masked: bool = Field(
        False, description="Soft mask mode: a guideline mask or a repeated turn (mask_reason)."
    )
    mask_reason: MaskReason | None = None
    bank: str | None = Field(None, description="The bank it was drawn from; null for the request's own.")
    retrieval_score: float | None = Field(
        None,
        description="A bank response's cosine with the request's retrieval query; with a bank whose fusion "
        "weighs it, the request's own candidates' too (null otherwise).",
    )


class MaskedOut(BaseModel):
    """A candidate removed by a hard mask (a guideline, or a repeated turn)."""

    id: str
    action: str | None
    reason: MaskReason
    bank: str | None = Field(None, description="The bank it was drawn from; null for the request's own.")


class RankResponse(BaseModel):
    """The ranking of one request."""

    request_id: str = Field(
        description="The request's X-Request-ID (the client's, or one the service gave it): what "
        "POST /v1/feedback names it by."
    )
    model: str = Field(description="name@version of the model bundle.")
    ranking: list[RankedCandidateOut]
    masked: list[MaskedOut]
    abstain: bool = Field(description="True when no candidate reaches the threshold.")
    threshold: float
    statements_used: list[int] = Field(
        description="Indices of the situations given to the model, in order: every one of them."
    )

    @classmethod
    def from_result(cls, result: RankResult, *, request_id: str) -> RankResponse:
        """Map the ranker's result."""
        return cls(
            request_id=request_id,
            model=result.model,
            ranking=[RankedCandidateOut.model_validate(r, from_attributes=True) for r in result.ranking],
            masked=[MaskedOut.model_validate(m, from_attributes=True) for m in result.masked],
            abstain=result.abstain,
            threshold=result.threshold,
            statements_used=result.statements_used,
        )
