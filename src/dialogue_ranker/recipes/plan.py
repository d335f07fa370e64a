"""A recipe as a plan: its steps, the ``ranker`` command each runs, and where its output goes.

Stage 0 is the data conversions, then each stage in order; a step's config hash and marker say
whether it is done.

:mod:`dialogue_ranker.recipes.runner` runs a plan; ``ranker recipe show`` and ``--dry-run`` read it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.recipes.schema import (
    DATA_STAGE,
    CardStage,
    Conversion,
    EvaluateStage,
    ExportStage,
    Recipe,
    RecipeError,
    SoupStage,
    TrainStage,
    _Stage,
    _weighted,
    load_recipe,
)

MARKER = ".stage-done.json"
LOG = "recipe.log"


def ranker_command() -> list[str]:
    """The ``ranker`` command of this interpreter's environment (its script, else ``-m``)."""
    script = Path(sys.executable).parent / "ranker"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "dialogue_ranker.cli"]


@dataclass
class Step:
    """One unit of the plan: a stage (or stage 0) with its commands and config hash."""

    name: str
    kind: str
    runs_on: str
    estimate: str
    config_hash: str
    #: (label, argv after ``ranker``): one per command; the data stage has one per conversion.
    commands: list[tuple[str, list[str]]]
    stage: _Stage | None = None


class Plan:
    """A loaded recipe, its paths and its steps: what ``run``, ``show`` and ``--dry-run`` read."""

    def __init__(self, path: Path):
        self.path = path
        self.recipe: Recipe = load_recipe(path)
        self.root = (path.resolve().parent / self.recipe.root).resolve()
        self.out_rel = self.recipe.out or f"runs/{self.recipe.name}"
        self.out = self.root / self.out_rel
        self.steps = self._steps()

    # -- paths, relative to root where the recipe gives them so (the commands run in root) --
    def stage_dir(self, name: str) -> str:
        """A stage's folder, relative to root."""
        return f"{self.out_rel}/{name}"

    def data_file(self, entry: str) -> str:
        """A [data] name's converted file, else the entry itself (a path relative to root)."""
        return f"{self.stage_dir(DATA_STAGE)}/{entry}" if entry in self.recipe.data else entry

    def _steps(self) -> list[Step]:
        steps = []
        if self.recipe.data:
            commands = [(name, self._convert(name, conv)) for name, conv in self.recipe.data.items()]
            steps.append(Step(DATA_STAGE, "convert", "cpu", "", self.recipe.data_hash(), commands))
        for stage in self.recipe.stages:
            argv = self._command(stage)
            steps.append(
                Step(
                    stage.name,
                    stage.kind,
                    stage.runs_on,
                    stage.estimate(),
                    _hash(stage.config_hash(), argv),
                    [(stage.name, argv)],
                    stage,
                )
            )
        return steps

    def _convert(self, name: str, conv: Conversion) -> list[str]:
        argv = ["convert", conv.dataset, conv.source, f"{self.stage_dir(DATA_STAGE)}/.partial/{name}"]
        argv += ["--negatives", conv.negatives] if conv.negatives else []
        argv += ["--reply-max-words", str(conv.reply_max_words)] if conv.reply_max_words else []
        argv += ["--drop-negatives", conv.drop_negatives] if conv.drop_negatives else []
        argv += ["--retriever", conv.retriever] if conv.retriever else []
        argv += ["--max-dialogues", str(conv.max_dialogues)] if conv.max_dialogues else []
        argv += ["--statement-variants", conv.statement_variants] if conv.statement_variants else []
        argv += ["--paraphrases", conv.paraphrases] if conv.paraphrases else []
        return argv + (["--group-by", conv.group_by] if conv.group_by else [])

    def _command(self, stage: _Stage) -> list[str]:
        """The stage's command after ``ranker``: its kind's flags, then its ``extra_args``."""
        if isinstance(stage, TrainStage):
            argv = self._train(stage)
        elif isinstance(stage, SoupStage):
            argv = self._soup(stage)
        elif isinstance(stage, ExportStage):
            argv = self._export(stage)
        elif isinstance(stage, EvaluateStage):
            argv = self._evaluate(stage)
        elif isinstance(stage, CardStage):
            argv = ["card", self.stage_dir(stage.bundle or "")]
        else:  # pragma: no cover - the schema's union is closed
            raise RecipeError(f"stage {stage.name}: unknown kind")
        return argv + list(stage.extra_args)

    def _train(self, stage: TrainStage) -> list[str]:
        argv = ["train"]
        for entry in stage.data:
            name, weight = _weighted(entry)
            argv += ["--data", self.data_file(name) + (f":{weight:g}" if weight is not None else "")]
        if stage.init:
            argv += ["--init", self.stage_dir(stage.init)]
        if stage.init_bundle:
            argv += ["--init-bundle", stage.init_bundle]
        for teacher in stage.teachers:
            name, weight = _weighted(teacher)
            argv += ["--teacher", f"{self.stage_dir(name)}:{weight:g}"]
        for teacher in stage.teacher_bundles:
            argv += ["--teacher", teacher]
        for entry in stage.distill_on:
            name, share = _weighted(entry)
            share_text = f":{share:g}" if share is not None else ""
            argv += ["--distill-on", Path(self.data_file(name)).stem + share_text]
        flags = [
            "distill_weight", "batch_lists", "lr", "seed", "max_steps", "precision", "dev_lists",
            "attention_dropout",
        ]  # fmt: skip
        return argv + _flags(stage, flags) + ["--out", self.stage_dir(stage.name)]

    def _soup(self, stage: SoupStage) -> list[str]:
        (first, _), *others = [_weighted(r) for r in stage.runs]
        argv = ["interpolate", "--run", self.stage_dir(first)]
        for name, weight in others:
            argv += ["--with", f"{self.stage_dir(name)}:{weight:g}"]
        if stage.toward_bundle:
            argv += ["--toward-bundle", stage.toward_bundle]
        alpha = f"{stage.alpha:g}"
        return argv + ["--alpha", alpha, "--alphas", alpha, "--out", self.stage_dir(stage.name)]

    def _export(self, stage: ExportStage) -> list[str]:
        argv = ["export", "--run", self.stage_dir(stage.run), "--out", self.stage_dir(stage.name)]
        argv += ["--build", f"{self.out_rel}/.build/{stage.name}"]
        argv += ["--version", stage.version or self.recipe.version]
        if stage.bundle_name:
            argv += ["--name", stage.bundle_name]
        for field in ("variants", "threshold_on", "calibrate_on"):
            value = getattr(stage, field)
            if value:
                argv += [f"--{field.replace('_', '-')}", ",".join(value)]
        argv += ["--threshold-from", stage.threshold_from] if stage.threshold_from else []
        argv += ["--accept-loss"] if stage.accept_loss else []
        return argv + _flags(stage, ["last_turn_weight", "prior_weight", "dev_lists"])

    def _evaluate(self, stage: EvaluateStage) -> list[str]:
        bundle = self.stage_dir(stage.bundle or "")
        if stage.protocol == "lists":
            argv = ["evaluate", "--model", bundle, "--split", stage.split]
            for name, entry in stage.lists.items():
                argv += ["--lists", f"{name}={self.data_file(entry)}"]
            argv += _flags(stage, ["max_lists"])
            return argv + ["--out", f"{bundle}/{stage.out or f'eval-{stage.name}.json'}"]
        argv = ["evaluate-sugar", "--model", bundle, "--data", self.data_file(stage.sugar or "")]
        argv += ["--split", stage.split] + (["--group-by", stage.group_by] if stage.group_by else [])
        return argv + ["--out-md", f"{bundle}/{stage.out_md or f'eval-sugar-{stage.split}.md'}"]

    # -- status --
    def marker(self, step: Step) -> dict | None:
        """The step's ``.stage-done.json``, or None where it has none (or an unreadable one)."""
        path = self.out / step.name / MARKER
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def statuses(self) -> list[tuple[Step, str]]:
        """Each step with ``done``, or why it is pending; a step after a pending one is pending."""
        found, earlier_pending = [], False
        for step in self.steps:
            marker = self.marker(step)
            if marker is not None and marker.get("config_hash") == step.config_hash and not earlier_pending:
                status = f"done ({marker.get('seconds', 0):.0f} s, {marker.get('finished_at', '?')})"
            else:
                if marker is not None and marker.get("config_hash") != step.config_hash:
                    status = "pending (its config changed since it ran)"
                elif marker is not None:
                    status = "pending (an earlier stage runs again)"
                elif step.kind == "train" and any((self.out / step.name / "checkpoints").glob("step-*.pt")):
                    status = "pending (interrupted: resumes from its last checkpoint)"
                elif (self.out / step.name).exists():
                    status = "pending (interrupted: its partial folder is removed first)"
                else:
                    status = "pending"
                earlier_pending = True
            found.append((step, status))
        return found

    def missing_inputs(self, steps: list[Step]) -> list[str]:
        """Files the steps read that neither exist nor come from [data]: a user's file misnamed."""
        missing = []
        for step in steps:
            stage = step.stage
            entries: list[str] = []
            if step.name == DATA_STAGE:
                entries = [c.source for c in self.recipe.data.values()]
            elif isinstance(stage, TrainStage):
                entries = [_weighted(e)[0] for e in stage.data]
            elif isinstance(stage, EvaluateStage):
                entries = list(stage.lists.values()) + ([stage.sugar] if stage.sugar else [])
            for entry in entries:
                if entry not in self.recipe.data and not (self.root / entry).exists():
                    missing.append(f"stage {step.name}: {entry} (relative to {self.root}) does not exist")
        return missing


def _flags(stage: _Stage, fields: list[str]) -> list[str]:
    argv = []
    for field in fields:
        value = getattr(stage, field)
        if value is not None:
            argv += [f"--{field.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    return argv


def _hash(config_hash: str, argv: list[str]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps([config_hash, argv]).encode()).hexdigest()[:16]
