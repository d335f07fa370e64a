"""``ranker train --patience`` and ``--distill-replaces-labels``: when a run stops, what a list learns."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from dialogue_ranker.data.ranking_data import Candidate, RankingList  # noqa: E402
from dialogue_ranker.serving.tokenization import Turn  # noqa: E402
from dialogue_ranker.training import checkpoint  # noqa: E402
from dialogue_ranker.training.list_loss import label_loss, taught_or_labelled  # noqa: E402
from dialogue_ranker.training.train_loop import out_of_patience  # noqa: E402


def history(*scores: float) -> list[dict]:
    return [{"epoch": i + 1, "mean_ndcg_at_3": s} for i, s in enumerate(scores)]


def test_patience_counts_the_epochs_since_the_best_dev_score() -> None:
    args = argparse.Namespace(patience=2)
    assert not out_of_patience(args, history(0.5, 0.6, 0.55))
    assert out_of_patience(args, history(0.5, 0.6, 0.55, 0.6))  # a tie is not better
    assert not out_of_patience(argparse.Namespace(patience=None), history(0.9, 0.1, 0.1, 0.1))


def test_a_flag_added_later_leaves_older_checkpoints_resumable_at_its_default() -> None:
    old = argparse.Namespace(seed=1, lr=0.1)
    assert checkpoint.fingerprint(argparse.Namespace(seed=1, lr=0.1, distill_replaces_labels=False)) == (
        checkpoint.fingerprint(old)
    )
    assert checkpoint.fingerprint(argparse.Namespace(seed=1, lr=0.1, distill_replaces_labels=True)) != (
        checkpoint.fingerprint(old)
    )
    assert checkpoint.fingerprint(argparse.Namespace(seed=1, lr=0.1, patience=3)) == checkpoint.fingerprint(
        old
    )


def four_lists() -> tuple[argparse.Namespace, list[RankingList], torch.Tensor]:
    """The loss's flags, four lists of two candidates (the first right) and their served logits."""
    args = argparse.Namespace(tau=3.0, pointwise_weight=0.5)
    lists = [
        RankingList((Turn("user", "hi"),), (Candidate("a", 1), Candidate("b", 0)), group=str(i))
        for i in range(4)
    ]
    return args, lists, torch.tensor([[1.0, -1.0], [0.5, 0.2], [-1.0, 1.0], [0.0, 0.0]])


def test_taught_lists_learn_the_teacher_alone_and_the_others_their_labels_alone() -> None:
    args, lists, served = four_lists()
    distilled = torch.tensor(2.0)
    loss = taught_or_labelled(served, lists, args, distilled, [True, False, True, False])
    expected = 0.5 * distilled + 0.5 * label_loss(served[[1, 3]], [lists[1], lists[3]], args)
    assert torch.isclose(loss, expected)
    assert torch.isclose(taught_or_labelled(served, lists, args, distilled, [True] * 4), distilled)


def test_each_named_file_mixes_its_labels_and_the_teacher_at_its_own_share() -> None:
    from dialogue_ranker.training.distill import distillation_loss
    from dialogue_ranker.training.list_loss import mixed_by_share

    args, lists, served = four_lists()
    teacher = torch.tensor([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0], [-1.0, 1.0]])
    present = torch.ones(4, 2, dtype=torch.bool)
    shares = [0.8, 0.0, 0.8, 1.0]  # two lists of one file at 0.8, one unnamed, one taught alone

    def rows(flags: list[bool]) -> torch.Tensor:
        return torch.tensor(flags)

    distill = (served, teacher, present, None)  # no --keep-top
    loss = mixed_by_share(served, lists, args, distill, shares, rows)
    at = torch.tensor
    expected = (
        0.25 * label_loss(served[[1]], [lists[1]], args)
        + 0.5 * 0.2 * label_loss(served[[0, 2]], [lists[0], lists[2]], args)
        + 0.5 * 0.8 * distillation_loss(served, teacher, present, at([True, False, True, False]))
        + 0.25 * distillation_loss(served, teacher, present, at([False, False, False, True]))
    )
    assert torch.isclose(loss, expected)
    # Every list at share 0 is the label loss alone; at 1, the distillation alone.
    assert torch.isclose(mixed_by_share(served, lists, args, distill, [0.0] * 4, rows),
                         label_loss(served, lists, args))  # fmt: skip
    assert torch.isclose(
        mixed_by_share(served, lists, args, distill, [1.0] * 4, rows),
        distillation_loss(served, teacher, present, at([True] * 4)),
    )


def test_keep_top_counts_only_a_lists_highest_grade_right_as_p_at_1_does() -> None:
    from dialogue_ranker.training.distill import keep_top_loss
    from dialogue_ranker.training.list_loss import top_grade

    graded = RankingList(
        (Turn("user", "hi"),), (Candidate("a", 2), Candidate("b", 1), Candidate("c", 0)), group="g"
    )
    binary = RankingList((Turn("user", "hi"),), (Candidate("a", 0), Candidate("b", 1)), group="h")
    none = RankingList((Turn("user", "hi"),), (Candidate("a", 0), Candidate("b", 0)), group="i")
    best = top_grade([graded, binary, none])
    assert best.tolist() == [[True, False, False], [False, True, False], [False, False, False]]
    # The teachers rank the best reply first; the student has the acceptable one 0.2 behind it: an
    # acceptable reply on top is a P@1 lost, so the hinge pulls them apart.
    teacher = torch.tensor([[2.0, 1.0, -1.0]])
    student = torch.tensor([[1.0, 0.8, -3.0]])
    present = torch.ones(1, 3, dtype=torch.bool)
    assert torch.isclose(keep_top_loss(student, teacher, present, best[:1], margin=1.0), torch.tensor(0.8))


def test_distill_on_reads_a_share_per_file_and_refuses_one_outside_zero_to_one() -> None:
    from dialogue_ranker.training import train

    flags = ["--data", "a.jsonl", "--data", "b.jsonl", "--teacher", "m:1", "--out", "o"]
    plain = train.parse_args([*flags, "--distill-on", "a", "--distill-on", "b"])
    assert plain.distill_on == ["a", "b"] and plain.distill_shares == {}
    shared = train.parse_args(
        [*flags, "--distill-on", "a:0.85", "--distill-on", "b", "--distill-weight", "0.3"]
    )
    assert shared.distill_on == ["a", "b"] and shared.distill_shares == {"a": 0.85, "b": 0.3}
    for bad in (["--distill-on", "a:1.5"], ["--distill-on", "a:0.5", "--distill-replaces-labels"]):
        with pytest.raises(SystemExit):
            train.parse_args([*flags, *bad])


def test_max_steps_takes_zero_and_refuses_a_negative_or_fractional_count_naming_the_flag(capsys) -> None:
    from dialogue_ranker.training import train

    flags = ["--data", "a.jsonl", "--out", "o"]
    read_back = train.parse_args([*flags, "--init-bundle", "models/m", "--max-steps", "0"])
    assert read_back.max_steps == 0  # a bundle read back as a run
    with pytest.raises(SystemExit):  # no step from the fresh backbone is an untrained run
        train.parse_args([*flags, "--max-steps", "0"])
    assert "--max-steps 0 reads a bundle back as a run: it needs --init-bundle" in capsys.readouterr().err
    assert train.parse_args([*flags, "--max-steps", "300"]).max_steps == 300
    assert train.parse_args(flags).max_steps is None
    for bad in ("-1", "2.5", "many"):
        with pytest.raises(SystemExit):
            train.parse_args([*flags, "--max-steps", bad])
        assert "--max-steps takes a whole number of steps" in capsys.readouterr().err


def two_files() -> tuple[argparse.Namespace, list[RankingList], torch.Tensor]:
    """``four_lists`` read from two --data files: lists 0 and 1 from ``a``, 2 and 3 from ``b``."""
    from pathlib import Path

    from dialogue_ranker.training.train_lists import Source

    args, lists, served = four_lists()
    args.data = [Source("a", Path("d/a.jsonl"), 1.0), Source("b", Path("d/b.jsonl"), 1.0)]
    lists = [dataclasses.replace(x, origin=f"d/{'ab'[i // 2]}.jsonl:{i + 1}") for i, x in enumerate(lists)]
    return args, lists, served


def test_the_pointwise_loss_is_weighted_per_file_and_averaged_over_every_candidate() -> None:
    args, lists, served = two_files()
    plain = label_loss(served, lists, args)
    # Both files named at the global weight: the loss of a run without --pointwise-on.
    assert torch.isclose(
        label_loss(served, lists, argparse.Namespace(**vars(args), pointwise_on=[("a", 0.5), ("b", 0.5)])),
        plain,
    )
    listnet = label_loss(served, lists, argparse.Namespace(**{**vars(args), "pointwise_weight": 0.0}))
    targets = torch.tensor([[1.0, 0.0]] * 4)
    each = torch.nn.functional.binary_cross_entropy_with_logits(served, targets, reduction="none")
    # b's lists out of the BCE, a's at the global weight (a not named), the mean over all 8 candidates.
    off = argparse.Namespace(**vars(args), pointwise_on=[("b", 0.0)])
    assert torch.isclose(label_loss(served, lists, off), listnet + 0.5 * each[:2].sum() / 8)
    heavy = argparse.Namespace(**vars(args), pointwise_on=[("a", 2.0), ("b", 0.1)])
    expected = listnet + (2.0 * each[:2].sum() + 0.1 * each[2:].sum()) / 8
    assert torch.isclose(label_loss(served, lists, heavy), expected)


def test_pointwise_on_takes_a_named_file_and_a_weight_and_refuses_anything_else(capsys) -> None:
    from dialogue_ranker.data.ranking_data import DataError
    from dialogue_ranker.training import train

    flags = ["--data", "a.jsonl", "--data", "b.jsonl", "--out", "o"]
    args = train.parse_args([*flags, "--pointwise-on", "a:0.1", "--pointwise-on", "b:0"])
    assert args.pointwise_on == [("a", 0.1), ("b", 0.0)]
    for bad in ("a", "a:-1", "a:x", ":1", "a:nan"):
        with pytest.raises(SystemExit):
            train.parse_args([*flags, "--pointwise-on", bad])
        assert "--pointwise-on" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.parse_args([*flags, "--pointwise-on", "a:0.1", "--pointwise-on", "a:0.2"])
    assert "--pointwise-on: a is named twice" in capsys.readouterr().err
    with pytest.raises(DataError, match="--pointwise-on c: no --data file has that name"):
        train.check_file_names(train.parse_args([*flags, "--pointwise-on", "c:0.1"]))


def test_the_card_names_each_files_pointwise_weight_and_the_others() -> None:
    from dialogue_ranker.export.card_lines import stage_schedule

    config = {
        "epochs": 1,
        "max_steps": 300,
        "batch_lists": 8,
        "lr": 3e-5,
        "seed": 21,
        "pointwise_weight": 0.5,
    }
    weighted = stage_schedule(
        {**config, "pointwise_on": [["sgd", 0.1], ["persona", 0]]}
    )  # as config.json has it
    assert "the pointwise loss weighted per file (sgd 0.1; persona 0; others 0.5)" in weighted
    assert "pointwise" not in stage_schedule(config) and "pointwise" not in stage_schedule(
        {**config, "pointwise_on": []}
    )
