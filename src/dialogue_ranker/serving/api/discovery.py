"""What a client can ask the service about itself: ``GET /v1/models`` and ``GET /v1/guidelines``."""

from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from dialogue_ranker.serving.api.dependencies import RuntimeDep
from dialogue_ranker.serving.context_views import ONE_VIEW
from dialogue_ranker.serving.runtime import ServedModel


class GuidelinesOut(BaseModel):
    """The loaded guidelines, in the ABCD ``kb.json`` shape under ``intents``."""

    source: str = Field(description="The guideline file's name.")
    intents: dict[str, list[str]] = Field(description="Intent -> the agent actions it allows (sorted).")


class ModelOut(BaseModel):
    """One served model (OpenAI's model-list entry, plus what ranking clients need)."""

    id: str = Field(description="The name a request's `model` field selects it by.")
    object: Literal["model"] = "model"
    owned_by: str = "ranking-service"
    default: bool = Field(description="Requests that name no model get this one (never an alias's entry).")
    alias_of: str | None = Field(
        description="For an alias (--model-alias), the served model it names, whose fields these are; "
        "null for a served model."
    )
    model: str = Field(description="name@version of the bundle.")
    version: str
    backend: str
    max_length: int = Field(description="Most tokens in one (context + statements, candidate) pair.")
    calibration: dict[str, Any] = Field(description="How logits become scores (method and parameters).")
    threshold: float = Field(description="Default abstention threshold on the calibrated score.")
    selector: bool = Field(description="Whether a statement selector filters situations first.")
    last_turn_weight: float = Field(
        description="A multi-turn request is also scored with its last turn alone, that logit averaged "
        "in at this weight (0: one view, also when the service's ranking.last_turn_view is off)."
    )
    prior_weight: float = Field(
        description="A multi-turn request is also scored with no context (the reply's prior), that "
        "logit's difference from prior_centre added at this weight (0: no such view)."
    )
    prior_centre: float


class ModelsOut(BaseModel):
    """The served models, the default first, then the aliases."""

    object: Literal["list"] = "list"
    data: list[ModelOut]


router = APIRouter(tags=["discovery"])


def _describe(served: ServedModel, *, default: bool, alias: str | None = None) -> ModelOut:
    bundle = served.bundle
    views = bundle.views if served.ranker.settings.last_turn_view else ONE_VIEW
    return ModelOut(
        id=alias or served.name,
        default=default,
        alias_of=served.name if alias else None,
        model=bundle.model_id,
        version=bundle.version,
        backend=served.backend_name,
        max_length=bundle.ranker.max_length,
        calibration=bundle.calibration.to_dict(),
        threshold=bundle.threshold,
        selector=served.ranker.selector is not None,
        last_turn_weight=views.last_turn,
        prior_weight=views.prior,
        prior_centre=views.prior_centre,
    )


@router.get("/v1/models")
async def models(runtime: RuntimeDep) -> ModelsOut:
    """The models this service ranks with, then their aliases; a request picks one with its `model` field."""
    default = runtime.default.name
    served = [_describe(m, default=m.name == default) for m in runtime.models.values()]
    aliases = [
        _describe(runtime.models[target], default=False, alias=alias)
        for alias, target in runtime.aliases.items()
    ]
    return ModelsOut(data=served + aliases)


@router.get("/v1/guidelines")
async def guidelines(runtime: RuntimeDep) -> GuidelinesOut:
    """The intents a request's ``intent`` may name, each with the actions it allows."""
    loaded = runtime.guidelines
    return GuidelinesOut(
        source=Path(loaded.source).name,
        intents={intent: sorted(actions) for intent, actions in sorted(loaded.allowed.items())},
    )
