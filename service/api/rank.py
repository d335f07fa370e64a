"""``POST /rank``."""

from typing import Annotated

from fastapi import APIRouter, Body

from service.api.dependencies import RuntimeDep
from service.api.examples import RANK_EXAMPLES
from service.api.schemas import RankRequest, RankResponse, build_rank_request
from service.settings import LimitsSettings

ERROR_RESPONSES: dict[int | str, dict[str, str]] = {
    400: {"description": "Malformed JSON"},
    413: {"description": "Body over the size limit"},
    422: {"description": "Invalid field (the message names it) or unknown intent"},
    429: {"description": "Queue full; retry after the Retry-After seconds"},
    502: {"description": "Backend failed"},
    503: {"description": "Model not loaded or backend unavailable"},
    504: {"description": "Scores did not come back in time"},
}


def build_rank_router(limits: LimitsSettings) -> APIRouter:
    """The ranking router, validating bodies with the configured limits."""

    async def rank(body: RankRequest, runtime: RuntimeDep) -> RankResponse:
        """Rank the candidates of one dialogue turn, best first, with calibrated scores."""
        result = await runtime.ranker.rank(body.to_query())
        return RankResponse.from_result(result)

    # FastAPI reads the body schema from the signature when the route is added: swap in the
    # subclass that carries the configured limits, with the OpenAPI examples.
    request_model = build_rank_request(limits)
    rank.__annotations__["body"] = Annotated[request_model, Body(openapi_examples=RANK_EXAMPLES)]
    router = APIRouter(tags=["ranking"])
    router.add_api_route(
        "/rank", rank, methods=["POST"], response_model=RankResponse, responses=ERROR_RESPONSES
    )
    return router
