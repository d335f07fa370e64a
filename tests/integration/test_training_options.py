"""``ranker train``'s options on a tiny real run: the anchor, the weights' moving average, the
re-planned schedule, frozen layers, a low-rank update and attention dropout, each against the
same run without it (the flags of ``helpers.tiny_train_flags``)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from helpers import tiny_train_flags  # noqa: E402

from dialogue_ranker.data.ranking_data import DataError  # noqa: E402
from dialogue_ranker.training import train  # noqa: E402
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker  # noqa: E402


def encoder_distance(a, b) -> float:
    """The encoders' weights apart, summed over every tensor (the head left out)."""
    a, b = a.encoder.state_dict(), b.encoder.state_dict()
    return sum(float((a[k].float() - b[k].float()).abs().sum()) for k in a)


def test_the_anchor_pulls_the_encoder_back_to_where_the_run_began(tmp_path, sugar_lists):
    start = tmp_path / "start"
    train.main([*tiny_train_flags(sugar_lists, start), "--max-steps", "2", "--checkpoint-every", "0"])
    begun = SharedPrefixRanker.load(start / "ranker")

    def trained(name: str, *flags: str) -> SharedPrefixRanker:
        out = tmp_path / name
        train.main(
            [*tiny_train_flags(sugar_lists, out), "--init", str(start), "--checkpoint-every", "0", *flags]
        )
        return SharedPrefixRanker.load(out / "ranker")

    free = encoder_distance(trained("free"), begun)
    pulled = encoder_distance(trained("pulled", "--anchor-weight", "2000"), begun)
    held = encoder_distance(trained("held", "--anchor-weight", "1e9"), begun)  # all the way back each step
    assert held == 0.0 < pulled < free


def test_ema_keeps_the_average_not_the_last_step_s_weights(tmp_path, sugar_lists):
    # At a decay near 1 the average stays where the first step left it (torch's first update copies
    # the weights): the run keeps the weights the same schedule had after its first step, not its last.
    start = tmp_path / "start"
    train.main([*tiny_train_flags(sugar_lists, start), "--max-steps", "2", "--checkpoint-every", "0"])
    begun = SharedPrefixRanker.load(start / "ranker")

    def trained(name: str, *flags: str) -> tuple[SharedPrefixRanker, dict]:
        out = tmp_path / name
        metrics = train.main(
            [*tiny_train_flags(sugar_lists, out), "--init", str(start), "--checkpoint-every", "0", *flags]
        )
        return SharedPrefixRanker.load(out / "ranker"), metrics

    last, plain = trained("last")
    first, _ = trained("first", "--stop-at", "1")  # the same schedule, ended after its first step
    averaged, ema = trained("averaged", "--ema", "0.999999")
    assert ema["steps"] == plain["steps"] == 5
    moved = encoder_distance(last, begun)
    assert encoder_distance(averaged, first) < 0.001 * moved < encoder_distance(averaged, last)
    assert ema["history"][-1]["dev"] != plain["history"][-1]["dev"]  # the dev check scored the average
    from dialogue_ranker.export.card_lines import stage_schedule

    card = stage_schedule(json.loads((tmp_path / "averaged" / "config.json").read_text()))
    assert "the weights' moving average kept (decay 0.999999)" in card
    assert "moving average" not in stage_schedule(json.loads((tmp_path / "last" / "config.json").read_text()))


def test_replan_cuts_the_schedule_to_what_the_run_s_own_rate_fits_in_its_seconds(tmp_path, sugar_lists):
    # Four epochs of five steps. The same run without a limit measures how long it takes; given
    # the time to load and about half its steps, --replan must end the schedule early, on a step
    # its learning rate has decayed to (not cut off by the time limit mid-schedule).
    flags = [
        *tiny_train_flags(sugar_lists, tmp_path / "whole"),
        "--limit",
        "10",
        "--epochs",
        "4",
        "--max-steps",
        "20",
    ]
    whole = train.main([*flags, "--checkpoint-every", "0"])
    assert whole["steps"] == whole["schedule_steps"] == 20
    stepping = whole["seconds_per_step"] * 20
    budget = whole["train_seconds"] - stepping / 2

    flags[flags.index("--out") + 1] = str(tmp_path / "replanned")
    cut = train.main([*flags, "--checkpoint-every", "0", "--replan", "--max-seconds", f"{budget:.2f}"])
    assert cut["planned_steps"] == 20
    assert 5 <= cut["schedule_steps"] < 20
    assert cut["steps"] <= cut["schedule_steps"]
    config = json.loads((tmp_path / "replanned" / "config.json").read_text())
    assert config["schedule_steps"] == cut["schedule_steps"]


def test_frozen_layers_keep_their_start_and_the_layers_above_learn(tmp_path, sugar_lists):
    from dialogue_ranker.training.backbone import backbone_dir

    out = tmp_path / "frozen"
    flags = [*tiny_train_flags(sugar_lists, out), "--max-steps", "2", "--checkpoint-every", "0"]
    train.main([*flags, "--freeze-layers", "4"])
    start = SharedPrefixRanker.load(backbone_dir()).encoder.state_dict()
    after = SharedPrefixRanker.load(out / "ranker").encoder.state_dict()
    kept = [k for k in start if k.startswith("embeddings.") or k.split(".")[2] in {"0", "1", "2", "3"}]
    moved = [k for k in start if k.startswith("encoder.layer.5.") and k.endswith("weight")]
    assert kept and moved
    assert all(torch.equal(start[k], after[k]) for k in kept)
    assert all(not torch.equal(start[k], after[k]) for k in moved)
    with pytest.raises(DataError, match="the encoder has 6 layers"):
        train.main([*tiny_train_flags(sugar_lists, tmp_path / "too-many"), "--freeze-layers", "7"])


def test_a_low_rank_run_saves_a_plain_encoder_whose_adapted_layers_moved_and_no_other_weight(
    tmp_path, sugar_lists
):
    from dialogue_ranker.training.backbone import backbone_dir

    out = tmp_path / "low-rank"
    flags = [
        *tiny_train_flags(sugar_lists, out),
        "--max-steps",
        "3",
        "--checkpoint-every",
        "0",
        "--lr",
        "1e-3",
    ]
    result = train.main([*flags, "--lora-rank", "4", "--freeze-layers", "4"])
    start = SharedPrefixRanker.load(backbone_dir()).encoder.state_dict()
    after = SharedPrefixRanker.load(out / "ranker").encoder.state_dict()
    assert after.keys() == start.keys()  # merged: no adapter left in the saved ranker
    adapted = {k for k in start if k.split(".")[:3] in (["encoder", "layer", "4"], ["encoder", "layer", "5"])}
    linear = {k for k in adapted if k.endswith("weight") and "LayerNorm" not in k}
    assert len(linear) == 2 * 6  # query, key, value, attention output, feed-forward in and out
    assert all(not torch.equal(start[k], after[k]) for k in linear)
    # Below the adapted layers, and every bias and norm above: as they started.
    assert all(torch.equal(start[k], after[k]) for k in start if k not in linear)
    # The merged weights score the dev lists as the adapters did at the kept epoch.
    best = max(result["history"], key=lambda h: h["mean_ndcg_at_3"])
    for name, metrics in result["dev"].items():
        assert metrics["ndcg_at_3"] == pytest.approx(best["dev"][name]["ndcg_at_3"], abs=1e-3)
    with pytest.raises(DataError, match="no layer of 6 is left"):
        train.main(
            [
                *tiny_train_flags(sugar_lists, tmp_path / "none-left"),
                "--lora-rank",
                "4",
                "--freeze-layers",
                "6",
            ]
        )


def test_attention_dropout_is_set_in_every_block_recorded_and_refused_out_of_range(tmp_path, sugar_lists):
    from dialogue_ranker.export.card_lines import stage_schedule
    from dialogue_ranker.training.attention_dropout import set_attention_dropout
    from dialogue_ranker.training.backbone import backbone_dir

    model = SharedPrefixRanker.load(backbone_dir())
    blocks = [m for m in model.modules() if type(m).__name__.endswith("SelfAttention")]
    assert {m.dropout.p for m in blocks} == {0.1}  # all-MiniLM-L6-v2's own
    assert set_attention_dropout(model, 0.0) == len(blocks) == 6
    assert {m.dropout.p for m in blocks} == {0.0}
    hidden = [
        m.p for name, m in model.named_modules() if isinstance(m, torch.nn.Dropout) and "self" not in name
    ]
    assert hidden and set(hidden) == {0.1}  # the hidden states keep theirs
    with pytest.raises(DataError, match="no self-attention block"):
        set_attention_dropout(torch.nn.Sequential(torch.nn.Linear(2, 2)), 0.0)

    # Without dropout anywhere the training pass is the scoring pass: a step's loss reads the same twice.
    out = tmp_path / "run"
    train.main(
        [
            *tiny_train_flags(sugar_lists, out),
            "--max-steps",
            "2",
            "--checkpoint-every",
            "0",
            "--attention-dropout",
            "0",
        ]
    )
    config = json.loads((out / "config.json").read_text())
    assert config["attention_dropout"] == 0.0
    assert "attention dropout 0" in stage_schedule(config)
    assert "attention dropout" not in stage_schedule({**config, "attention_dropout": None})
    for bad in ("1", "-0.1", "x"):
        with pytest.raises(SystemExit):
            train.parse_args([*tiny_train_flags(sugar_lists, tmp_path / "bad"), "--attention-dropout", bad])


def test_keep_head_bias_starts_from_the_bias_as_it_is_and_the_default_re_centres_it(tmp_path, sugar_lists):
    start = tmp_path / "start"
    train.main([*tiny_train_flags(sugar_lists, start), "--max-steps", "2", "--checkpoint-every", "0"])
    begun = SharedPrefixRanker.load(start / "ranker").head.bias.clone()

    def bias_after(name: str, *flags: str) -> torch.Tensor:
        # At a learning rate of 0 no step moves a weight: the bias saved is the one the run started from.
        out = tmp_path / name
        flags = (*tiny_train_flags(sugar_lists, out), "--init", str(start), "--checkpoint-every", "0", *flags)
        train.main([*flags, "--lr", "0"])
        return SharedPrefixRanker.load(out / "ranker").head.bias

    assert torch.equal(bias_after("kept", "--keep-head-bias"), begun)
    assert not torch.equal(bias_after("centred"), begun)  # moved to the mix's share of right replies
    config = json.loads((tmp_path / "kept" / "config.json").read_text())
    assert config["keep_head_bias"] is True
    from dialogue_ranker.export.card_lines import stage_schedule

    assert "the start's head bias kept" in stage_schedule(config)
