"""The response banks: ``GET /v1/banks`` (and one by name), and ``POST /v1/banks/{name}/reload``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import APIRouter
from fastapi import Path as PathParameter
from pydantic import BaseModel, Field

from dialogue_ranker.serving.api.dependencies import NOT_READY_RESPONSE, RuntimeDep
from dialogue_ranker.serving.api.error_schema import with_error_body
from dialogue_ranker.serving.api.links import BANK_LINKS
from dialogue_ranker.serving.banks import BankSet, BankState, LoadRecord, LoadTrigger, ServedBank
from dialogue_ranker.serving.errors import BankNotFound


class LoadOut(BaseModel):
    """One load of a bank's file."""

    trigger: LoadTrigger = Field(
        description="What loaded it: `start`, `api` (POST /v1/banks/{name}/reload), `signal` (SIGHUP) or "
        "`watch` (banks.watch-interval-s)."
    )
    at: dt.datetime = Field(description="When it ended (UTC).")
    outcome: Literal["ok", "failed"] = Field(
        description="`ok`: the file's version is served; `failed`: the version served before stays served."
    )
    error: str | None = Field(description="Why it failed (a bad file: its path, line and field), else null.")
    embedded: int = Field(description="Texts the retrieval encoder embedded: those no vector was known for.")
    reused: int = Field(description="Responses whose vector was reused by its text's digest (memory, cache).")
    seconds: float = Field(description="How long it took: the file read and checked, vectors, index, hubness")

    @classmethod
    def of(cls, record: LoadRecord) -> LoadOut:
        """The record as published."""
        return cls(
            trigger=record.trigger,
            at=record.at,
            outcome="ok" if record.ok else "failed",
            error=record.error,
            embedded=record.embedded,
            reused=record.reused,
            seconds=round(record.seconds, 3),
        )


class BankOut(BaseModel):
    """One served bank."""

    name: str = Field(description="What a request's `bank` field names it by.")
    file: str = Field(description="The bank file's name.")
    size: int = Field(description="Responses in the bank (the served version's).")
    version: str | None = Field(
        description="The served version: SHA-256 of the file's records (id, text, generator, action, in "
        "order), so two files with the same responses have the same version; null until the first load."
    )
    encoder: str = Field(description="The retrieval encoder its vectors come from: name, precision, digest.")
    state: BankState = Field(
        description="`waiting`, `embedding` (its first load), `ready` (a version is served; a failed reload "
        "keeps it so) or `failed` (its first load failed)."
    )
    ready: bool = Field(description="Whether requests may name it.")
    reloading: bool = Field(description="A reload is building its next version (the current one is served).")
    embedded: int = Field(description="Responses whose vectors are ready (size once ready).")
    from_cache: bool | None = Field(
        description="No text of the served version had to be embedded: every vector came from the cache or "
        "the version before (null until ready)."
    )
    loaded_at: dt.datetime = Field(description="When the served version's file was read (UTC).")
    embedded_at: dt.datetime | None = Field(
        description="When the served version's vectors were ready (UTC; null until then)."
    )
    embed_seconds: float | None = Field(description="How long the served version's vectors took.")
    memory_bytes: int | None = Field(description="Memory its vectors hold (int8 codes and scales).")
    error: str | None = Field(description="Why its first load failed (state `failed`), else null.")
    last_load: LoadOut | None = Field(
        description="The last load of its file, at start or by a reload, ok or failed (null while the first "
        "runs)."
    )


class BanksOut(BaseModel):
    """The served banks, in the order given at start."""

    object: Literal["list"] = "list"
    data: list[BankOut]


#: A bank's name in a path: as ``--bank NAME=FILE`` takes it.
BankName = Annotated[
    str,
    PathParameter(
        description="The bank's name (GET /v1/banks lists them).",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        examples=["support"],
    ),
]
BANK_RESPONSES = with_error_body(
    {
        404: {"description": "No bank has that name"},
        422: {"description": "The name is not a bank's name (letters, digits, '.', '_', '-'; at most 64)"},
    }
)
RELOAD_RESPONSES = with_error_body(
    {
        401: {"description": "API keys are configured and no valid `Authorization: Bearer <key>` was sent"},
        404: {"description": "No bank has that name"},
        422: {
            "description": "The name is not a bank's name, or the bank's file cannot be read or has a bad "
            "line (`invalid_bank_file`: its path, line and field); the version served before stays served"
        },
        502: {"description": "The retrieval encoder failed on a new text; the version before stays served"},
        503: {"description": "The bank's first load is not done, or the service is shutting down"},
    }
)

router = APIRouter()


def _describe(served: ServedBank, banks: BankSet) -> BankOut:
    version = served.current
    return BankOut(
        name=served.name,
        file=served.path.name,
        size=served.bank.size,
        version=None if version is None else version.version,
        encoder=banks.encoder.spec.label,
        state=served.state,
        ready=version is not None,
        reloading=served.reloading,
        embedded=served.embedded,
        from_cache=None if version is None else version.embedded == 0,
        loaded_at=banks.read_at if version is None else version.read_at,
        embedded_at=None if version is None else version.ready_at,
        embed_seconds=None if version is None else round(version.seconds, 3),
        memory_bytes=None if version is None else version.index.vectors.nbytes,
        error=served.error,
        last_load=None if served.last_load is None else LoadOut.of(served.last_load),
    )


def _served(runtime: RuntimeDep, name: str) -> tuple[ServedBank, BankSet]:
    banks = runtime.banks
    if banks is None:
        raise BankNotFound(name, [])
    return banks.served(name), banks


@router.get("/v1/banks", tags=["discovery"], responses={200: {"links": BANK_LINKS}, **NOT_READY_RESPONSE})
async def banks(runtime: RuntimeDep) -> BanksOut:
    """The response banks a `/rank` request may name with `bank` (none unless started with --bank)."""
    served = runtime.banks
    if served is None:
        return BanksOut(data=[])
    return BanksOut(data=[_describe(bank, served) for bank in served.banks.values()])


@router.get("/v1/banks/{name}", tags=["discovery"], responses={**BANK_RESPONSES, **NOT_READY_RESPONSE})
async def bank(name: BankName, runtime: RuntimeDep) -> BankOut:
    """One bank, as `GET /v1/banks` lists it: its version, state and last load."""
    served, banks = _served(runtime, name)
    return _describe(served, banks)


@router.post("/v1/banks/{name}/reload", tags=["operations"], responses=RELOAD_RESPONSES)
async def reload_bank(name: BankName, runtime: RuntimeDep) -> BankOut:
    """Read the bank's file again and serve it: only its new texts are embedded; requests switch in one step.

    The whole file is checked first: a bad line answers 422 naming the file, line and field, and
    the version served before stays served. Requests in flight finish on the old version. A second
    reload of the same bank waits for the first, then reads the file again.
    """
    served, banks = _served(runtime, name)
    await banks.reload(served.name, trigger=LoadTrigger.API)
    return _describe(served, banks)
