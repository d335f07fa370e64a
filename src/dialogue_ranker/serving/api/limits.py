"""The request-size limits of ``/rank`` and the rerank routes, declared once.

Limits live in the field constraints, so a violation is a 422 naming the field's path. Each
route's request class is declared with the default limits (:data:`DEFAULTS`); at start the app
builds, through :func:`limited`, a subclass with the configured ones, so the OpenAPI schema
shows the limits actually enforced. Every size-limited field (a text, the situations, the turns,
the candidates or documents) is made here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, StringConstraints, create_model

from dialogue_ranker.serving.settings import LimitsSettings
from dialogue_ranker.serving.text_constraints import NON_BLANK

#: The limits the request classes are declared with (the configured ones replace them at start).
DEFAULTS = LimitsSettings()

Model = TypeVar("Model", bound=BaseModel)


def text(chars: int, description: str | None = None) -> Any:
    """A required, non-blank text field of at most ``chars`` characters."""
    return Field(min_length=1, max_length=chars, pattern=NON_BLANK, description=description)


def situations_type(chars: int) -> Any:
    """The type of a request's ``situations``: non-blank statements of at most ``chars`` characters."""
    return Sequence[Annotated[str, StringConstraints(max_length=chars, pattern=NON_BLANK)]]


def situations(limits: LimitsSettings, description: str | None) -> Any:
    """A request's ``situations`` field: at most ``limits.max_situations`` statements."""
    return Field(default_factory=list, max_length=limits.max_situations, description=description)


def with_text_limit(model: type[Model], chars: int, *, name: str) -> type[Model]:
    """``model`` (a turn, a candidate, a document) as ``name``, its ``text`` at most ``chars`` long."""
    return create_model(name, __base__=model, text=(str, text(chars)))


def limited(model: type[Model], fields: dict[str, Any], *, name: str) -> type[Model]:
    """A subclass of a request class named ``name``, its size-limited ``fields`` replaced.

    ``fields``: name -> (type, field), made with this module's helpers from the configured limits.
    The request class's docstring stays the schema's description.
    """
    return create_model(name, __base__=model, __doc__=model.__doc__, **fields)
