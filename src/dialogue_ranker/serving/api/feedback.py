"""``POST /v1/feedback``: a judgement of one candidate of a ranked request, joined to it in the logs.

A client names the request by its id (``request_id`` of a ``/rank`` answer, ``id`` of a rerank
answer: the request's X-Request-ID) and the candidate by its id (a rerank document by its index,
as a string), and sends exactly one of:

- ``label``: as in the ranking data, a grade 0, 1 or 2 (an integer) or a probability in [0, 1];
- ``reward``: a number in [-1, 1] (-1 the reply was rejected, 0 no opinion, 1 it was taken), which
  becomes the label ``(reward + 1) / 2``, a probability.

The answer is 202: the judgement is queued for the feedback log (``feedback-*.jsonl``) and the
logs are joined when they are read (``dialogue_ranker.data.feedback_logs``). ``matched`` says
whether the request is among the recent ones this service logged (``--logs.recent-requests``);
when it is, a candidate id it did not have is a 404. A request that is not held there may have
been logged longer ago, by another replica, before a restart, or not sampled, so its feedback is
written all the same rather than refused. Without request logs (``--logs.dir`` unset) the route
answers 409: there is nothing to join the judgement to.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

from dialogue_ranker.serving.api.dependencies import LogsDep
from dialogue_ranker.serving.api.error_schema import with_error_body
from dialogue_ranker.serving.api.examples import FEEDBACK_EXAMPLES
from dialogue_ranker.serving.api.middleware import REQUEST_ID_PATTERN
from dialogue_ranker.serving.request_logs.lines import label_of_reward
from dialogue_ranker.serving.text_constraints import Name

#: A grade (0 bad, 1 acceptable, 2 best) or a probability that the reply is appropriate.
Label = Annotated[StrictInt, Field(ge=0, le=2)] | Annotated[StrictFloat, Field(ge=0.0, le=1.0)]


def _not_null(schema: dict[str, Any]) -> None:
    """Publish an optional field without the null branch of ``X | None``: null is refused, leave it out."""
    schema["anyOf"] = [branch for branch in schema["anyOf"] if branch.get("type") != "null"]
    if len(schema["anyOf"]) == 1:
        schema.update(schema.pop("anyOf")[0])


class FeedbackIn(BaseModel):
    """A judgement of one candidate of a ranked request: a label or a reward, exactly one."""

    model_config = ConfigDict(
        extra="forbid",
        # The schema says "exactly one of label and reward", so a client and a fuzzer know it.
        json_schema_extra={"oneOf": [{"required": ["label"]}, {"required": ["reward"]}]},
    )

    request_id: str = Field(
        max_length=64,
        pattern=REQUEST_ID_PATTERN,
        description="The ranked request's id: `request_id` of a /rank answer, `id` of a rerank answer "
        "(its X-Request-ID).",
    )
    candidate_id: Name = Field(
        description="The candidate's id in that answer; a rerank document's index, as a string (\"0\")."
    )
    label: Label | None = Field(
        None,
        description="A grade, 0 bad, 1 acceptable, 2 best (an integer), or the probability that the reply "
        "was appropriate (a number in [0, 1]). Exactly one of label and reward.",
        json_schema_extra=_not_null,
    )
    reward: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        strict=True,
        description="A reward in [-1, 1]: -1 the reply was rejected, 0 no opinion, 1 it was taken; joined as "
        "the label (reward + 1) / 2, a probability. Exactly one of label and reward.",
        json_schema_extra=_not_null,
    )

    @field_validator("label", "reward", mode="before")
    @classmethod
    def _left_out_not_null(cls, value: Any) -> Any:
        if value is None:  # an explicit null; a field left out never reaches a validator
            raise ValueError("null is not a judgement: leave the field out")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> FeedbackIn:
        sent = [name for name in ("label", "reward") if getattr(self, name) is not None]
        if len(sent) != 1:
            raise PydanticCustomError(
                "label_or_reward",
                "label or reward: send exactly one ({which} sent)",
                {"which": "both were" if sent else "neither was"},
            )
        return self

    def joined_label(self) -> int | float:
        """The label the judgement is joined as: ``label``, or the reward as a probability.

        Raises:
            ValueError: neither was sent (the route's validation refuses that first).
        """
        if self.label is not None:
            return self.label
        if self.reward is None:
            raise ValueError("label or reward: send exactly one; neither was sent")
        return label_of_reward(self.reward)


class FeedbackOut(BaseModel):
    """A judgement queued for the feedback log."""

    request_id: str
    candidate_id: str
    label: int | float = Field(description="The label it is joined as (a reward as its probability).")
    matched: bool = Field(
        description="Whether the request is among the recent ones this service logged (then the candidate "
        "id was checked). False: it was logged longer ago, by another replica, before a restart, or not "
        "at all; the judgement is kept, and the logs' reader joins it if the request is there."
    )


ERROR_RESPONSES: dict[int | str, dict[str, str]] = {
    400: {"description": "Malformed JSON"},
    401: {"description": "API keys are configured and no valid `Authorization: Bearer <key>` was sent"},
    404: {"description": "The request is among the recent ones logged and had no such candidate"},
    408: {"description": "The body did not arrive within the read timeout"},
    409: {"description": "Request logging is off (--logs.dir): there is no log to join the feedback to"},
    413: {"description": "Body over the size limit"},
    415: {"description": "The body is not JSON"},
    422: {"description": "Invalid field (the message names it), or not exactly one of label and reward"},
    429: {"description": "The log writer is behind; retry after the Retry-After seconds"},
    503: {"description": "The service is starting or shutting down"},
}


async def feedback(
    body: Annotated[FeedbackIn, Body(openapi_examples=FEEDBACK_EXAMPLES)], logs: LogsDep
) -> FeedbackOut:
    """Judge one candidate of a ranked request (a label or a reward); joined to it in the logs."""
    label = body.joined_label()
    matched = logs.feedback(
        request_id=body.request_id, candidate_id=body.candidate_id, label=body.label, reward=body.reward
    )
    return FeedbackOut(
        request_id=body.request_id, candidate_id=body.candidate_id, label=label, matched=matched
    )


router = APIRouter(tags=["feedback"])
router.add_api_route(
    "/v1/feedback",
    feedback,
    methods=["POST"],
    status_code=202,
    response_model=FeedbackOut,
    responses=with_error_body(ERROR_RESPONSES),
)
