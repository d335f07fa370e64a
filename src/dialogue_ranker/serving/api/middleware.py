"""Per-request context and guards, before the app sees a request.

A plain ASGI middleware (no per-request thread). In order:

1. request id, duration and in-flight metrics, and the request's server span (continuing an
   incoming W3C ``traceparent``; see :mod:`dialogue_ranker.serving.tracing`);
2. API keys (:mod:`dialogue_ranker.serving.api.auth`): 401 before the body is even read;
3. content type: a body that is not JSON is 415;
4. the body, read up to ``max_body_bytes`` (413) and within ``read_timeout_s`` of the request's
   start (408, connection closed), then replayed to the app;
5. the app runs while the client's connection is watched: when the client goes away before the
   response has started, the request is cancelled, so its queued pairs are dropped unscored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dialogue_ranker.serving.api.auth import AccessPolicy
from dialogue_ranker.serving.errors import (
    PayloadTooLarge,
    RankerError,
    RequestTimeout,
    UnsupportedMediaType,
    error_body,
    status_and_type,
)
from dialogue_ranker.serving.metrics import Metrics, route_label

logger = logging.getLogger(__name__)

REQUEST_ID_HEADER = "x-request-id"
#: A client-supplied request id is echoed only when it is short and plain (it reaches the logs);
#: feedback names a request by an id of the same form.
REQUEST_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,64}$"
_VALID_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)
#: Methods whose body must be JSON when they carry one.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _request_id(scope: Scope) -> str:
    candidate = _header(scope, REQUEST_ID_HEADER.encode())
    if candidate is not None and _VALID_REQUEST_ID.match(candidate):
        return candidate
    return uuid.uuid4().hex


def is_json_content_type(value: str | None) -> bool:
    """``application/json`` or ``application/*+json`` (parameters ignored); no header counts as JSON."""
    if value is None:
        return True
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def error_response(error: RankerError, request_id: str, metrics: Metrics) -> JSONResponse:
    """The one JSON error response: status and type from the error table, counted by type."""
    status, error_type = status_and_type(error)
    metrics.errors.labels(error_type).inc()
    if status == 429 or status >= 500:
        # The service's refusals and faults, with the reason the client got: the error counter
        # says how many, the log which stage and why (a client's mistakes are its own to log).
        level = logging.INFO if status == 429 else logging.WARNING
        logger.log(
            level, "request not served status=%d error=%s request_id=%s reason=%r",
            status, error_type, request_id, error.message,
        )  # fmt: skip
    body = error_body(error_type, error.message, request_id)
    return JSONResponse(body, status_code=status, headers=error.headers or None)


class RequestContextMiddleware:
    """Request id, metrics, keys, content type, body limits and client-disconnect cancellation."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        max_body_bytes: int,
        read_timeout_s: float,
        access: AccessPolicy | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.read_timeout_s = read_timeout_s
        self.access = access or AccessPolicy()
        self.tracer = tracer or trace.NoOpTracer()
        self._traced = not isinstance(self.tracer, trace.NoOpTracer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI call."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500  # what an exception escaping the app becomes
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (REQUEST_ID_HEADER.encode(), request_id.encode())]
            await send(message)

        route = route_label(scope["path"])
        self.metrics.requests_in_flight.inc()
        span = self.tracer.start_span(
            f"{scope['method']} {route}",
            context=self._incoming_trace(scope),
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": scope["method"], "http.route": route},
        )
        try:
            with trace.use_span(span, end_on_exit=False):
                try:
                    self.access.check(scope["path"], _header(scope, b"authorization"))
                    self._check_content_type(scope)
                    body = await self._read_body(receive, started)
                except RankerError as error:
                    await error_response(error, request_id, self.metrics)(scope, receive, send_with_id)
                    return
                await self._run_until_disconnect(scope, body, receive, send_with_id)
        finally:
            self.metrics.requests_in_flight.dec()
            elapsed_s = time.perf_counter() - started
            self.metrics.request_duration.labels(route, str(status)).observe(elapsed_s)
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(trace.StatusCode.ERROR)
            span.end()

    def _incoming_trace(self, scope: Scope) -> Context | None:
        """The caller's trace (W3C ``traceparent``); not read at all when tracing is off."""
        if not self._traced:
            return None
        headers = scope.get("headers", [])
        return propagate.extract({name.decode("latin-1"): value.decode("latin-1") for name, value in headers})

    def _check_content_type(self, scope: Scope) -> None:
        if scope["method"] not in _BODY_METHODS:
            return
        content_type = _header(scope, b"content-type")
        if not is_json_content_type(content_type):
            raise UnsupportedMediaType(f"content-type: {content_type!r} is not JSON; send application/json")

    async def _read_body(self, receive: Receive, started: float) -> bytes:
        """The whole body.

        Raises:
            PayloadTooLarge: it passes the size limit.
            RequestTimeout: it has not all arrived ``read_timeout_s`` after the request started.
        """
        chunks: list[bytes] = []
        size = 0
        while True:
            remaining = started + self.read_timeout_s - time.perf_counter()
            try:
                async with asyncio.timeout(max(remaining, 0.0)):
                    message = await receive()
            except TimeoutError:
                raise RequestTimeout(
                    f"body: not received within {self.read_timeout_s:g} s; closing the connection"
                ) from None
            if message["type"] != "http.request":  # disconnect: let the app see an empty body
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise PayloadTooLarge(f"body: larger than the limit of {self.max_body_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _run_until_disconnect(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """Run the app; cancel it if the client disconnects before the response starts."""
        disconnected = asyncio.Event()
        response_started = False
        body_sent = False

        async def replay() -> Message:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()  # later reads wait for the disconnect, as from the server
            return {"type": "http.disconnect"}

        async def tracked_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()

        app_task = asyncio.ensure_future(self.app(scope, replay, tracked_send))
        watcher = asyncio.ensure_future(watch())
        try:
            await asyncio.wait({app_task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not app_task.done() and not response_started:
                # The client is gone (or the server is closing the connection): stop its work.
                app_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await app_task
                self.metrics.client_disconnects.inc()
                return
            await app_task
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if not app_task.done():
                app_task.cancel()
