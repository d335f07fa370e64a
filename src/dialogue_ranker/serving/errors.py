"""The service's errors: one root, one table to HTTP status and type, one JSON shape.

Every error a client can see is a :class:`RankerError` subclass listed in :data:`ERROR_TABLE`.
The body is always ``{"error": {"type", "message", "request_id"}}``. Library exceptions are
translated once where they are raised (``raise BackendError(...) from e``); anything else is a
plain 500 whose message never carries internals. This module knows no web framework: the
handlers in :mod:`dialogue_ranker.serving.app` turn these into responses.
"""

from __future__ import annotations

from typing import Any


class RankerError(Exception):
    """Root of every error the service reports to a client."""

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class InvalidInput(RankerError):
    """The request is well-formed JSON but breaks the contract (wrong type, out of range...)."""


class UnknownIntent(InvalidInput):
    """The request's ``intent`` is not in the loaded guidelines."""

    def __init__(self, intent: str) -> None:
        super().__init__(f"intent: unknown intent {intent!r} (not in the loaded guidelines)")
        self.intent = intent


class UnknownBank(InvalidInput):
    """The request's ``bank`` is not a bank the service was started with (``--bank``)."""

    def __init__(self, bank: str, served: list[str]) -> None:
        known = ", ".join(repr(name) for name in served) or "none (start the service with --bank NAME=FILE)"
        super().__init__(f"bank: unknown bank {bank!r}; served: {known}")
        self.bank = bank


class InvalidBankFile(InvalidInput):
    """A bank's file, read again for a reload, is unreadable or has a bad line (the old version stays)."""


class MalformedRequest(RankerError):
    """The body is not parseable JSON."""


class PayloadTooLarge(RankerError):
    """The body is over the configured size limit."""


class RequestTimeout(RankerError):
    """The body did not arrive within the read timeout; the connection is closed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"Connection": "close"})


class UnsupportedMediaType(RankerError):
    """The body is not JSON (by its content type)."""


class Unauthorized(RankerError):
    """No valid API key (``Authorization: Bearer <key>``) on a route that needs one."""

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class NotFound(RankerError):
    """No such route."""


class UnknownCandidate(RankerError):
    """Feedback names a candidate id that its (recently logged) request did not have."""


class LoggingOff(RankerError):
    """Feedback was sent to a service that keeps no request log (``--logs.dir`` is not set)."""


class BankNotFound(NotFound):
    """A bank route names a bank the service does not serve."""

    def __init__(self, bank: str, served: list[str]) -> None:
        known = ", ".join(repr(name) for name in served) or "none (start the service with --bank NAME=FILE)"
        super().__init__(f"name: no bank {bank!r}; served: {known}")
        self.bank = bank


class MethodNotAllowed(RankerError):
    """The route exists but not for this HTTP method."""


class Overloaded(RankerError):
    """The request cannot be served within its deadline (or the queue is full): retry later."""

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})


class NotReady(RankerError):
    """The model is still loading or the service is shutting down."""


class OverCapacity(RankerError):
    """The server holds its most concurrent connections; the connection is closed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"Connection": "close"})


class BackendUnavailable(RankerError):
    """The inference backend cannot be reached, refuses work, or its circuit breaker is open."""


class BackendTimeout(RankerError):
    """Scores did not come back within the request timeout."""


class BackendError(RankerError):
    """The inference backend failed on a batch."""


#: Exhaustive: every RankerError subclass -> (HTTP status, error type). Checked by a unit test.
ERROR_TABLE: dict[type[RankerError], tuple[int, str]] = {
    RankerError: (500, "internal_error"),
    MalformedRequest: (400, "malformed_request"),
    Unauthorized: (401, "unauthorized"),
    NotFound: (404, "not_found"),
    UnknownCandidate: (404, "unknown_candidate"),
    BankNotFound: (404, "bank_not_found"),
    MethodNotAllowed: (405, "method_not_allowed"),
    RequestTimeout: (408, "request_timeout"),
    LoggingOff: (409, "logging_off"),
    PayloadTooLarge: (413, "payload_too_large"),
    UnsupportedMediaType: (415, "unsupported_media_type"),
    InvalidInput: (422, "invalid_input"),
    UnknownIntent: (422, "unknown_intent"),
    UnknownBank: (422, "unknown_bank"),
    InvalidBankFile: (422, "invalid_bank_file"),
    Overloaded: (429, "overloaded"),
    BackendError: (502, "backend_error"),
    NotReady: (503, "not_ready"),
    OverCapacity: (503, "over_capacity"),
    BackendUnavailable: (503, "backend_unavailable"),
    BackendTimeout: (504, "backend_timeout"),
}

INTERNAL_ERROR_MESSAGE = "internal error; the request id identifies it in the service logs"


def status_and_type(error: RankerError) -> tuple[int, str]:
    """The table entry of the most specific class of ``error``."""
    for cls in type(error).__mro__:
        if cls in ERROR_TABLE:
            return ERROR_TABLE[cls]
    return ERROR_TABLE[RankerError]


def error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"error": {"type": error_type, "message": message, "request_id": request_id}}
