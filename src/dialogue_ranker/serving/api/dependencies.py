"""Typed dependencies of the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from dialogue_ranker.serving.api.error_schema import with_error_body
from dialogue_ranker.serving.errors import LoggingOff, NotReady
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.request_logs import RequestLogs
from dialogue_ranker.serving.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    """The started runtime of the app.

    Raises:
        NotReady: the model is still loading or the app is shutting down.
    """
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        raise NotReady("the model is not loaded")
    return runtime


async def get_metrics(request: Request) -> Metrics:
    """The app's metrics."""
    metrics: Metrics = request.app.state.metrics
    return metrics


async def get_request_id(request: Request) -> str:
    """The request's id: its X-Request-ID, or the one the request middleware gave it."""
    return str(getattr(request.state, "request_id", "-"))


async def get_logs(runtime: Annotated[Runtime, Depends(get_runtime)], request: Request) -> RequestLogs:
    """The request logs.

    Raises:
        NotReady: the model is still loading or the app is shutting down.
        LoggingOff: the service keeps no request log (409: feedback would join nothing).
    """
    if runtime.logs is None:
        metrics: Metrics = request.app.state.metrics
        metrics.feedback.labels("logging_off").inc()
        raise LoggingOff(
            "feedback: this service keeps no request log to join it to; start it with --logs.dir DIR"
        )
    return runtime.logs


#: The OpenAPI response of a route that needs the runtime, answered while the model loads.
NOT_READY_RESPONSE = with_error_body({503: {"description": "The model is not loaded yet"}})

RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
RequestIdDep = Annotated[str, Depends(get_request_id)]
LogsDep = Annotated[RequestLogs, Depends(get_logs)]
