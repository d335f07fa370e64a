"""Rerank routes in the shapes clients already speak, on the same ranker as ``/rank``.

- ``POST /v2/rerank``: Cohere's v2 shape (``model``, ``query``, ``documents``, ``top_n``,
  ``max_tokens_per_doc``) answered as ``{id, results: [{index, relevance_score}], meta}``.
  The Cohere SDK's ``ClientV2``, LangChain's ``CohereRerank`` and LiteLLM's ``cohere/`` models
  call it.
- ``POST /v1/rerank``: the Jina / vLLM shape (and Cohere's v1 ``Client``), the same request,
  answered with ``model`` and ``usage`` too.

Both take ``return_documents`` and then give each result its ``document: {text}``.

The query is the latest user turn and the documents are the candidates; ``relevance_score`` is
the same calibrated score ``/rank`` gives. What plain rerank clients never send stays optional:
earlier ``context`` turns, ``situations``, an ``intent`` with ``action``s on documents for
guideline masks, ``min_score``; the answer adds ``abstain``, ``threshold`` and ``masked``.
Errors keep the service's one error shape and status table. The answer's ``id`` is the request's
X-Request-ID: ``POST /v1/feedback`` names the request by it and a document by its index (as a
string).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from dialogue_ranker.serving.api import limits as sizes
from dialogue_ranker.serving.api.dependencies import RequestIdDep, RuntimeDep
from dialogue_ranker.serving.api.error_schema import with_error_body
from dialogue_ranker.serving.api.rank import ERROR_RESPONSES, TimeoutHeader
from dialogue_ranker.serving.api.schemas import (
    CONVERSATION_ID_DESCRIPTION,
    TurnIn,
    integral_floats_as_ints,
    limited_turn,
    texts_as_objects,
)
from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.ranking import Candidate, MaskMode, RankQuery, RankResult
from dialogue_ranker.serving.settings import LimitsSettings
from dialogue_ranker.serving.text_constraints import NON_BLANK, Name
from dialogue_ranker.serving.tokenization import DEFAULT_SPEAKER, Turn


class RerankDocumentIn(BaseModel):
    """A document: a plain string, or ``{text}`` with our optional generator and action."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, pattern=NON_BLANK)
    generator: Name | None = Field(None, description="Which generator proposed it (metrics).")
    action: Name | None = Field(None, description="Agent action it performs (guideline masks).")


class RerankRequest(BaseModel):
    """A rerank request (Cohere and Jina fields, then this service's optional extras)."""

    model_config = ConfigDict(extra="forbid")

    model: Name | None = Field(
        None, description="A served model's name or alias (GET /v1/models); default: the first."
    )
    query: str = Field(min_length=1, pattern=NON_BLANK, description="The latest user turn.")
    documents: Sequence[RerankDocumentIn] = Field(min_length=1, description="Strings or {text} objects.")
    top_n: int | None = Field(None, ge=1, strict=True, description="Return at most this many results.")
    max_tokens_per_doc: int | None = Field(
        None, ge=1, strict=True, description="Cut each document to this many tokens."
    )
    priority: int | None = Field(
        None, strict=True, description="Accepted from Cohere clients and ignored (admission is by deadline)."
    )
    # Off unless asked, on both routes. The documented defaults differ: Cohere's v1 rerank answers
    # without the documents' text unless return_documents is true (its v2 API has no such field, yet
    # LiteLLM's cohere/ provider sends "return_documents": true there); Jina's reranker API defaults
    # it to true. /v1/rerank is Cohere v1's route as well as Jina's, and the text is the client's own:
    # a Jina client that wants it back sends return_documents: true.
    return_documents: bool = Field(
        False, strict=True, description="Give each result its document's text as `document: {text}`."
    )
    context: Sequence[TurnIn] = Field(
        default_factory=list, description="Extra: earlier turns of the conversation, oldest first."
    )
    situations: Sequence[Annotated[str, StringConstraints(pattern=NON_BLANK)]] = Field(
        default_factory=list, description="Extra: situational statements, highest priority first."
    )
    intent: Name | None = Field(None, description="Extra: customer intent; masks documents by their action.")
    mask_mode: MaskMode = Field(MaskMode.HARD, description="Extra: hard, soft or off.")
    min_score: float | None = Field(
        None, ge=0.0, le=1.0, strict=True, description="Extra: abstention threshold override."
    )
    conversation_id: Name | None = Field(None, description=f"Extra: {CONVERSATION_ID_DESCRIPTION}")
    select_statements: bool = Field(
        True,
        strict=True,
        deprecated=True,
        description="Extra, deprecated and ignored (removed in the next release): every situation reaches "
        "the model.",
    )

    _documents_from_strings = field_validator("documents", mode="before")(texts_as_objects)
    _counts_integral = field_validator("top_n", "max_tokens_per_doc", "priority", mode="before")(
        integral_floats_as_ints
    )

    def to_query(self, *, request_id: str | None = None) -> RankQuery:
        """The ranker's view: the query as the latest user turn, document i as candidate ``str(i)``."""
        return RankQuery(
            turns=[*(Turn(t.speaker, t.text) for t in self.context), Turn(DEFAULT_SPEAKER, self.query)],
            statements=list(self.situations),
            candidates=[
                Candidate(id=str(i), text=d.text, generator=d.generator, action=d.action)
                for i, d in enumerate(self.documents)
            ],
            intent=self.intent,
            mask_mode=self.mask_mode,
            top_k=self.top_n,
            min_score=self.min_score,
            max_candidate_tokens=self.max_tokens_per_doc,
            request_id=request_id,
            conversation_id=self.conversation_id,
        )


def build_rerank_request(limits: LimitsSettings) -> type[RerankRequest]:
    """A :class:`RerankRequest` subclass whose constraints are the configured limits (:mod:`.limits`)."""
    chars = limits.max_text_chars
    document = sizes.with_text_limit(RerankDocumentIn, chars, name="LimitedDocument")
    fields = {
        "query": (str, sizes.text(chars, "The latest user turn.")),
        "documents": (
            Sequence[document],  # type: ignore[valid-type]
            Field(min_length=1, max_length=limits.max_candidates, description="Strings or {text} objects."),
        ),
        # The query is the last turn: the earlier turns get one fewer.
        "context": (
            Sequence[limited_turn(chars)],  # type: ignore[misc]
            Field(
                default_factory=list,
                max_length=max(limits.max_turns - 1, 0),
                description=RerankRequest.model_fields["context"].description,
            ),
        ),
        "situations": (
            sizes.situations_type(chars),
            sizes.situations(limits, RerankRequest.model_fields["situations"].description),
        ),
    }
    return sizes.limited(RerankRequest, fields, name="LimitedRerankRequest")


class MaskedDocumentOut(BaseModel):
    """A document removed by a hard mask (a guideline, or a repeated turn)."""

    index: int
    # Not required: the rerank routes leave out null fields, and a document without an action
    # (a repeated turn) would otherwise break the published schema.
    action: str | None = Field(None, description="The document's action; left out when it has none.")
    reason: MaskReason


class DocumentOut(BaseModel):
    """The echoed document."""

    text: str


class RerankResultOut(BaseModel):
    """One document's score; results are best first."""

    index: int = Field(description="Position of the document in the request.")
    relevance_score: float = Field(description="Calibrated P(appropriate) in [0, 1], as /rank's score.")
    mask_reason: MaskReason | None = Field(None, description="Soft mask mode: why it was penalised.")
    document: DocumentOut | None = Field(None, description="The document, when return_documents is true.")


class ApiVersion(BaseModel):
    """Cohere's ``meta.api_version``."""

    version: str = "2"


class BilledUnits(BaseModel):
    """Cohere's ``meta.billed_units``: one search unit per request."""

    search_units: int = 1


class Meta(BaseModel):
    """Cohere's ``meta``."""

    api_version: ApiVersion = Field(default_factory=ApiVersion)
    billed_units: BilledUnits = Field(default_factory=BilledUnits)


class Usage(BaseModel):
    """The request's tokens, as the model's tokenizer counts them."""

    total_tokens: int = Field(
        description="The request's input: each scored document's pair (the query with the context and "
        "statements kept, and the document cut to max_tokens_per_doc) as the model reads it, summed. "
        "The same whether the logit cache answered or not."
    )
    computed_tokens: int = Field(
        description="What the backend ran for this request: the sequences of the documents whose logits "
        "were not kept (a shared prefix once per sequence, a multi-turn request's extra views included); "
        "0 when the logit cache answered every document."
    )


class RerankExtras(BaseModel):
    """What this service adds to a rerank answer."""

    model: str = Field(description="name@version of the model that ranked.")
    abstain: bool = Field(description="True when no document reaches the threshold.")
    threshold: float
    masked: list[MaskedDocumentOut] = Field(default_factory=list)


#: The ``id`` of a rerank answer.
ANSWER_ID_DESCRIPTION = (
    "The request's X-Request-ID: POST /v1/feedback names the request by it (and a document by its index, "
    "as a string)."
)


class RerankResponse(RerankExtras):
    """Cohere's v2 answer (``id``, ``results``, ``meta``) plus the extras."""

    id: str = Field(description=ANSWER_ID_DESCRIPTION)
    results: list[RerankResultOut]
    meta: Meta = Field(default_factory=Meta)


class JinaRerankResponse(RerankExtras):
    """The Jina / vLLM answer (``id``, ``model``, ``usage``, ``results``) plus the extras."""

    id: str = Field(description=ANSWER_ID_DESCRIPTION)
    usage: Usage
    results: list[RerankResultOut]


def _extras(result: RankResult) -> dict[str, Any]:
    """The fields both rerank answers add to their clients' shapes."""
    return {
        "model": result.model,
        "abstain": result.abstain,
        "threshold": result.threshold,
        "masked": [
            MaskedDocumentOut(index=int(m.id), action=m.action, reason=m.reason) for m in result.masked
        ],
    }


def _results(result: RankResult, body: RerankRequest) -> list[RerankResultOut]:
    """The ranking as rerank results, each with its document when the request asks for it."""
    return [
        RerankResultOut(
            index=int(r.id),
            relevance_score=r.score,
            mask_reason=r.mask_reason,
            document=DocumentOut(text=body.documents[int(r.id)].text) if body.return_documents else None,
        )
        for r in result.ranking
    ]


def build_rerank_router(limits: LimitsSettings) -> APIRouter:
    """``/v2/rerank`` and ``/v1/rerank``, validating bodies with the configured limits."""
    request = build_rerank_request(limits)

    async def rerank_v2(
        body: RerankRequest, runtime: RuntimeDep, request_id: RequestIdDep, timeout_s: TimeoutHeader = None
    ) -> RerankResponse:
        """Rerank documents for a query (Cohere v2 shape), with calibrated scores."""
        query = body.to_query(request_id=request_id)
        result = await runtime.model(body.model).ranker.rank(query, timeout_s=timeout_s)
        return RerankResponse(id=request_id, results=_results(result, body), **_extras(result))

    async def rerank_v1(
        body: RerankRequest, runtime: RuntimeDep, request_id: RequestIdDep, timeout_s: TimeoutHeader = None
    ) -> JinaRerankResponse:
        """Rerank documents for a query (Jina / vLLM shape), with calibrated scores."""
        query = body.to_query(request_id=request_id)
        result = await runtime.model(body.model).ranker.rank(query, timeout_s=timeout_s)
        return JinaRerankResponse(
            id=request_id,
            usage=Usage(total_tokens=result.input_tokens, computed_tokens=result.computed_tokens),
            results=_results(result, body),
            **_extras(result),
        )

    # As for /rank: the signature's body type is swapped for the subclass with the configured limits.
    rerank_v2.__annotations__["body"] = Annotated[request, Body()]
    rerank_v1.__annotations__["body"] = Annotated[request, Body()]
    router = APIRouter(tags=["rerank"])
    for path, endpoint, response in (
        ("/v2/rerank", rerank_v2, RerankResponse),
        ("/v1/rerank", rerank_v1, JinaRerankResponse),
    ):
        router.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            response_model=response,
            response_model_exclude_none=True,
            responses=with_error_body(ERROR_RESPONSES),
        )
    return router
