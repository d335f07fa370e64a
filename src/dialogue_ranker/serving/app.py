"""The FastAPI application: ``create_app(settings)``, its lifespan and its error handlers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from opentelemetry.sdk.trace import TracerProvider
from starlette.exceptions import HTTPException as StarletteHTTPException

from dialogue_ranker import __version__
from dialogue_ranker.serving.api import banks as bank_routes
from dialogue_ranker.serving.api import discovery, docs, feedback, health
from dialogue_ranker.serving.api.auth import AccessPolicy
from dialogue_ranker.serving.api.middleware import REQUEST_ID_HEADER, RequestContextMiddleware, error_response
from dialogue_ranker.serving.api.rank import build_rank_router
from dialogue_ranker.serving.api.rerank import build_rerank_router
from dialogue_ranker.serving.backends import build_backend
from dialogue_ranker.serving.banks import Bank, BankUpdates
from dialogue_ranker.serving.errors import (
    INTERNAL_ERROR_MESSAGE,
    InvalidInput,
    MalformedRequest,
    MethodNotAllowed,
    NotFound,
    RankerError,
    error_body,
)
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.runtime import BackendFactory, Runtime
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tracing import provider_from_env, tracer_of

logger = logging.getLogger(__name__)

#: How many field errors a 422 message lists.
MAX_LISTED_ERRORS = 5


def create_app(
    settings: Settings,
    *,
    backend_factory: BackendFactory = build_backend,
    metrics: Metrics | None = None,
    tracer_provider: TracerProvider | None = None,
    banks: Sequence[Bank] | None = None,
) -> FastAPI:
    """A ranking app; the model loads in its lifespan (``/readyz`` is 503 until then, and until banks embed).

    ``banks``: the ``--bank`` files already read (else they are read at start).

    Traces go to ``tracer_provider`` (tests), else as the ``OTEL_*`` variables say, else nowhere.

    Raises:
        KeyFileError: a configured API key file cannot be read or holds no key.
    """
    metrics = metrics or Metrics(generators=settings.ranking.generators)
    access = AccessPolicy.from_settings(settings.auth)
    owned_provider = None if tracer_provider is not None else provider_from_env()
    tracer = tracer_of(tracer_provider or owned_provider)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.runtime = await Runtime.start(
            settings, metrics, backend_factory=backend_factory, tracer=tracer, banks=banks
        )
        # SIGHUP reloads every bank; the watch reloads a bank whose file changed (when set).
        updates = BankUpdates.install(
            app.state.runtime.banks, watch_interval_s=settings.banks.watch_interval_s
        )
        try:
            yield
        finally:
            if updates is not None:
                await updates.close()
            runtime, app.state.runtime = app.state.runtime, None
            await runtime.close()
            if owned_provider is not None:
                owned_provider.shutdown()  # flushes the spans still queued

    app = FastAPI(
        title="Response ranking service",
        version=__version__,
        summary="Calibrated scores for dialogue response candidates, with guideline masks.",
        lifespan=lifespan,
        # The default pages load their scripts from a CDN: docs.install serves them from local files.
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if settings.server.docs else None,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.runtime = None
    app.add_middleware(
        RequestContextMiddleware,
        metrics=metrics,
        max_body_bytes=settings.limits.max_body_bytes,
        read_timeout_s=settings.server.read_timeout_s,
        access=access,
        tracer=tracer,
    )
    _install_error_handlers(app, metrics)
    app.include_router(build_rank_router(settings.limits))
    app.include_router(build_rerank_router(settings.limits))
    app.include_router(feedback.router)
    app.include_router(discovery.router)
    app.include_router(bank_routes.router)
    app.include_router(health.router)
    if settings.server.docs:
        docs.install(app)
    return app


def _request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))


def _install_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    def respond(request: Request, error: RankerError) -> JSONResponse:
        return error_response(error, _request_id(request), metrics)

    @app.exception_handler(RankerError)
    async def ranker_error(request: Request, error: RankerError) -> JSONResponse:
        return respond(request, error)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return respond(request, _translate_validation(error))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        translated: RankerError
        if error.status_code == 404:
            translated = NotFound(f"no route {request.url.path}")
        elif error.status_code == 405:
            allow = (error.headers or {}).get("Allow", "")
            translated = MethodNotAllowed(
                f"{request.method} is not allowed on {request.url.path}; allowed: {allow}",
                headers={"Allow": allow},
            )
        elif error.status_code == 400:
            translated = MalformedRequest("body: cannot be read")
        else:
            translated = RankerError(str(error.detail))
        return respond(request, translated)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, error: Exception) -> JSONResponse:
        logger.error("unhandled error request_id=%s", _request_id(request), exc_info=error)
        metrics.errors.labels("internal_error").inc()
        request_id = _request_id(request)
        # This handler runs outside the request middleware, so it adds the request id header itself.
        return JSONResponse(
            error_body("internal_error", INTERNAL_ERROR_MESSAGE, request_id),
            status_code=500,
            headers={REQUEST_ID_HEADER: request_id},
        )


def _translate_validation(error: RequestValidationError) -> RankerError:
    """A 400 for unparseable JSON, else a 422 whose message names each bad field's path."""
    problems = list(error.errors())
    if any(p.get("type") == "json_invalid" for p in problems):
        return MalformedRequest("body: not valid JSON")
    parts = []
    for problem in problems[:MAX_LISTED_ERRORS]:
        loc = [str(x) for x in problem.get("loc", ()) if x != "body"]
        parts.append(f"{'.'.join(loc) or 'body'}: {problem.get('msg', 'invalid')}")
    more = len(problems) - MAX_LISTED_ERRORS
    return InvalidInput("; ".join(parts) + (f" (and {more} more)" if more > 0 else ""))
