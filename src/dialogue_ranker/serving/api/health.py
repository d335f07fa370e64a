"""Liveness, readiness and metrics."""

from fastapi import APIRouter, Response

from dialogue_ranker.serving.api.dependencies import MetricsDep, RuntimeDep
from dialogue_ranker.serving.api.error_schema import with_error_body
from dialogue_ranker.serving.errors import NotReady
from dialogue_ranker.serving.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive (answers even while the model loads)."""
    return {"status": "alive"}


@router.get(
    "/readyz",
    responses=with_error_body(
        {503: {"description": "Not ready: the model loads, a bank embeds or a backend is down"}}
    ),
)
async def readyz(runtime: RuntimeDep) -> dict[str, str]:
    """The model is loaded, every bank embedded and every backend answers a probe; 503 otherwise."""
    if (waiting := runtime.waiting()) is not None:
        raise NotReady(waiting)
    if not await runtime.healthy():
        raise NotReady("a backend does not answer")
    return {"status": "ready", "model": runtime.bundle.model_id, "backend": runtime.backend_name}


@router.get("/metrics", response_class=Response)
async def metrics(m: MetricsDep) -> Response:
    """Prometheus metrics."""
    return Response(m.exposition(), media_type=CONTENT_TYPE)
