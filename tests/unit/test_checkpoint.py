"""Training checkpoints: atomic saves, the last two kept, a corrupt newest one skipped, flags checked."""

from __future__ import annotations

import argparse
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from dialogue_ranker.training import checkpoint  # noqa: E402


def _parts(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    return model, optimizer, schedule


def _step(model, optimizer, schedule):
    loss = model(torch.randn(4, 3)).pow(2).sum() + float(np.random.rand()) + random.random()
    loss.backward()
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()


ARGS = argparse.Namespace(seed=1, lr=0.1, resume=False, checkpoint_every=1)


def test_a_restored_checkpoint_takes_the_same_next_steps_as_the_run_that_wrote_it(tmp_path):
    model, optimizer, schedule = _parts()
    loop_rng = random.Random(5)
    _step(model, optimizer, schedule)
    loop = checkpoint.LoopState(step=1, epoch=0, batch=1, history=[{"epoch": 1}])
    checkpoint.save(tmp_path, args=ARGS, model=model, optimizer=optimizer, schedule=schedule, loop=loop,
                    loop_rng=loop_rng)  # fmt: skip
    for _ in range(3):
        _step(model, optimizer, schedule)
    draws = loop_rng.random()

    other, other_optimizer, other_schedule = _parts(seed=9)
    other_rng = random.Random(0)
    payload, _ = checkpoint.load_latest(tmp_path, ARGS)
    restored = checkpoint.restore(
        payload, model=other, optimizer=other_optimizer, schedule=other_schedule, loop_rng=other_rng
    )
    assert (restored.step, restored.batch, restored.history) == (1, 1, [{"epoch": 1}])
    for _ in range(3):
        _step(other, other_optimizer, other_schedule)
    assert other_rng.random() == draws
    for name, value in model.state_dict().items():
        assert torch.equal(other.state_dict()[name], value), name
    assert other_schedule.get_last_lr() == schedule.get_last_lr()


def test_only_the_last_two_are_kept_and_an_unreadable_newest_falls_back_to_the_one_before(tmp_path):
    model, optimizer, schedule = _parts()
    for step in (1, 2, 3):
        checkpoint.save(tmp_path, args=ARGS, model=model, optimizer=optimizer, schedule=schedule,
                        loop=checkpoint.LoopState(step=step), loop_rng=random.Random(0))  # fmt: skip
    kept = checkpoint.checkpoints(tmp_path)
    assert [p.name for p in kept] == ["step-00000002.pt", "step-00000003.pt"]
    # A kill during a save leaves a temporary file, never a half-written checkpoint under a final name.
    (checkpoint.folder_of(tmp_path) / ".step-00000004.pt.123.tmp").write_bytes(b"half")
    kept[-1].write_bytes(kept[-1].read_bytes()[:100])  # a disk that lost the newest one's end
    payload, path = checkpoint.load_latest(tmp_path, ARGS)
    assert path == kept[0] and payload["loop"]["step"] == 2


def test_a_checkpoint_of_other_training_flags_is_refused_by_name(tmp_path):
    model, optimizer, schedule = _parts()
    checkpoint.save(tmp_path, args=ARGS, model=model, optimizer=optimizer, schedule=schedule,
                    loop=checkpoint.LoopState(step=1), loop_rng=random.Random(0))  # fmt: skip
    # Flags that do not change the steps may differ; the learning rate may not.
    checkpoint.load_latest(tmp_path, argparse.Namespace(**{**vars(ARGS), "checkpoint_every": 50}))
    with pytest.raises(checkpoint.CheckpointError, match="other training flags"):
        checkpoint.load_latest(tmp_path, argparse.Namespace(**{**vars(ARGS), "lr": 0.2}))
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint"):
        checkpoint.load_latest(tmp_path / "elsewhere", ARGS)
