"""The service's one settings declaration: CLI flags and ``RANKER_*`` environment variables.

Every setting is declared once here. ``ranker serve --help`` lists the flags (nested groups
as ``--batching.max-pairs``); the environment variable of a field is ``RANKER_`` plus its path
with ``__`` between levels (``RANKER_BATCHING__MAX_PAIRS``). Built once in the entry point and
passed down; nothing reads it at import time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from dialogue_ranker.serving.settings_groups import (
    AuthSettings,
    AutoSettings,
    BanksSettings,
    BatchingSettings,
    BreakerSettings,
    FakeSettings,
    LimitsSettings,
    LogsSettings,
    OnnxSettings,
    OpenVinoSettings,
    RankingSettings,
    ServerSettings,
    TritonSettings,
)

#: The repository root (``src/dialogue_ranker/serving/`` is three levels down), found from the
#: package location so a checkout's defaults work from any cwd. An installed package (the Docker
#: image) sets ``RANKER_MODEL`` instead.
REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_MODEL_DIR = REPO_ROOT / "models" / "dialogue-minilm-l6"
DEFAULT_GUIDELINES = Path(__file__).resolve().parent / "assets" / "guidelines.json"

BackendName = Literal["auto", "onnx", "openvino", "triton", "fake"]
#: A served model's name: what requests and metrics call it.
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class Settings(BaseSettings):
    """All settings of the ranking service."""

    model_config = SettingsConfigDict(
        env_prefix="RANKER_",
        env_nested_delimiter="__",
        nested_model_default_partial_update=True,
        cli_prog_name="ranker serve",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        cli_avoid_json=True,
        extra="ignore",
    )

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=0, le=65535, description="Port to listen on.")
    backend: BackendName = Field(
        "auto",
        description="Inference backend: `auto` (the fastest in-process runtime whose scores on the bundle's "
        "sample sequences are within tolerance of fp32, measured at start; see the auto group), `onnx` "
        "(ONNX Runtime), `openvino`, `triton` or `fake`.",
    )
    model: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: [str(DEFAULT_MODEL_DIR)],
        description="A model bundle directory (holds metadata.json), or NAME=DIR to serve it under NAME "
        "(default: the bundle's name). Repeat the flag (or separate with commas) to serve several; the "
        "first is the default.",
    )
    model_alias: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="ALIAS=NAME: requests may name the served model NAME as ALIAS too (a client's fixed "
        "model name, e.g. rerank-v3.5=dialogue-minilm-l6); GET /v1/models lists it. Repeat the flag (or "
        "separate with commas) for several. An alias of no served model stops the start.",
    )
    bank: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="NAME=FILE: a response bank (JSONL, one response a line: id, text, optional generator "
        "and action) that a /rank request draws candidates from with `bank: NAME`. Repeat the flag (or "
        "separate with commas) for several. Embedded at start in the background (/readyz is not ready until "
        "every bank is); a bad file stops the start, naming its line and field. Reloaded live by POST "
        "/v1/banks/{name}/reload, SIGHUP or banks.watch-interval-s (only new texts are embedded).",
    )
    guidelines: Path = Field(
        DEFAULT_GUIDELINES, description="ABCD-format kb.json: intent -> allowed agent actions."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    shutdown_timeout_s: int = Field(
        15,
        ge=1,
        description="On SIGTERM, how long requests in flight may take to finish before the server closes "
        "them (keep it below the orchestrator's grace period).",
    )
    executor_threads: int = Field(
        4,
        ge=2,
        le=256,
        description="Threads for tokenization and model loading, off the event loop (each batcher runs its "
        "backend calls on threads of its own, batching.workers of them).",
    )
    batching: BatchingSettings = Field(default_factory=BatchingSettings)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    onnx: OnnxSettings = Field(default_factory=OnnxSettings)
    openvino: OpenVinoSettings = Field(default_factory=OpenVinoSettings)
    auto: AutoSettings = Field(default_factory=AutoSettings)
    triton: TritonSettings = Field(default_factory=TritonSettings)
    triton_url: str | None = Field(
        None, description="Shorthand for --triton.url (the flag the deployment docs name)."
    )
    fake: FakeSettings = Field(default_factory=FakeSettings)
    ranking: RankingSettings = Field(default_factory=RankingSettings)
    banks: BanksSettings = Field(default_factory=BanksSettings)
    logs: LogsSettings = Field(default_factory=LogsSettings)

    @field_validator("model", "model_alias", "bank", mode="before")
    @classmethod
    def _model_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, Path):
            return [str(value)]
        if isinstance(value, list | tuple):
            return [str(part) for part in value]
        return value

    @field_validator("model")
    @classmethod
    def _models_given(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one model is needed")
        return value

    @field_validator("model_alias")
    @classmethod
    def _aliases_well_formed(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for entry in value:
            alias, sep, target = entry.partition("=")
            if not sep or not _MODEL_NAME.fullmatch(alias) or not target:
                raise ValueError(
                    f"--model-alias {entry!r} is not ALIAS=NAME (ALIAS: letters, digits, '.', '_', '-', "
                    "at most 64, a letter or digit first)"
                )
            if alias in seen:
                raise ValueError(f"--model-alias {alias!r} is given twice")
            seen.add(alias)
        return value

    @field_validator("bank")
    @classmethod
    def _banks_well_formed(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for entry in value:
            name, sep, path = entry.partition("=")
            if not sep or not _MODEL_NAME.fullmatch(name) or not path:
                raise ValueError(
                    f"--bank {entry!r} is not NAME=FILE (NAME: letters, digits, '.', '_', '-', at most 64, "
                    "a letter or digit first)"
                )
            if name in seen:
                raise ValueError(f"--bank {name!r} is given twice")
            seen.add(name)
        return value

    def served_banks(self) -> list[tuple[str, Path]]:
        """(name, file) of each ``--bank``, in the order given."""
        return [(name, Path(path)) for name, _, path in (entry.partition("=") for entry in self.bank)]

    def model_aliases(self) -> dict[str, str]:
        """Each ``--model-alias``: alias -> the served model's name, in the order given."""
        return {alias: target for alias, _, target in (entry.partition("=") for entry in self.model_alias)}

    def served_models(self) -> list[tuple[str | None, Path]]:
        """(name or None for the bundle's own, directory) of each ``--model``, the default first."""
        served: list[tuple[str | None, Path]] = []
        for entry in self.model:
            name, sep, directory = entry.partition("=")
            if sep and _MODEL_NAME.fullmatch(name):
                served.append((name, Path(directory)))
            else:
                served.append((None, Path(entry)))
        return served

    @model_validator(mode="after")
    def _one_model_on_triton(self) -> Settings:
        # Triton's model names are settings of their own (triton.ranker-model): one bundle there.
        if self.backend == "triton" and len(self.model) > 1:
            raise ValueError("the triton backend serves one model; give --model once")
        return self

    @model_validator(mode="after")
    def _apply_triton_url(self) -> Settings:
        # One value: the shorthand, when given, is the Triton group's url.
        if self.triton_url is not None:
            self.triton.url = self.triton_url
        return self
