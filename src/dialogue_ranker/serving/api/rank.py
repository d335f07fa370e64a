"""``POST /rank``."""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header

from dialogue_ranker.serving.api.dependencies import RequestIdDep, RuntimeDep
from dialogue_ranker.serving.api.error_schema import with_error_body
from dialogue_ranker.serving.api.examples import RANK_EXAMPLES
from dialogue_ranker.serving.api.links import FEEDBACK_LINKS
from dialogue_ranker.serving.api.schemas import RankRequest, RankResponse, build_rank_request
from dialogue_ranker.serving.settings import LimitsSettings

ERROR_RESPONSES: dict[int | str, dict[str, str]] = {
    400: {"description": "Malformed JSON"},
    401: {"description": "API keys are configured and no valid `Authorization: Bearer <key>` was sent"},
    408: {"description": "The body did not arrive within the read timeout"},
    413: {"description": "Body over the size limit"},
    415: {"description": "The body is not JSON"},
    422: {"description": "Invalid field (the message names it) or unknown intent"},
    429: {"description": "Cannot be served before its deadline; retry after the Retry-After seconds"},
    502: {"description": "Backend failed on a pair of this request"},
    503: {"description": "Model not loaded, backend unavailable or circuit breaker open"},
    504: {"description": "Scores did not come back in time"},
}


def _number_only(schema: dict[str, Any]) -> None:
    """Publish the header as the number it is, without the null branch of ``float | None``.

    None only stands for a header left out: a header cannot carry JSON's null, and a client that
    sent the word would get a 422 (a generated client would, from a number-or-null schema).
    """
    number = [branch for branch in schema.pop("anyOf") if branch.get("type") != "null"]
    schema.update(*number)


#: The client's deadline for one request, capped by ``limits.request_timeout_s``.
TimeoutHeader = Annotated[
    float | None,
    Header(
        alias="X-Request-Timeout-S",
        # Below 10 ms no request can be scored: a 422 says so, where a deadline that had passed
        # before the request was even queued would read as a server timeout.
        ge=0.01,
        le=3600,
        strict=False,
        description="Seconds this request may take, 0.01 to 3600 (capped by the server's request timeout): "
        "a request that cannot be scored within it gets 429 at once rather than 504 later.",
        json_schema_extra=_number_only,
    ),
]


def build_rank_router(limits: LimitsSettings) -> APIRouter:
    """The ranking router, validating bodies with the configured limits."""

    async def rank(
        body: RankRequest, runtime: RuntimeDep, request_id: RequestIdDep, timeout_s: TimeoutHeader = None
    ) -> RankResponse:
        """Rank the candidates of one dialogue turn, best first, with calibrated scores."""
        query = body.to_query(request_id=request_id)
        result = await runtime.model(body.model).ranker.rank(query, timeout_s=timeout_s)
        return RankResponse.from_result(result, request_id=request_id)

    # FastAPI reads the body schema from the signature when the route is added: swap in the
    # subclass that carries the configured limits, with the OpenAPI examples.
    request_model = build_rank_request(limits)
    rank.__annotations__["body"] = Annotated[request_model, Body(openapi_examples=RANK_EXAMPLES)]
    router = APIRouter(tags=["ranking"])
    router.add_api_route(
        "/rank",
        rank,
        methods=["POST"],
        response_model=RankResponse,
        responses={200: {"links": FEEDBACK_LINKS}, **with_error_body(ERROR_RESPONSES)},
    )
    return router
