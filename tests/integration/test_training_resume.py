"""``ranker train --resume``: a run stopped as a kill would ends with the bits of one never stopped.

A real tiny run on the packaged backbone (SUGAR lists, five steps over two epochs, dropout on):
stopped after step 3 with its last checkpoint at step 2, resumed, and compared with the same run
uninterrupted: every weight equal bit for bit (same machine, same thread count), the same dev
history, and the checkpoints gone once the run is finished.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from helpers import tiny_train_flags  # noqa: E402

from dialogue_ranker.data.ranking_data import DataError  # noqa: E402
from dialogue_ranker.training import checkpoint, train  # noqa: E402
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker  # noqa: E402


# With --anchor-weight the pull's start must be the run's, not the checkpoint's weights; with --ema
# the checkpoint must carry the average the dev checks score; with --lora-rank, the adapters.
@pytest.mark.parametrize(
    "anchor",
    [
        [],
        ["--anchor-weight", "2000"],
        ["--ema", "0.6"],
        ["--lora-rank", "4", "--freeze-layers", "3"],
        ["--attention-dropout", "0"],
    ],
    ids=["plain", "anchored", "averaged", "low-rank", "no-attention-dropout"],
)
def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, sugar_lists, anchor):
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    expected = train.main([*tiny_train_flags(sugar_lists, whole), *anchor])

    with pytest.raises(SystemExit) as stopped:
        train.main([*tiny_train_flags(sugar_lists, pieces), *anchor, "--stop-after-steps", "3"])
    assert stopped.value.code == train.STOPPED_STATUS
    assert [p.name for p in checkpoint.checkpoints(pieces)] == ["step-00000002.pt"]
    assert not (pieces / "config.json").exists()
    with pytest.raises(DataError, match="--resume continues it"):  # no silent start-over
        train.main([*tiny_train_flags(sugar_lists, pieces), *anchor])

    resumed = train.main([*tiny_train_flags(sugar_lists, pieces), *anchor, "--resume"])
    assert resumed["steps"] == expected["steps"] == 5
    assert resumed["history"] == expected["history"]
    a = SharedPrefixRanker.load(whole / "ranker").state_dict()
    b = SharedPrefixRanker.load(pieces / "ranker").state_dict()
    assert a.keys() == b.keys()
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert different == []
    assert not checkpoint.folder_of(pieces).exists()
    assert json.loads((pieces / "config.json").read_text())["steps_taken"] == 5
    with pytest.raises(DataError, match="finished run"):
        train.main([*tiny_train_flags(sugar_lists, pieces), *anchor, "--resume"])


def test_auto_precision_times_both_leaves_no_trace_and_a_resumed_run_keeps_its_choice(
    tmp_path, sugar_lists, monkeypatch
):
    from dialogue_ranker.training import backbone, precision_probe

    monkeypatch.setattr(backbone, "has_fast_bf16", lambda: True)  # as on a CPU that flags AVX-512 BF16
    timed = train.main([*tiny_train_flags(sugar_lists, tmp_path / "auto"), "--precision", "auto"])
    chosen = timed["training_precision"]
    assert set(timed["precision_seconds"]) == {"fp32", "bf16"} and all(timed["precision_seconds"].values())
    assert chosen == min(timed["precision_seconds"], key=timed["precision_seconds"].get)
    # The timed passes leave no trace: the run is the one given its precision outright.
    given = train.main([*tiny_train_flags(sugar_lists, tmp_path / "given"), "--precision", chosen])
    assert given["precision_seconds"] == {} and given["history"] == timed["history"]
    a = SharedPrefixRanker.load(tmp_path / "auto" / "ranker").state_dict()
    b = SharedPrefixRanker.load(tmp_path / "given" / "ranker").state_dict()
    assert [name for name in a if not torch.equal(a[name], b[name])] == []

    # A killed run's checkpoint holds the choice; the resumed run times nothing and keeps it. Two
    # steps, killed after the first: the other precision is likely bf16, emulated and slow on AVX2.
    other = "bf16" if chosen == "fp32" else "fp32"
    monkeypatch.setattr(precision_probe, "faster", lambda *a: (other, {"fp32": 1.0, "bf16": 1.0}))
    pieces = tmp_path / "pieces"
    short = ["--max-steps", "2", "--checkpoint-every", "1", "--precision", "auto"]
    with pytest.raises(SystemExit):
        train.main([*tiny_train_flags(sugar_lists, pieces), *short, "--stop-after-steps", "1"])

    def timing_again(*a):
        raise AssertionError("a resumed run timed its precision again")

    monkeypatch.setattr(precision_probe, "faster", timing_again)
    resumed = train.main([*tiny_train_flags(sugar_lists, pieces), *short, "--resume"])
    assert resumed["training_precision"] == other and resumed["steps"] == 2
    assert json.loads((pieces / "config.json").read_text())["training_precision"] == other
