"""Checkpoints of an unfinished ``ranker train`` run, so that a killed run continues (``--resume``).

A checkpoint holds everything the loop's next step depends on: the weights, the optimiser's
moments, the learning-rate schedule's position, where the run is in its epochs' batches, the dev
history and the best epoch's weights so far, the weights' moving average (``--ema``), and the
state of every random generator the step reads (the loop's own ``random.Random``, Python's,
NumPy's and torch's, CUDA's where there is a GPU). Restored, the run takes the same steps on the
same batches with the same dropout masks as one that was never stopped: on the same machine and
thread count its final weights are the same bits (``tests/integration/test_training_resume.py``).

Files live in ``<run>/checkpoints/step-NNNNNNNN.pt``. Each is written to a temporary file in the
same folder, flushed to disk and renamed over its final name (a rename within a file system is
atomic), so a kill during a save leaves the previous checkpoint whole; the last :data:`KEEP` are
kept. A finished run removes the folder: its weights are in ``ranker/``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: Checkpoints kept: the newest, and the one before in case the newest cannot be read.
KEEP = 2
FOLDER = "checkpoints"
#: Flags that do not change which steps a run takes, so a run may resume with other values (``out``:
#: a run directory may be moved between its pieces). The time limit and ``--replan``, which fits the
#: schedule to it, can end a run early, but the length a re-plan chose is the schedule's own field:
#: a resumed run continues on it.
NOT_FINGERPRINTED = frozenset(
    {"resume", "checkpoint_every", "stop_after_steps", "threads", "max_seconds", "replan", "out", "patience"}
)
#: Flags added after checkpoints were first written, left out of the fingerprint at their default so
#: that a checkpoint written before them still resumes.
LATER_FLAGS = {
    "distill_replaces_labels": False,
    "anchor_weight": 0.0,
    "distill_shares": {},
    "freeze_layers": 0,
    "ema": 0.0,
    "lora_rank": 0,
    "keep_top": 0.0,
    "attention_dropout": None,
    "pointwise_on": [],
    "keep_head_bias": False,
}


class CheckpointError(RuntimeError):
    """No usable checkpoint, or one written by a run with other training flags."""


@dataclass
class LoopState:
    """Where the loop is: steps taken, the next batch (epoch, index), the dev history, the best epoch."""

    step: int = 0
    epoch: int = 0
    batch: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    best_state: dict[str, torch.Tensor] | None = None
    best_score: float = -1.0


def fingerprint(args: Any) -> str:
    """The training flags a checkpoint must share with the run resuming it, as one string."""
    flags = {
        k: v
        for k, v in sorted(vars(args).items())
        if k not in NOT_FINGERPRINTED and not (k in LATER_FLAGS and v == LATER_FLAGS[k])
    }
    return json.dumps(flags, default=str, sort_keys=True)


def folder_of(run: Path) -> Path:
    """Where a run's checkpoints live."""
    return Path(run) / FOLDER


def checkpoints(run: Path) -> list[Path]:
    """A run's checkpoint files, oldest first (temporary files of an interrupted save excluded)."""
    return sorted(folder_of(run).glob("step-*.pt"))


def rng_states(loop_rng: random.Random) -> dict[str, Any]:
    """Every random generator a training step reads, as ``torch.load(weights_only=True)`` reads back."""
    kind, key, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    states: dict[str, Any] = {
        "loop": loop_rng.getstate(),
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(np.asarray(key, dtype=np.int64)), pos, has_gauss, gauss),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any], loop_rng: random.Random) -> None:
    """Put every generator back where :func:`rng_states` found it."""
    loop_rng.setstate(_tuples(states["loop"]))
    random.setstate(_tuples(states["python"]))
    kind, key, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, key.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _tuples(value: Any) -> Any:
    # random.setstate wants nested tuples; a saved state may come back with lists inside.
    return tuple(_tuples(v) for v in value) if isinstance(value, list | tuple) else value


def save(
    run: Path,
    *,
    args: Any,
    model,
    optimizer,
    schedule,
    loop: LoopState,
    loop_rng: random.Random,
    precision: str | None = None,
    average=None,
) -> Path:
    """Write the loop's state atomically as the newest checkpoint, then drop all but the last :data:`KEEP`."""
    folder = folder_of(run)
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "fingerprint": fingerprint(args),
        "loop": {"step": loop.step, "epoch": loop.epoch, "batch": loop.batch, "best_score": loop.best_score},
        "history": json.dumps(loop.history),
        "best_state": loop.best_state,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "rng": rng_states(loop_rng),
        # What --precision resolved to: ``auto`` may have timed it, and a resumed run keeps it.
        "precision": precision,
        # ``--ema``: the moving average of the weights, which the dev checks score.
        "average": None if average is None else average.state_dict(),
    }
    final = folder / f"step-{loop.step:08d}.pt"
    temporary = folder / f".{final.name}.{os.getpid()}.tmp"
    with open(temporary, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, final)
    _sync_folder(folder)
    for old in checkpoints(run)[:-KEEP]:
        old.unlink()
    return final


def _sync_folder(folder: Path) -> None:
    # The rename is durable once the folder's entry is on disk (POSIX; a no-op where unsupported).
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_latest(run: Path, args: Any) -> tuple[dict[str, Any], Path]:
    """The newest readable checkpoint of ``run`` and its path.

    An unreadable newest file (a disk that lost it) falls back to the one before. Raises
    :class:`CheckpointError` when there is none, or when it was written with other training flags.
    """
    found = checkpoints(run)
    if not found:
        raise CheckpointError(f"--resume: {run} has no checkpoint ({FOLDER}/step-*.pt)")
    errors = []
    for path in reversed(found):
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # a truncated or corrupt file: torch raises several kinds
            errors.append(f"{path.name}: {e}")
            continue
        if payload["fingerprint"] != fingerprint(args):
            raise CheckpointError(
                f"--resume: {path} was written by a run with other training flags; "
                f"it had {payload['fingerprint']}"
            )
        return payload, path
    raise CheckpointError(f"--resume: no readable checkpoint in {folder_of(run)}: " + "; ".join(errors))


def restore(
    payload: dict[str, Any], *, model, optimizer, schedule, loop_rng: random.Random, average=None
) -> LoopState:
    """Load a checkpoint into the model, optimiser, schedule, generators and average; the position."""
    model.load_state_dict(payload["model"])
    if average is not None:  # the fingerprint holds --ema: a checkpoint of this run has its average
        average.load_state_dict(payload["average"])
    optimizer.load_state_dict(payload["optimizer"])
    schedule.load_state_dict(payload["schedule"])
    restore_rng_states(payload["rng"], loop_rng)
    loop = payload["loop"]
    return LoopState(
        step=int(loop["step"]),
        epoch=int(loop["epoch"]),
        batch=int(loop["batch"]),
        history=json.loads(payload["history"]),
        best_state=payload["best_state"],
        best_score=float(loop["best_score"]),
    )


def remove(run: Path) -> None:
    """Drop a finished run's checkpoints (its weights are in ``ranker/``)."""
    shutil.rmtree(folder_of(run), ignore_errors=True)
