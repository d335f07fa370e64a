"""``--precision auto``'s timing: which precisions it weighs, and passes that leave no trace."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from dialogue_ranker.training import backbone, precision_probe  # noqa: E402


@pytest.mark.parametrize(
    ("choice", "flags_bf16", "expected"),
    [
        ("auto", True, ("fp32", "bf16")),  # the flag says it can: timed
        ("auto", False, ("fp32",)),  # emulated bf16 is slower: never timed
        ("bf16", False, ("bf16",)),  # given outright: kept
        ("fp32", True, ("fp32",)),
    ],
)
def test_auto_weighs_both_only_where_the_cpu_flags_bf16(monkeypatch, choice, flags_bf16, expected):
    monkeypatch.setattr(backbone, "has_fast_bf16", lambda: flags_bf16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precision_probe.options(choice) == expected


def test_the_faster_precision_is_chosen_and_the_passes_leave_no_gradients_or_drawn_numbers():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Dropout(0.5), torch.nn.Linear(256, 1))
    x = torch.randn(512, 64)
    calls: list[torch.dtype] = []

    def loss(rng: random.Random) -> torch.Tensor:
        assert rng.random() == random.Random(0).random()  # each pass draws from a fresh generator
        out = model(x)
        calls.append(out.dtype)
        return out.float().pow(2).mean()

    before = torch.get_rng_state()
    chosen, seconds = precision_probe.faster(model, loss, ("fp32", "bf16"))
    assert torch.equal(torch.get_rng_state(), before)  # dropout's draws are undone
    assert all(p.grad is None for p in model.parameters())
    assert set(seconds) == {"fp32", "bf16"} and chosen == min(seconds, key=seconds.get)
    # one warm-up and REPEATS timed passes each, alternating; bf16's under autocast
    assert calls == [torch.float32, torch.bfloat16] * (1 + precision_probe.REPEATS)


def test_one_choice_runs_nothing():
    def never(rng: random.Random) -> torch.Tensor:
        raise AssertionError("timed with nothing to choose between")

    assert precision_probe.faster(torch.nn.Linear(2, 1), never, ("fp32",)) == ("fp32", {})
