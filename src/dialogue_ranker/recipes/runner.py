"""Run a recipe's stages in order, each a ``ranker`` subprocess, resumable stage by stage.

Layout under the recipe's ``out``: ``data/`` (stage 0, the conversions), then one folder per
stage, ``<out>/<stage>/``, which holds what the stage writes (a run, a soup, a bundle) or, for an
evaluation or card (whose files go into the bundle the card reads), its log. ``stage.log`` in
each folder is the stage's own output; ``recipe.log`` beside them is the sequence: each stage's
start, end and seconds (or skip, or failure). A finished stage writes
``<out>/<stage>/.stage-done.json``: the command, seconds, finish time and the hash of the stage's
config (its fields, not its time estimates, and its command).

A rerun skips each stage whose marker holds the same hash, up to the first that does not; that
stage and every one after it run again (a later stage's marker is stale once an earlier stage ran
again). A stage folder without a valid marker is a run that was interrupted or failed: it is
removed before the stage starts over, except a train stage that left checkpoints (``ranker train
--checkpoint-every``) and started with the same config hash, with no earlier stage run again since:
it continues from its last checkpoint (``ranker train --resume``), so a stage of hours runs in
pieces, the recipe killed and run again between them. The data stage is finer-grained: each
conversion is written to ``data/.partial/`` and moved into place when it ends, with its own
marker, so an interrupted conversion stage keeps the files already converted.

A ``runs_on = "gpu"`` stage that is going to run, on a machine where ``torch.cuda.is_available()``
is false, refuses the whole run before anything starts, quoting the recipe's ``gpu_reason``;
``--allow-slow`` runs it on the CPU and says how long it is expected to take. torch is imported
only for that check, only when such a stage is pending.

Written by hand rather than with a workflow library (Snakemake, doit, Luigi, Prefect): the
sequencing is a loop over an ordered list, and the resume rule is one marker file per stage; a
dozen lines do it, where a library would bring a new dependency, its own notion of targets
(files, which a training run's folder is not one of) and a second place to read how the model is
built.
"""

from __future__ import annotations

import codecs
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from dialogue_ranker.recipes.plan import LOG, MARKER, Plan, Step, _hash, ranker_command
from dialogue_ranker.recipes.schema import DATA_STAGE, RecipeError

__all__ = ["MARKER", "Plan", "Runner", "StageFailed", "cuda_available"]

#: Written when a stage starts (its config hash): an interrupted train stage with the same hash resumes.
STARTED = ".stage-started.json"
#: Where ``ranker train`` keeps an unfinished run's checkpoints (training.checkpoint.FOLDER; that
#: module imports torch, which the runner does not).
CHECKPOINTS = "checkpoints"


class StageFailed(RuntimeError):
    """A stage's command ended with a non-zero status."""


def cuda_available() -> bool:
    """Whether this machine has a CUDA GPU torch can use (imports torch: call only when it matters)."""
    import torch

    return bool(torch.cuda.is_available())


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Runner:
    """Runs a :class:`Plan`; ``log`` lines go to stdout and ``<out>/recipe.log``."""

    def __init__(self, plan: Plan, *, stdout: TextIO | None = None, cuda: Callable[[], bool] | None = None):
        self.plan = plan
        self.stdout = stdout or sys.stdout
        self.cuda = cuda or cuda_available
        self._ran = set()

    def log(self, message: str) -> None:
        """A timestamped line to stdout and ``<out>/recipe.log``."""
        line = f"{_now()} {message}"
        print(line, file=self.stdout, flush=True)
        self.plan.out.mkdir(parents=True, exist_ok=True)
        with open(self.plan.out / LOG, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def pending(self, start_from: str | None = None) -> list[Step]:
        """The steps to run: from ``start_from`` on, else from the first step not done.

        ``start_from``'s earlier steps must be done.
        """
        statuses = self.plan.statuses()
        if start_from is None:
            return [step for step, status in statuses if not status.startswith("done")]
        names = [step.name for step, _ in statuses]
        if start_from not in names:
            raise RecipeError(f"--from {start_from}: no such stage (stages: {', '.join(names)})")
        i = names.index(start_from)
        not_done = [step.name for step, status in statuses[:i] if not status.startswith("done")]
        if not_done:
            raise RecipeError(f"--from {start_from}: earlier stages are not done: {', '.join(not_done)}")
        return [step for step, _ in statuses[i:]]

    def refusals(self, steps: list[Step], allow_slow: bool) -> list[str]:
        """Why the GPU stages among ``steps`` cannot run here (empty with a GPU or ``allow_slow``)."""
        gpu = [s for s in steps if s.runs_on == "gpu"]
        if not gpu or allow_slow or self.cuda():
            return []
        return [f"stage {s.name}: {_gpu_reason(s)}" for s in gpu]

    def run(self, *, start_from: str | None = None, dry_run: bool = False, allow_slow: bool = False) -> int:
        """Run the pending steps (``dry_run``: print them); the exit status (0, 1 failed, 3 refused)."""
        steps = self.pending(start_from)
        todo = {s.name for s in steps}
        missing = self.plan.missing_inputs(steps)
        if missing:
            raise RecipeError("inputs missing:\n  " + "\n  ".join(missing))
        refused = self.refusals(steps, allow_slow)
        if dry_run:
            for step in self.plan.steps:
                state = "run" if step.name in todo else "skip (done)"
                print(f"[{state}] {step.name} ({step.kind}, {step.runs_on})", file=self.stdout)
                for _label, argv in step.commands:
                    print(f"    ranker {shlex.join(argv)}", file=self.stdout)
            for reason in refused:
                print(f"would be refused here (no CUDA GPU): {reason}", file=self.stdout)
            return 0
        if refused:
            print(
                "refused: these stages need a CUDA GPU, which this machine lacks "
                "(--allow-slow runs them on the CPU):\n  " + "\n  ".join(refused),
                file=sys.stderr,
            )
            return 3
        self.log(
            f"recipe {self.plan.recipe.name} {self.plan.recipe.version} ({self.plan.path}): "
            f"{len(steps)} of {len(self.plan.steps)} stages to run, output {self.plan.out}"
        )
        for step in self.plan.steps:
            if step.name not in todo:
                self.log(f"skip  {step.name}: done (same config, {MARKER} kept)")
                continue
            if step.runs_on == "gpu" and allow_slow and not self._cuda_cached():
                self.log(f"note  {step.name}: runs on the CPU (--allow-slow); expected {_cpu_time(step)}")
            try:
                self._run_step(step)
            except StageFailed as e:
                self.log(f"FAIL  {step.name}: {e}")
                return 1
            except KeyboardInterrupt:
                self.log(
                    f"STOP  {step.name}: interrupted; a rerun starts it over (train: from its checkpoint)"
                )
                raise
        self.log(f"recipe {self.plan.recipe.name} done: output {self.plan.out}")
        return 0

    _cuda: bool | None = None
    #: Steps this invocation has started: a later stage resumes only when none before it ran again.
    _ran: set[str]

    def _resumable(self, step: Step) -> bool:
        """Whether ``step`` is an interrupted train stage that continues from its checkpoint.

        It is, when it left checkpoints, it started with the same config hash, and no earlier step
        ran again in this invocation (whose output, the stage's input, may then differ).
        """
        folder = self.plan.out / step.name
        if step.kind != "train" or not any((folder / CHECKPOINTS).glob("step-*.pt")) or self._ran:
            return False
        try:
            started = json.loads((folder / STARTED).read_text())
        except (OSError, ValueError):
            return False
        return bool(started.get("config_hash") == step.config_hash)

    def _cuda_cached(self) -> bool:
        if self._cuda is None:
            self._cuda = self.cuda()
        return self._cuda

    def _run_step(self, step: Step) -> None:
        folder = self.plan.out / step.name
        resume = self._resumable(step)
        if step.name == DATA_STAGE:
            (folder / MARKER).unlink(missing_ok=True)
            shutil.rmtree(folder / ".partial", ignore_errors=True)
        elif resume:
            self.log(f"resume {step.name}: from its last checkpoint ({folder / CHECKPOINTS})")
        else:
            for partial in (folder, self.plan.out / ".build" / step.name):
                if partial.exists():
                    self.log(f"clean {step.name}: removing {partial} (an unfinished or changed run)")
                    shutil.rmtree(partial)
        folder.mkdir(parents=True, exist_ok=True)
        if step.name == DATA_STAGE:
            (folder / ".partial").mkdir()
        else:
            (folder / STARTED).write_text(json.dumps({"config_hash": step.config_hash}) + "\n")
        self._ran.add(step.name)
        self.log(
            f"start {step.name} ({step.kind}, {step.runs_on}"
            + (f", estimate {step.estimate}" if step.estimate else "")
            + ")"
        )
        started = time.monotonic()
        commands = []
        for label, argv in step.commands:
            if step.name == DATA_STAGE:
                done = folder / ".done" / f"{label}.json"
                step_hash = _hash("", argv)
                if (
                    done.is_file()
                    and (folder / label).is_file()
                    and json.loads(done.read_text()).get("hash") == step_hash
                ):
                    self.log(f"skip  {step.name}/{label}: converted earlier")
                    commands.append(shlex.join(["ranker", *argv]))
                    continue
            seconds = self._call(step, label, argv + (["--resume"] if resume else []), folder / "stage.log")
            commands.append(shlex.join(["ranker", *argv]))
            if step.name == DATA_STAGE:
                os.replace(folder / ".partial" / label, folder / label)
                (folder / ".done").mkdir(exist_ok=True)
                (folder / ".done" / f"{label}.json").write_text(
                    json.dumps(
                        {"command": commands[-1], "seconds": round(seconds, 1), "hash": _hash("", argv)}
                    )
                )
                self.log(f"done  {step.name}/{label}: {seconds:.1f} s")
        seconds = time.monotonic() - started
        marker = {
            "stage": step.name,
            "kind": step.kind,
            "command": commands[0] if len(commands) == 1 else commands,
            "seconds": round(seconds, 1),
            "finished_at": _now(),
            "config_hash": step.config_hash,
        }
        (folder / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        self.log(f"end   {step.name}: {seconds:.1f} s")

    def _call(self, step: Step, label: str, argv: list[str], log_path: Path) -> float:
        """Run ``ranker ARGV`` in root, its output to stdout and the stage's log; its seconds."""
        command = ranker_command() + argv
        self.log(f"run   {label}: ranker {shlex.join(argv)}")
        env = dict(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")  # the backbone is packaged; a stage never downloads
        env["PYTHONUNBUFFERED"] = "1"
        started = time.monotonic()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                command, cwd=self.plan.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            assert proc.stdout is not None
            try:
                # What has arrived, not line by line: progress bars redraw a line with \r only.
                decoder = codecs.getincrementaldecoder("utf-8")("replace")
                fd = proc.stdout.fileno()
                for chunk in iter(lambda: os.read(fd, 65536), b""):
                    log.write(chunk)
                    log.flush()
                    self.stdout.write(decoder.decode(chunk))
                    self.stdout.flush()
                code = proc.wait()
            except BaseException:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                raise
        if code != 0:
            raise StageFailed(
                f"ranker {argv[0]} exited with status {code} after "
                f"{time.monotonic() - started:.1f} s (see {log_path})"
            )
        return time.monotonic() - started


def _gpu_reason(step: Step) -> str:
    stage = step.stage
    if stage is not None and stage.gpu_reason:
        return stage.gpu_reason
    return f"runs on a GPU ({step.estimate})"


def _cpu_time(step: Step) -> str:
    stage = step.stage
    if stage is not None and stage.minutes_cpu is not None:
        hours = stage.minutes_cpu / 60
        when = f"about {stage.minutes_cpu:g} minutes" + (f" ({hours:.1f} hours)" if hours >= 1 else "")
    else:
        when = "an unknown time"
    return when + (f": {stage.gpu_reason}" if stage is not None and stage.gpu_reason else "")
