"""Typed dependencies of the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from dialogue_ranker.serving.api.error_schema import with_error_body
from dialogue_ranker.serving.errors import NotReady
from dialogue_ranker.serving.metrics import Metrics
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


#: The OpenAPI response of a route that needs the runtime, answered while the model loads.
NOT_READY_RESPONSE = with_error_body({503: {"description": "The model is not loaded yet"}})

RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
