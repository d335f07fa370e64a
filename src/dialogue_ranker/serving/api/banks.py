"""``GET /v1/banks``: the response banks a request's ``bank`` may name, and how far each is."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from dialogue_ranker.serving.api.dependencies import NOT_READY_RESPONSE, RuntimeDep
from dialogue_ranker.serving.api.links import BANK_LINKS
from dialogue_ranker.serving.banks import BankSet, BankState, ServedBank


class BankOut(BaseModel):
    """One served bank."""

    name: str = Field(description="What a request's `bank` field names it by.")
    file: str = Field(description="The bank file's name.")
    size: int = Field(description="Responses in the bank.")
    encoder: str = Field(description="The retrieval encoder its vectors come from: name, precision, digest.")
    state: BankState = Field(description="`waiting`, `embedding`, `ready` or `failed`.")
    ready: bool = Field(description="Whether requests may name it.")
    embedded: int = Field(description="Responses whose vectors are ready (size once ready).")
    from_cache: bool | None = Field(description="Its vectors were read from the cache (null until ready).")
    loaded_at: dt.datetime = Field(description="When the bank file was read (UTC).")
    embedded_at: dt.datetime | None = Field(description="When its vectors were ready (UTC; null until then).")
    embed_seconds: float | None = Field(description="How long its vectors took: read or computed.")
    memory_bytes: int | None = Field(description="Memory its vectors hold (int8 codes and scales).")
    error: str | None = Field(description="Why it failed (state `failed`), else null.")


class BanksOut(BaseModel):
    """The served banks, in the order given at start."""

    object: Literal["list"] = "list"
    data: list[BankOut]


router = APIRouter(tags=["discovery"])


def _describe(served: ServedBank, banks: BankSet) -> BankOut:
    bank, index = served.bank, served.index
    return BankOut(
        name=bank.name,
        file=bank.path.name,
        size=bank.size,
        encoder=banks.encoder.spec.label,
        state=served.state,
        ready=served.state is BankState.READY,
        embedded=served.embedded,
        from_cache=served.from_cache,
        loaded_at=served.loaded_at,
        embedded_at=served.embedded_at,
        embed_seconds=None if served.seconds is None else round(served.seconds, 3),
        memory_bytes=None if index is None else index.vectors.nbytes,
        error=served.error,
    )


@router.get("/v1/banks", responses={200: {"links": BANK_LINKS}, **NOT_READY_RESPONSE})
async def banks(runtime: RuntimeDep) -> BanksOut:
    """The response banks a `/rank` request may name with `bank` (none unless started with --bank)."""
    served = runtime.banks
    if served is None:
        return BanksOut(data=[])
    return BanksOut(data=[_describe(bank, served) for bank in served.banks.values()])
