"""A training recipe: a TOML file read with :mod:`tomllib`, checked by pydantic models.

    name = "dialogue-minilm-l6-cpu"
    version = "2.8.0-cpu"
    # out = "runs/dialogue-minilm-l6-cpu"   (the default: runs/<name>, under root)
    # root = ".."                           (the default: the recipe's folder's parent, the repo)

    [data]   # stage 0, "data": output file name -> ranker convert DATASET SOURCE
    "sugar.jsonl" = { dataset = "sugar", source = "../shared/data/sugar/sugar.jsonl" }
    "sugar-statement.jsonl" = { dataset = "sugar", source = "...", negatives = "statement:2" }

    [[stages]]
    name = "b-1"
    kind = "train"            # train | soup | export | evaluate | card
    runs_on = "cpu"           # cpu | gpu
    minutes_cpu = 25
    data = ["sugar.jsonl:2", "topical-chat.jsonl:0.08", "my-logs/lists.jsonl"]

Every relative path (sources, data files that are not [data] names, ``out``) is relative to
``root``, where each stage's command also runs. A ``train`` stage's ``data`` entry is a [data]
name or the path of any file in the ranking-data format (:mod:`dialogue_ranker.data.ranking_data`):
that is how a user's own lists plug in. Stages refer to earlier stages by name (``init``,
``teachers``, a soup's ``runs``, an export's ``run``, an evaluation's or card's ``bundle``).

A bad recipe is a :class:`RecipeError` naming the file, the stage and the field, never a
traceback.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

StageName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=64)]
#: Stage 0: the [data] conversions (its folder holds the converted files).
DATA_STAGE = "data"
#: Fields that describe a stage but do not change what it computes: left out of its config hash.
NOT_HASHED = {"runs_on", "minutes_cpu", "minutes_gpu", "gpu_reason", "note"}


class RecipeError(ValueError):
    """A recipe that cannot be read or does not validate; the message names file, stage and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _weighted(entry: str) -> tuple[str, float | None]:
    """``"NAME:W"`` -> (NAME, W); ``"NAME"`` -> (NAME, None). A path may itself hold ``:``."""
    head, sep, tail = entry.rpartition(":")
    if sep:
        try:
            return head, float(tail)
        except ValueError:
            pass
    return entry, None


#: The turn-level dialogue sets (their converters share the dialogue miner and its options).
DIALOGUE_SETS = ("sgd", "persona-chat", "taskmaster")
#: The datasets whose ``retrieved`` negatives come from a retrieval encoder.
RETRIEVED_NEGATIVES = ("topical-chat", *DIALOGUE_SETS)


class Conversion(_Strict):
    """One ``ranker convert`` call: its dataset, source (file or folder), negative mix and grouping."""

    dataset: Literal[
        "sugar",
        "topical-chat",
        "dailydialog-pp",
        "written-situations",
        "sgd",
        "persona-chat",
        "taskmaster",
        "taskmaster-reward",
    ]
    source: str = Field(min_length=1)
    negatives: str | None = None
    #: SUGAR only: ``request`` splits by request text (``ranker convert --group-by``).
    group_by: Literal["example", "request"] | None = None
    #: Topical-Chat only: lists whose true reply has at most this many words, and mined negative
    #: kinds left out (``ranker convert --reply-max-words``, ``--drop-negatives``).
    reply_max_words: int | None = Field(default=None, ge=1)
    drop_negatives: str | None = None
    #: The retrieval encoder ``retrieved`` negatives need (``--retriever``): Topical-Chat and the
    #: dialogue sets (SGD, persona-chat, Taskmaster).
    retriever: str | None = None
    #: SGD only: a seeded sample of this many dialogues (``--max-dialogues``).
    max_dialogues: int | None = Field(default=None, ge=1)
    #: Copies of each train list with its statements dropped, shuffled or padded with irrelevant
    #: ones (``--statement-variants``, e.g. ``"dropped,shuffled,irrelevant"``).
    statement_variants: str | None = None
    #: The dialogue sets only: ``right`` keeps the paraphrases of a true turn that the miner finds as
    #: second right replies instead of dropping them (``ranker convert --paraphrases``).
    paraphrases: Literal["drop", "right"] | None = None

    @model_validator(mode="after")
    def _options_fit_the_dataset(self) -> Conversion:
        if self.group_by is not None and self.dataset != "sugar":
            raise ValueError("group_by is for dataset 'sugar'")
        topical = (self.reply_max_words is not None, bool(self.drop_negatives))
        if any(topical) and self.dataset != "topical-chat":
            raise ValueError("reply_max_words and drop_negatives are for dataset 'topical-chat'")
        if self.retriever is not None and self.dataset not in RETRIEVED_NEGATIVES:
            raise ValueError(f"retriever is for datasets {', '.join(RETRIEVED_NEGATIVES)}")
        if self.max_dialogues is not None and self.dataset != "sgd":
            raise ValueError("max_dialogues is for dataset 'sgd'")
        if self.paraphrases is not None and self.dataset not in DIALOGUE_SETS:
            raise ValueError(f"paraphrases is for datasets {', '.join(DIALOGUE_SETS)}")
        return self


class _Stage(_Strict):
    name: StageName
    runs_on: Literal["cpu", "gpu"] = "cpu"
    minutes_cpu: float | None = Field(default=None, gt=0)
    minutes_gpu: float | None = Field(default=None, gt=0)
    #: Why a ``gpu`` stage needs one: the refusal on a machine without CUDA quotes it.
    gpu_reason: str | None = None
    note: str | None = None
    extra_args: list[str] = []

    def refs(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(field, stage it names, kinds that stage may be) for each reference to an earlier stage."""
        return []

    def estimate(self) -> str:
        """The recipe's time estimates in words (``?`` where it gives none)."""
        parts = []
        if self.minutes_cpu is not None:
            parts.append(f"~{self.minutes_cpu:g} min CPU")
        if self.minutes_gpu is not None:
            parts.append(f"~{self.minutes_gpu:g} min GPU")
        return ", ".join(parts) or "?"

    def config_hash(self) -> str:
        """A hash of the fields that change what the stage computes (not its estimates)."""
        config = self.model_dump(mode="json", exclude=NOT_HASHED)
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


RUNS = ("train", "soup")


class TrainStage(_Stage):
    """``ranker train``: ``data`` entries ``NAME_OR_PATH[:WEIGHT]``; ``init`` a finished run stage."""

    kind: Literal["train"]
    data: list[str] = Field(min_length=1)
    init: StageName | None = None
    #: A model directory (bundle) to start from instead (``ranker train --init-bundle``): a stage
    #: on top of a shipped model, whose weights are read back from its graph.
    init_bundle: str | None = Field(default=None, min_length=1)
    seed: int | None = None
    lr: float | None = Field(default=None, gt=0)
    #: 0 with ``init_bundle``: no step, the bundle's weights read back as a run (scored and mapped on
    #: its dev lists), for a soup stage to move along the line between two bundles.
    max_steps: int | None = Field(default=None, ge=0)
    batch_lists: int | None = Field(default=None, gt=0)
    dev_lists: int | None = Field(default=None, gt=0)
    precision: Literal["fp32", "bf16", "auto"] | None = None
    #: ``ranker train --attention-dropout``: 0 halves a CPU step (training/attention_dropout.py).
    attention_dropout: float | None = Field(default=None, ge=0, lt=1)
    #: Distillation: finished run stages ``"STAGE:WEIGHT"`` whose output ensemble the run learns.
    teachers: list[str] = []
    #: Model directories ``"DIR:WEIGHT"`` as teachers too (a shipped model kept where a stage on
    #: top of it should not move it).
    teacher_bundles: list[str] = []
    distill_weight: float | None = Field(default=None, ge=0, le=1)
    #: The ``data`` entries (names as written there) whose lists are distilled; default all.
    #: ``"NAME:SHARE"`` gives that file's lists their own teachers' share (``ranker train
    #: --distill-on NAME:SHARE``); the files not named then learn their labels alone.
    distill_on: list[str] = []

    @field_validator("data")
    @classmethod
    def _data_weights(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            name, weight = _weighted(entry)
            if not name:
                raise ValueError(f"{entry!r}: no file name")
            if weight is not None and weight <= 0:
                raise ValueError(f"{entry!r}: the weight must be positive")
        return entries

    @field_validator("teachers", "teacher_bundles")
    @classmethod
    def _teacher_weights(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            _, weight = _weighted(entry)
            if weight is None or weight <= 0:
                raise ValueError(f"{entry!r}: a teacher is 'NAME:WEIGHT' with a positive weight")
        return entries

    @model_validator(mode="after")
    def _distill(self) -> TrainStage:
        taught = self.teachers or self.teacher_bundles
        if (self.distill_weight is not None or self.distill_on) and not taught:
            raise ValueError("distill_weight and distill_on need teachers or teacher_bundles")
        named = {_weighted(entry)[0] for entry in self.data}
        for entry in self.distill_on:
            name, share = _weighted(entry)
            if name not in named:
                raise ValueError(f"distill_on: {name!r} is not one of this stage's data entries")
            if share is not None and not 0 <= share <= 1:
                raise ValueError(f"distill_on: {entry!r}: the teachers' share must be between 0 and 1")
        if self.init and self.init_bundle:
            raise ValueError("init and init_bundle exclude each other")
        if self.max_steps == 0 and not self.init_bundle:
            raise ValueError("max_steps = 0 reads a bundle back as a run: it needs init_bundle")
        return self

    def refs(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The run it starts from and its teachers."""
        found: list[tuple[str, str, tuple[str, ...]]] = [("init", self.init, RUNS)] if self.init else []
        return found + [("teachers", _weighted(t)[0], RUNS) for t in self.teachers]


class SoupStage(_Stage):
    """``ranker interpolate``: a weighted average of runs' weights, ``runs = ["a:0.5", "b:0.5"]``.

    The first run is ``--run``, the others ``--with RUN:W``; the weights must sum to 1.
    ``alpha`` < 1 moves the soup toward the untrained backbone (WiSE-FT), or toward
    ``toward_bundle``'s weights (``--toward-bundle``): for runs that began at a shipped bundle, the
    line back to where they started. One run is enough then.
    """

    kind: Literal["soup"]
    runs: list[str] = Field(min_length=1)
    alpha: float = Field(default=1.0, gt=0, le=1)
    toward_bundle: str | None = Field(default=None, min_length=1)

    @field_validator("runs")
    @classmethod
    def _weights(cls, entries: list[str]) -> list[str]:
        weights = [_weighted(e)[1] for e in entries]
        if any(w is None or w <= 0 for w in weights):
            raise ValueError("each run is 'STAGE:WEIGHT' with a positive weight")
        if abs(sum(w for w in weights if w is not None) - 1) > 1e-6:
            raise ValueError(f"the weights sum to {sum(w for w in weights if w is not None):g}, not 1")
        return entries

    @model_validator(mode="after")
    def _moves(self) -> SoupStage:
        if len(self.runs) == 1 and (self.alpha == 1 or self.toward_bundle is None):
            raise ValueError(
                "one run averages with nothing: name another run, or toward_bundle and an alpha below 1"
            )
        return self

    def refs(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The runs it averages."""
        return [("runs", _weighted(r)[0], RUNS) for r in self.runs]


class ExportStage(_Stage):
    """``ranker export``: the run stage's bundle, written to the stage's own folder."""

    kind: Literal["export"]
    run: StageName
    variants: list[str] | None = None
    threshold_on: list[str] | None = None
    #: Keep this bundle's threshold (``ranker export --threshold-from``), e.g. the shipped model's.
    threshold_from: str | None = None
    calibrate_on: list[str] | None = None
    last_turn_weight: float | None = Field(default=None, ge=0, le=1)
    prior_weight: float | None = Field(default=None, ge=0)
    dev_lists: int | None = Field(default=None, gt=0)
    #: Ship the most accurate graph within the size budget even when it misses the accuracy rule
    #: (``ranker export --accept-loss``): a recipe says so where its release did.
    accept_loss: bool = False
    #: The bundle's version (default: the recipe's).
    version: str | None = None
    #: The bundle's name (``ranker export --name``).
    bundle_name: str | None = None

    @model_validator(mode="after")
    def _one_threshold_source(self) -> ExportStage:
        if self.threshold_from is not None and not self.threshold_from.strip():
            raise ValueError("threshold_from names a bundle folder; leave it out to choose the threshold")
        if self.threshold_from and self.threshold_on:
            raise ValueError("threshold_from keeps a threshold and threshold_on chooses one: give one")
        return self

    def refs(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The run it exports."""
        return [("run", self.run, RUNS)]


class EvaluateStage(_Stage):
    """An evaluation of an export stage's bundle; its files go into the bundle (the card reads them).

    ``protocol = "lists"``: ``ranker evaluate --lists NAME=FILE ... --split S [--max-lists N]
    --out BUNDLE/<out>``; ``protocol = "sugar"``: ``ranker evaluate-sugar --data SUGAR --split S
    --out-md BUNDLE/<out_md>``.
    """

    kind: Literal["evaluate"]
    protocol: Literal["lists", "sugar"] = "lists"
    #: The export stage whose bundle is evaluated (default: the last export stage before this one).
    bundle: StageName | None = None
    split: Literal["train", "dev", "test", "all"] = "test"
    #: protocol lists: NAME -> a [data] name or a ranking-data file.
    lists: dict[str, str] = {}
    max_lists: int | None = Field(default=None, gt=0)
    out: str | None = Field(default=None, pattern=r"^[^/]+\.json$")
    #: protocol sugar: the SUGAR-format file, and how the bundle's training split it (by request
    #: when its SUGAR lists were converted with ``group_by = "request"``).
    sugar: str | None = None
    group_by: Literal["example", "request"] | None = None
    out_md: str | None = Field(default=None, pattern=r"^[^/]+\.md$")

    @model_validator(mode="after")
    def _protocol(self) -> EvaluateStage:
        if self.protocol == "lists":
            if not self.lists:
                raise ValueError("protocol 'lists' needs lists (NAME = FILE)")
            if self.sugar or self.out_md or self.group_by:
                raise ValueError("sugar, group_by and out_md are for protocol 'sugar'")
        else:
            if not self.sugar:
                raise ValueError("protocol 'sugar' needs sugar (the SUGAR-format file)")
            if self.split == "all":
                raise ValueError("protocol 'sugar' takes split train, dev or test")
            if self.lists or self.out or self.max_lists:
                raise ValueError("lists, out and max_lists are for protocol 'lists'")
        return self

    def refs(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The export stage whose bundle it reads."""
        return [("bundle", self.bundle, ("export",))] if self.bundle else []


class CardStage(_Stage):
    """``ranker card BUNDLE``: the model card, once the evaluations exist."""

    kind: Literal["card"]
    bundle: StageName | None = None

    def refs(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The export stage whose bundle it reads."""
        return [("bundle", self.bundle, ("export",))] if self.bundle else []


Stage = Annotated[
    TrainStage | SoupStage | ExportStage | EvaluateStage | CardStage, Field(discriminator="kind")
]


class Recipe(_Strict):
    """A whole recipe: its name and version, where it writes, the [data] conversions, the stages."""

    name: StageName
    version: str = Field(min_length=1)
    description: str | None = None
    #: The folder relative paths are read against and commands run in, relative to the recipe file.
    root: str = ".."
    #: The output folder, relative to root (default ``runs/<name>``).
    out: str | None = None
    data: dict[str, Conversion] = {}
    stages: list[Stage] = Field(min_length=1)

    @field_validator("data")
    @classmethod
    def _file_names(cls, data: dict[str, Conversion]) -> dict[str, Conversion]:
        for name in data:
            if "/" in name or name.startswith(".") or not name.endswith(".jsonl"):
                raise ValueError(f"{name!r}: a [data] output is a plain file name ending in .jsonl")
        return data

    @model_validator(mode="after")
    def _references(self) -> Recipe:
        """Unique stage names; each reference names an earlier stage of the kind it needs."""
        seen: dict[str, str] = {}
        for i, stage in enumerate(self.stages):
            where = f"stages[{i}] ({stage.name})"
            if stage.name == DATA_STAGE or stage.name.startswith("."):
                raise ValueError(f"{where}: the name {stage.name!r} is reserved (the data conversions)")
            if stage.name in seen:
                raise ValueError(f"{where}: name {stage.name!r} is used by an earlier stage")
            for field, ref, kinds in stage.refs():
                if ref not in seen:
                    raise ValueError(f"{where}.{field}: {ref!r} is not an earlier stage")
                if seen[ref] not in kinds:
                    raise ValueError(
                        f"{where}.{field}: stage {ref!r} is a {seen[ref]}, not a {' or '.join(kinds)}"
                    )
            if isinstance(stage, EvaluateStage | CardStage) and stage.bundle is None:
                if "export" not in seen.values():
                    raise ValueError(f"{where}: no export stage before it to take the bundle from")
                stage.bundle = [n for n, k in seen.items() if k == "export"][-1]
            if stage.runs_on == "gpu" and stage.kind not in RUNS:
                raise ValueError(f"{where}.runs_on: only train and soup stages run on a GPU")
            seen[stage.name] = stage.kind
        return self

    def data_hash(self) -> str:
        """The config hash of stage 0 (the conversions)."""
        config = {k: v.model_dump(mode="json") for k, v in sorted(self.data.items())}
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def _location(loc: tuple[int | str, ...], raw: dict[str, Any]) -> str:
    """``('stages', 3, 'train', 'lr')`` -> ``stages[3] (open-1).lr``: the stage named, not just numbered."""
    out = ""
    i = 0
    while i < len(loc):
        part = loc[i]
        if isinstance(part, int):
            out += f"[{part}]"
            if loc[:i] == ("stages",):
                stages = raw.get("stages")
                if isinstance(stages, list) and part < len(stages) and isinstance(stages[part], dict):
                    name = stages[part].get("name")
                    if name:
                        out += f" ({name})"
                    # the discriminated union's tag (the kind) follows; it is no field of the file
                    if i + 1 < len(loc) and loc[i + 1] == stages[part].get("kind"):
                        i += 1
        else:
            out += f".{part}" if out else str(part)
        i += 1
    return out or "(top level)"


def parse_recipe(text: str, source: str = "<recipe>") -> Recipe:
    """The recipe in ``text``; :class:`RecipeError` naming ``source`` and the field if it is bad."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RecipeError(f"{source}: not valid TOML: {e}") from None
    try:
        return Recipe.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            msg = err["msg"].removeprefix("Value error, ")
            loc = tuple(err["loc"])
            if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
                loc += ("kind",)  # the stage's kind is missing or unknown
            lines.append(f"  {_location(loc, raw)}: {msg}")
        raise RecipeError(f"{source}: invalid recipe:\n" + "\n".join(lines)) from None


def load_recipe(path: Path) -> Recipe:
    """Read and validate the recipe file at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise RecipeError(f"{path}: cannot read the recipe: {e.strerror}") from None
    return parse_recipe(text, str(path))
