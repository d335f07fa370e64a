"""Connection guards on uvicorn's HTTP protocol: header timeout, connection cap, JSON 400.

uvicorn times out idle keep-alive connections (``timeout_keep_alive``) but not a connection that
never finishes its request headers, and its own concurrency limit answers in plain text. This
subclass of its httptools protocol adds, per connection:

- a read timeout on the request headers (from the connection's start, and from the first byte of
  each later request): 408 in the service's JSON error shape, then the connection is closed;
- a cap on open connections: a request on a connection beyond it gets 503 (JSON) and is closed;
- a JSON 400 for bytes that are not HTTP, instead of uvicorn's plain text.

The body's read timeout is the request middleware's (:mod:`dialogue_ranker.serving.api.middleware`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from dialogue_ranker.serving.api.middleware import error_response
from dialogue_ranker.serving.errors import (
    ERROR_TABLE,
    MalformedRequest,
    OverCapacity,
    RequestTimeout,
    error_body,
)
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import ServerSettings

_REASONS = {400: b"Bad Request", 408: b"Request Timeout"}


def _raw_error(status: int, error_type: str, message: str) -> bytes:
    """A complete HTTP/1.1 error response that closes the connection."""
    body = json.dumps(error_body(error_type, message, uuid.uuid4().hex)).encode()
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % (status, _REASONS[status], len(body))
    )
    return head + body


def guarded_protocol(server: ServerSettings, metrics: Metrics) -> type[HttpToolsProtocol]:
    """The httptools protocol of uvicorn with this server's connection guards (pass as ``http=``)."""

    async def over_capacity(scope: Scope, receive: Receive, send: Send) -> None:
        error = OverCapacity(f"connections: the server holds its limit of {server.max_connections}")
        await error_response(error, uuid.uuid4().hex, metrics)(scope, receive, send)

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None
        _in_headers = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            metrics.connections.set(len(self.connections))
            self._await_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._headers_done()
            super().connection_lost(exc)
            metrics.connections.set(len(self.connections))

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._await_headers()

        def on_headers_complete(self) -> None:
            self._headers_done()
            if len(self.connections) <= server.max_connections:
                super().on_headers_complete()
                return
            # uvicorn reads self.app when it starts the request: this one gets the 503 app instead.
            app, self.app = self.app, over_capacity
            try:
                super().on_headers_complete()
            finally:
                self.app = app

        def send_400_response(self, msg: str) -> None:
            status, error_type = ERROR_TABLE[MalformedRequest]
            metrics.errors.labels(error_type).inc()
            self.transport.write(_raw_error(status, error_type, "request: not valid HTTP/1.1"))
            self.transport.close()

        def _await_headers(self) -> None:
            self._headers_done()
            self._in_headers = True
            self._header_timer = self.loop.call_later(server.read_timeout_s, self._headers_timed_out)

        def _headers_done(self) -> None:
            self._in_headers = False
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_timed_out(self) -> None:
            self._header_timer = None
            if not self._in_headers or self.transport.is_closing():
                return
            status, error_type = ERROR_TABLE[RequestTimeout]
            metrics.errors.labels(error_type).inc()
            message = f"headers: not received within {server.read_timeout_s:g} s; closing the connection"
            self.transport.write(_raw_error(status, error_type, message))
            self.transport.close()

    return GuardedHttpToolsProtocol
