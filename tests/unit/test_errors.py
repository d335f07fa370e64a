from __future__ import annotations

import dialogue_ranker.serving.errors as errors
from dialogue_ranker.serving.errors import (
    ERROR_TABLE,
    RankerError,
    UnknownIntent,
    error_body,
    status_and_type,
)


def all_subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= all_subclasses(sub)
    return found


def test_every_error_class_has_a_table_entry() -> None:
    assert all_subclasses(RankerError) <= set(ERROR_TABLE)


def test_error_types_are_unique() -> None:
    types = [entry[1] for entry in ERROR_TABLE.values()]
    assert len(types) == len(set(types))


def test_status_follows_the_style_guide() -> None:
    assert status_and_type(errors.InvalidInput("x"))[0] == 422
    assert status_and_type(errors.Overloaded("x"))[0] == 429
    assert status_and_type(errors.NotReady("x"))[0] == 503
    assert status_and_type(errors.BackendUnavailable("x"))[0] == 503
    assert status_and_type(errors.BackendTimeout("x"))[0] == 504
    assert status_and_type(errors.BackendError("x"))[0] == 502


def test_unknown_intent_names_the_field_and_value() -> None:
    status, error_type = status_and_type(UnknownIntent("fly_me_to_the_moon"))
    assert (status, error_type) == (422, "unknown_intent")
    assert "intent" in str(UnknownIntent("fly_me_to_the_moon")) and "fly_me_to_the_moon" in str(
        UnknownIntent("fly_me_to_the_moon")
    )


def test_overloaded_carries_retry_after() -> None:
    assert errors.Overloaded("full", retry_after_s=3).headers == {"Retry-After": "3"}


def test_error_body_has_type_message_and_request_id() -> None:
    assert error_body("t", "m", "r") == {"error": {"type": "t", "message": "m", "request_id": "r"}}
