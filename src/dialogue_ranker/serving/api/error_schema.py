"""The published schema of every error answer: ``{"error": {"type", "message", "request_id"}}``.

The body itself is built once, in :func:`dialogue_ranker.serving.errors.error_body`; this module
declares it in the OpenAPI document, so a generated client has a type for it and the contract test
checks each error answer against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import JsonValue

from dialogue_ranker.serving.errors import ERROR_TABLE

#: Every error type a client can see, from the one error table.
ERROR_TYPES = sorted({error_type for _, error_type in ERROR_TABLE.values()})


class ErrorDetailOut(BaseModel):
    """What went wrong."""

    type: str = Field(
        description="The error's type; one status each (docs/reference/errors.md).",
        # Published as an enum, validated by the error table itself.
        json_schema_extra={"enum": list[JsonValue](ERROR_TYPES)},
    )
    message: str = Field(description="What to fix; a 422 names the field.")
    request_id: str = Field(description="The X-Request-ID of the request, which the logs carry.")


class ErrorOut(BaseModel):
    """The body of every error answer."""

    error: ErrorDetailOut


def with_error_body(responses: Mapping[int | str, Mapping[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses``, each 4xx and 5xx with :class:`ErrorOut` as its body."""
    return {
        status: {**entry, "model": ErrorOut} if int(status) >= 400 else dict(entry)
        for status, entry in responses.items()
    }
