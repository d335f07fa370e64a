"""``ranker train --replan``: the schedule's length fitted to the seconds left, and kept by a checkpoint."""

from __future__ import annotations

import pytest

from dialogue_ranker.training.replan import fitted_total

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from dialogue_ranker.training.backbone import make_optimizer  # noqa: E402


def fit(seconds_left: float, *, step: int = 10, total: int = 50, check: float = 5.0) -> int:
    # Epochs of 10 steps; a step takes 1 s, a dev check `check` s.
    return fitted_total(
        step=step,
        total=total,
        epoch_ends=[10, 20, 30, 40, 50],
        seconds_left=seconds_left,
        seconds_per_step=1.0,
        seconds_per_check=check,
    )


def test_the_schedule_keeps_the_steps_and_dev_checks_that_fit_in_the_time_left() -> None:
    assert fit(10) == 20  # ten steps; the check at step 20 is the run's end, not counted
    assert fit(20) == 25  # 15 steps and the check at step 20
    assert fit(16) == 21
    assert fit(15.9) == 20  # step 21 would cost its second and the check before it
    assert fit(1000) == 50  # never longer than planned: the batches are drawn before the first step
    assert fit(0) == fit(-3) == 10  # no time left: the schedule ends where the run is
    assert fit(10, check=0.0, step=13) == 23


def test_a_shortened_schedule_decays_to_zero_at_its_new_end_and_a_checkpoint_keeps_it() -> None:
    model = torch.nn.Linear(2, 1)
    optimizer, schedule = make_optimizer(model, lr=1.0, total_steps=100)
    for _ in range(20):
        optimizer.step()
        schedule.step()
    schedule.lr_lambdas[0].total = 40
    assert schedule.lr_lambdas[0](40) == 0.0 < schedule.lr_lambdas[0](39)
    saved = schedule.state_dict()

    _, fresh = make_optimizer(torch.nn.Linear(2, 1), lr=1.0, total_steps=100)
    fresh.load_state_dict(saved)
    assert fresh.lr_lambdas[0].total == 40
    assert fresh.lr_lambdas[0].warmup == 10  # the warm-up is the plan's, as it ran
