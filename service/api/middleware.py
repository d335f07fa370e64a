"""Per-request context: request id, duration and in-flight metrics, and the body size limit.

A plain ASGI middleware (no per-request task or thread). The body is read here, up to the
limit, so an oversized body is refused with 413 before any parsing, then replayed to the app.
"""

from __future__ import annotations

import re
import time
import uuid

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import ERROR_TABLE, PayloadTooLarge, error_body
from service.metrics import Metrics, route_label

REQUEST_ID_HEADER = "x-request-id"
# A client-supplied request id is echoed only when it is short and plain (it reaches the logs).
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER.encode():
            candidate = value.decode("latin-1")
            if _VALID_REQUEST_ID.match(candidate):
                return candidate
    return uuid.uuid4().hex


class RequestContextMiddleware:
    """Sets ``request.state.request_id``, times requests and enforces ``max_body_bytes``."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

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

        self.metrics.requests_in_flight.inc()
        try:
            body = await self._read_body(receive)
            if body is None:
                await self._too_large(scope, receive, send_with_id, request_id)
                return
            await self.app(scope, _replay(body, receive), send_with_id)
        finally:
            self.metrics.requests_in_flight.dec()
            elapsed_s = time.perf_counter() - started
            self.metrics.request_duration.labels(route_label(scope["path"]), str(status)).observe(elapsed_s)

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it passes the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # disconnect: let the app see an empty body
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        status, error_type = ERROR_TABLE[PayloadTooLarge]
        self.metrics.errors.labels(error_type).inc()
        message = f"body: larger than the limit of {self.max_body_bytes} bytes"
        response = JSONResponse(error_body(error_type, message, request_id), status_code=status)
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later reads wait for the disconnect, as from the server

    return replay
