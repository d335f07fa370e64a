"""The contract run's own checks (schemathesis hooks, loaded by ``benchmarks/contract_fuzz.toml``).

The built-in ``positive_data_acceptance`` takes any 5xx, 404 or 409 for a schema-valid request and
no 422. This service answers a well-formed request 2xx, or refuses it for a reason the schema
cannot carry: each such answer is declared below, with its status, error type and why, and any
other refusal fails the run. A run that never got a 2xx from a route fails too: a contract run
whose every request was refused would check no answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import schemathesis
from schemathesis import Case, CheckContext, Response


@dataclass(frozen=True)
class Refusal:
    """A declared answer to a schema-valid request that is not a 2xx: status, error type, why."""

    status: int
    error_type: str
    why: str
    #: What the error message says (part of it), where the type alone is too broad.
    says: str = ""
    retry_after: bool = False
    #: Only for a request that sent this header.
    sent: str = ""

    def matches(self, case: Case, response: Response, error: dict[str, Any]) -> bool:
        """Whether ``response`` to ``case`` (with its parsed ``error`` object) is this refusal."""
        sent = {name.lower() for name in (case.headers or {})}
        return (
            response.status_code == self.status
            and error.get("type") == self.error_type
            and self.says in str(error.get("message", ""))
            and (not self.retry_after or _header(response, "retry-after").isdigit())
            and (not self.sent or self.sent.lower() in sent)
        )


#: Every non-2xx answer a schema-valid request may get, and why the schema cannot rule it out.
REFUSALS = (
    Refusal(
        429,
        "overloaded",
        "it cannot be scored before its deadline (retry after Retry-After)",
        retry_after=True,
    ),
    # Admission lets a request in on the measured rate; on a busy CPU a short deadline of the
    # client's own can still pass before its scores come back.
    Refusal(504, "backend_timeout", "its own deadline passed after admission", sent="X-Request-Timeout-S"),
    Refusal(503, "not_ready", "the model is loading or a bank is embedding (GET /readyz)"),
    Refusal(413, "payload_too_large", "a body over limits.max-body-bytes: JSON Schema has no size in bytes"),
    # Names the service serves are listed by the discovery routes, not enumerated in the schema.
    Refusal(422, "unknown_intent", "an intent the loaded guidelines do not hold (GET /v1/guidelines)"),
    Refusal(422, "unknown_bank", "a bank the service does not serve (GET /v1/banks)"),
    # The bank routes take the bank in their path: a name no bank has is a 404 naming it.
    Refusal(404, "bank_not_found", "a bank route naming a bank the service does not serve (GET /v1/banks)"),
    Refusal(
        422, "invalid_input", "a model the service does not serve (GET /v1/models)", "model: unknown model"
    ),
    # /rank's rules between fields, which its field descriptions state.
    Refusal(422, "invalid_input", "retrieve_k without a bank", "retrieve_k needs a bank"),
    Refusal(422, "invalid_input", "neither candidates nor a bank", "no candidates and no bank"),
    Refusal(422, "invalid_input", "candidates plus retrieve_k over the candidate limit", "over the limit of"),
    Refusal(422, "invalid_input", "two candidates with one id", "duplicate candidate id"),
    # /v1/feedback on a request the service logged recently, naming a candidate it did not have.
    Refusal(404, "unknown_candidate", "a candidate id the logged request did not have"),
)


def _header(response: Response, name: str) -> str:
    values = response.headers.get(name) or [""]
    return str(values[0])


def _error_of(response: Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


@schemathesis.check
def schema_valid_requests_are_served(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """A schema-valid request gets a 2xx or one of the declared refusals."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code < 300:
        return None
    error = _error_of(response)
    if any(refusal.matches(case, response, error) for refusal in REFUSALS):
        return None
    raise AssertionError(
        f"a schema-valid request got {response.status_code} {error.get('type')}: {error.get('message')}; "
        "and none of the declared refusals (benchmarks/contract_checks.py) says so"
    )


@schemathesis.check
def refusals_are_declared(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Any 429, 503 or 504, of any request, is the declared refusal of its status."""
    if response.status_code not in (429, 503, 504):
        return None
    error = _error_of(response)
    if not any(r.matches(case, response, error) for r in REFUSALS if r.status == response.status_code):
        raise AssertionError(f"{response.status_code} {error.get('type')}: {error.get('message')}")
    return None


@schemathesis.check
class EveryRouteAnswers:
    """Each tested route answered 2xx at least once: the run checked real answers, not only refusals."""

    def __init__(self) -> None:
        self.tested: set[str] = set()
        self.answered: set[str] = set()

    def after_response(self, ctx: CheckContext, response: Response, case: Case) -> bool | None:
        """Note the route, and whether it answered."""
        self.tested.add(case.operation.label)
        if 200 <= response.status_code < 300:
            self.answered.add(case.operation.label)
        return None

    def after_run(self, ctx: CheckContext) -> None:
        """Fail when a tested route never answered 2xx."""
        never = sorted(self.tested - self.answered)
        if never:
            raise AssertionError(f"never answered 2xx: {', '.join(never)}")
