"""``ranker interpolate --toward-bundle``: the line from the bundle a fine-tune began at to where it ended.

A real two-step fine-tune of the shipped bundle (``ranker train --init-bundle``, as ``ranker adapt``
runs it), then its weights mixed half and half with the bundle's dequantized ones: every weight
lies halfway, and the run written records what it was interpolated toward.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from dialogue_ranker.training import interpolate, train  # noqa: E402
from dialogue_ranker.training.recover import dequantized_ranker  # noqa: E402
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker  # noqa: E402


def test_half_way_toward_the_bundle_is_the_mean_of_its_weights_and_the_runs(tmp_path, sugar_lists, model_dir):
    run, half = tmp_path / "run", tmp_path / "half"
    train.main(
        ["--data", str(sugar_lists), "--init-bundle", str(model_dir), "--out", str(run), "--limit", "8",
         "--dev-lists", "4", "--batch-lists", "2", "--max-steps", "2", "--max-prefix-tokens", "64",
         "--max-candidate-tokens", "16", "--threads", "1", "--checkpoint-every", "0"]
    )  # fmt: skip
    result = interpolate.main(
        ["--run", str(run), "--toward-bundle", str(model_dir), "--alphas", "0,1", "--alpha", "0.5",
         "--out", str(half)]
    )  # fmt: skip
    assert set(result["alphas"]) == {"0.0", "1.0"}
    tuned = SharedPrefixRanker.load(run / "ranker")
    start = dequantized_ranker(model_dir, head=tuned.head_kind)[0].state_dict()
    ended, mixed = tuned.state_dict(), SharedPrefixRanker.load(half / "ranker").state_dict()
    floats = [k for k, v in ended.items() if v.is_floating_point()]
    assert any(not torch.equal(start[k], ended[k]) for k in floats)  # the run moved
    for k in floats:
        assert torch.allclose(mixed[k], 0.5 * start[k] + 0.5 * ended[k], atol=1e-6), k
    recorded = json.loads((half / "config.json").read_text())["interpolation"]
    assert recorded["toward"] == str(model_dir) and recorded["alpha"] == 0.5


def test_a_run_of_no_step_is_the_bundle_read_back_head_bias_included(tmp_path, sugar_lists, model_dir):
    """``--max-steps 0``: the bundle's weights as a run (for a soup between two bundles), nothing moved."""
    run = tmp_path / "read-back"
    train.main(
        ["--data", str(sugar_lists), "--init-bundle", str(model_dir), "--out", str(run), "--limit", "8",
         "--dev-lists", "4", "--max-steps", "0", "--max-prefix-tokens", "64", "--max-candidate-tokens", "16",
         "--threads", "1", "--checkpoint-every", "0"]
    )  # fmt: skip
    read_back = SharedPrefixRanker.load(run / "ranker")
    start = dequantized_ranker(model_dir, head=read_back.head_kind)[0].state_dict()
    kept = read_back.state_dict()
    assert start.keys() == kept.keys()
    for k, v in kept.items():
        assert torch.equal(v, start[k]), k  # the cosine head's bias too: a run's start shift is skipped
    assert (run / "calibration.json").is_file()
    assert json.loads((run / "config.json").read_text())["max_steps"] == 0
