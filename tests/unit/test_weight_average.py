"""``--ema``: the decay's parsing, and the average the dev checks score (torch's AveragedModel)."""

from __future__ import annotations

import argparse

import pytest

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from dialogue_ranker.training.train_args import ema_decay  # noqa: E402
from dialogue_ranker.training.weight_average import averaged, scored  # noqa: E402


@pytest.mark.parametrize("text", ["1", "1.5", "-0.1", "fast"])
def test_a_decay_outside_0_to_1_is_refused_naming_the_flag(text):
    with pytest.raises(argparse.ArgumentTypeError, match="--ema"):
        ema_decay(text)


def test_no_decay_keeps_the_model_itself():
    model = torch.nn.Linear(2, 1)
    assert ema_decay("0") == 0.0
    assert averaged(model, 0.0) is None
    assert scored(model, None) is model


def test_the_average_moves_a_share_of_the_way_to_each_step_s_weights():
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    average = averaged(model, 0.5)
    expected = None
    for value in (4.0, 8.0, 0.0):
        with torch.no_grad():
            model.weight.fill_(value)
        average.update_parameters(model)
        # The first update copies the weights; each later one moves half of the way.
        expected = value if expected is None else 0.5 * expected + 0.5 * value
        assert float(scored(model, average).weight) == pytest.approx(expected)
    assert float(model.weight) == 0.0  # the model itself keeps its own weights
    assert expected == pytest.approx(3.0)
