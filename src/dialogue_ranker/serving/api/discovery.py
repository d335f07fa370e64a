"""What a client can ask the service about itself: ``GET /v1/models`` and ``GET /v1/guidelines``."""

from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from dialogue_ranker.serving.api.dependencies import NOT_READY_RESPONSE, RuntimeDep
from dialogue_ranker.serving.api.links import MODEL_LINKS
from dialogue_ranker.serving.context_views import ONE_VIEW
from dialogue_ranker.serving.runtime import ServedModel


class GuidelinesOut(BaseModel):
    """The loaded guidelines, in the ABCD ``kb.json`` shape under ``intents``."""

    source: str = Field(description="The guideline file's name.")
    intents: dict[str, list[str]] = Field(description="Intent -> the agent actions it allows (sorted).")


class BackendTrialOut(BaseModel):
    """One runtime that ``--backend auto`` tried at start."""

    runtime: str = Field(description="`onnx` (ONNX Runtime) or `openvino`.")
    precision: str = Field(description="`bf16` or `f32` for OpenVINO; the graph's own for ONNX Runtime.")
    accepted: bool = Field(description="Whether its scores were within tolerance of the fp32 reference.")
    note: str = Field(description="Why it was refused or not tried (empty when accepted).")
    candidates_per_s: float | None = Field(description="Sample candidates scored per second at start.")
    top1_agreement: float | None = Field(
        description="Share of sample sequences whose best candidate is the fp32 reference's."
    )
    mean_abs_diff: float | None = Field(description="Mean absolute difference of its calibrated scores.")
    max_abs_diff: float | None = Field(description="Largest absolute difference of its calibrated scores.")


class BackendChoiceOut(BaseModel):
    """Which runtime scores the ranker, and why."""

    mode: Literal["auto", "forced"] = Field(description="`auto`: measured at start; `forced`: by --backend.")
    backend: str
    precision: str
    reason: str
    trials: list[BackendTrialOut] = Field(description="Each runtime auto tried, in order (none when forced).")


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
    precision: str = Field(description="What the backend computes in: `bf16`, `f32`, the graph's (`int8`).")
    backend_choice: BackendChoiceOut
    max_length: int = Field(description="Most tokens in one (context + statements, candidate) pair.")
    calibration: dict[str, Any] = Field(description="How logits become scores (method and parameters).")
    threshold: float = Field(description="Default abstention threshold on the calibrated score.")
    calibration_in_force: str = Field(
        description="Which map `calibration` and `threshold` are: `bundle` (the bundle's own, fitted on ONNX "
        "Runtime's logits), or the runtime whose own map the bundle carries and that scores here "
        "(`openvino-bf16`...; see `ranker calibrate-runtimes`)."
    )
    calibrated_by: dict[str, Any] | None = Field(
        default=None,
        description="What fitted `calibration` and `threshold` when `ranker calibrate` did: the lists "
        "file, its SHA-256, list count, date, method, held-out figures (null: the export's own fit).",
    )
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
        precision=served.backend_choice.precision,
        backend_choice=BackendChoiceOut.model_validate(served.backend_choice.to_dict()),
        max_length=bundle.ranker.max_length,
        calibration=bundle.calibration.to_dict(),
        threshold=bundle.threshold,
        calibration_in_force=bundle.calibration_in_force,
        calibrated_by=bundle.metadata.get("calibrated_by"),
        last_turn_weight=views.last_turn,
        prior_weight=views.prior,
        prior_centre=views.prior_centre,
    )


@router.get("/v1/models", responses={200: {"links": MODEL_LINKS}, **NOT_READY_RESPONSE})
async def models(runtime: RuntimeDep) -> ModelsOut:
    """The models this service ranks with, then their aliases; a request picks one with its `model` field."""
    default = runtime.default.name
    served = [_describe(m, default=m.name == default) for m in runtime.models.values()]
    aliases = [
        _describe(runtime.models[target], default=False, alias=alias)
        for alias, target in runtime.aliases.items()
    ]
    return ModelsOut(data=served + aliases)


@router.get("/v1/guidelines", responses=NOT_READY_RESPONSE)
async def guidelines(runtime: RuntimeDep) -> GuidelinesOut:
    """The intents a request's ``intent`` may name, each with the actions it allows."""
    loaded = runtime.guidelines
    return GuidelinesOut(
        source=Path(loaded.source).name,
        intents={intent: sorted(actions) for intent, actions in sorted(loaded.allowed.items())},
    )
