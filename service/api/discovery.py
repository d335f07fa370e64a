"""What a client can ask the service about itself: ``GET /v1/guidelines``."""

from pathlib import Path

from fastapi import APIRouter
from pydantic import BaseModel, Field

from service.api.dependencies import RuntimeDep


class GuidelinesOut(BaseModel):
    """The loaded guidelines, in the ABCD ``kb.json`` shape under ``intents``."""

    source: str = Field(description="The guideline file's name.")
    intents: dict[str, list[str]] = Field(description="Intent -> the agent actions it allows (sorted).")


router = APIRouter(tags=["discovery"])


@router.get("/v1/guidelines")
async def guidelines(runtime: RuntimeDep) -> GuidelinesOut:
    """The intents a request's ``intent`` may name, each with the actions it allows."""
    loaded = runtime.ranker.guidelines
    return GuidelinesOut(
        source=Path(loaded.source).name,
        intents={intent: sorted(actions) for intent, actions in sorted(loaded.allowed.items())},
    )
