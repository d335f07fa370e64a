"""The banks' retrieval encoder trained as a dual encoder (``ranker train-retriever``) on SUGAR lists."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("torch", reason="training extras (torch) are not installed")

SMALL = ["--batch-pairs", "4", "--dev-queries", "12", "--max-query-tokens", "48",
         "--max-response-tokens", "32"]  # fmt: skip


def test_a_short_run_writes_an_encoder_that_export_reads_and_its_dev_bank_figures(sugar_lists, tmp_path):
    from dialogue_ranker.training import dual_encoder

    out = tmp_path / "retriever"
    argv = ["--data", f"{sugar_lists}:0.02", "--max-steps", "2", "--out", str(out), *SMALL]
    result = dual_encoder.main(argv)
    for when in ("untrained", "trained"):
        figures = result["dev_bank"][when]
        assert figures["queries"] == 12 and 0.0 <= figures["r_at_1"] <= figures["r_at_10"] <= 1.0, figures
    # The encoder written is the trained one, not the backbone copied.
    from transformers import AutoModel

    from dialogue_ranker.training.backbone import backbone_dir

    trained = AutoModel.from_pretrained(str(out / "encoder")).state_dict()
    untrained = AutoModel.from_pretrained(str(backbone_dir())).state_dict()
    name = "encoder.layer.0.attention.self.query.weight"
    assert (trained[name] - untrained[name]).abs().max() > 0
    config = json.loads((out / "config.json").read_text())
    assert config["steps"] == config["planned_steps"] == 2 and config["query"] == {"turns": 2}
    assert (out / "encoder" / "1_Pooling" / "config.json").is_file()
    assert (out / "encoder" / "tokenizer.json").is_file()


def test_max_seconds_stops_training_and_still_writes_the_encoder(sugar_lists, tmp_path):
    from dialogue_ranker.training import dual_encoder

    out = tmp_path / "cut"
    argv = ["--data", f"{sugar_lists}:0.02", "--max-steps", "2", "--max-seconds", "0", "--out", str(out)]
    argv += SMALL
    dual_encoder.main(argv)
    config = json.loads((out / "config.json").read_text())
    assert config["steps"] == 0 and config["planned_steps"] == 2
    assert (out / "encoder" / "config.json").is_file()


def test_wise_alpha_mixes_the_trained_weights_with_the_starting_ones(sugar_lists, tmp_path):
    import torch
    from transformers import AutoModel

    from dialogue_ranker.training import dual_encoder
    from dialogue_ranker.training.backbone import backbone_dir

    name = "encoder.layer.0.attention.self.query.weight"
    start = AutoModel.from_pretrained(str(backbone_dir())).state_dict()[name]
    written = {}
    for alpha in (0.0, 0.5, 1.0):
        out = tmp_path / f"alpha-{alpha}"
        dual_encoder.main(["--data", f"{sugar_lists}:0.02", "--max-steps", "2", "--wise-alpha", str(alpha),
                           "--out", str(out), *SMALL])  # fmt: skip
        written[alpha] = AutoModel.from_pretrained(str(out / "encoder")).state_dict()[name]
    # The same seed trains the same weights: alpha 0 writes the start, 0.5 the midpoint.
    torch.testing.assert_close(written[0.0], start)
    torch.testing.assert_close(written[0.5], (written[1.0] + start) / 2, atol=1e-6, rtol=0)
    assert (written[1.0] - start).abs().max() > 0
