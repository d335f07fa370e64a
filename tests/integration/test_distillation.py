"""Distilling an output ensemble of runs into one ranker (training.train --teacher), on real runs."""

import json
import shutil

import numpy as np
import pytest

from dialogue_ranker.data.ranking_data import DataError

pytestmark = pytest.mark.integration

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

SMALL = ["--limit", "8", "--dev-lists", "4", "--batch-lists", "2", "--max-prefix-tokens", "96",
         "--max-candidate-tokens", "32"]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory, sugar_lists):
    """A two-step run: a finished run directory to teach or to start from."""
    from dialogue_ranker.training import train

    out = tmp_path_factory.mktemp("runs") / "run"
    train.main(["--data", str(sugar_lists), "--out", str(out), "--max-steps", "2", *SMALL])
    return out


def shifted_copy(run, out, shift: float):
    """``run`` with its head's bias moved by ``shift``: a teacher whose every logit is ``shift`` higher."""
    shutil.copytree(run, out)
    head = torch.load(out / "ranker" / "head.pt")
    head["bias"] += shift
    torch.save(head, out / "ranker" / "head.pt")
    return out


def test_the_distillation_loss_is_flat_where_the_student_says_what_the_teachers_say():
    from dialogue_ranker.training.distill import distillation_loss

    teacher = torch.tensor([[2.0, -1.0, 0.5, 0.0], [0.3, 1.2, 0.0, 0.0]])
    present = torch.tensor([[True, True, True, False], [True, True, False, False]])
    # Padding entries differ from the teacher's: they must not count.
    student = (teacher + torch.tensor([[0.0, 0.0, 0.0, 9.0], [0.0, 0.0, -4.0, 7.0]])).requires_grad_()
    distillation_loss(student, teacher, present).backward()
    assert student.grad.abs().max() < 1e-6

    off = (teacher + torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0]])).requires_grad_()
    distillation_loss(off, teacher, present).backward()
    # The gradient points back toward the teacher: down where the student is too high, up where too low.
    assert off.grad[0, 0] > 0 and off.grad[1, 1] < 0


def test_only_the_lists_taught_count_toward_the_distillation_loss():
    from dialogue_ranker.training.distill import distillation_loss

    teacher = torch.tensor([[2.0, -1.0, 0.5], [0.3, 1.2, -2.0]])
    present = torch.ones(2, 3, dtype=torch.bool)
    student = torch.zeros(2, 3, requires_grad=True)
    taught = torch.tensor([False, True])
    distillation_loss(student, teacher, present, taught).backward()
    # The untaught list gets no pull; the taught one gets what it gets alone.
    assert student.grad[0].abs().max() == 0 and student.grad[1].abs().max() > 0
    alone = torch.zeros(1, 3, requires_grad=True)
    distillation_loss(alone, teacher[1:], present[1:]).backward()
    torch.testing.assert_close(student.grad[1], alone.grad[0])
    # A batch with no taught list adds nothing, yet keeps the graph (the labels still train).
    none = distillation_loss(student, teacher, present, torch.tensor([False, False]))
    assert float(none) == 0.0 and none.requires_grad


def test_a_list_s_last_turn_row_is_taught_with_its_list(run, sugar_lists):
    import dataclasses
    import random

    from dialogue_ranker.data.ranking_data import Turn
    from dialogue_ranker.training import train
    from dialogue_ranker.training.list_loss import ViewLogits
    from dialogue_ranker.training.shared_prefix import load_run_for_scoring
    from dialogue_ranker.training.train_lists import load_splits

    args = train.parse_args(["--data", str(sugar_lists), "--out", "x", *SMALL])
    lists = load_splits(args)[0]["sugar"][:4]
    # SUGAR's requests are one turn: give two of them an earlier turn, so they get a last-turn row.
    earlier = Turn("user", "Hi there, I need a hand with something.")
    for i in (1, 2):
        lists[i] = dataclasses.replace(lists[i], context=(earlier, *lists[i].context))
    _, encoder = load_run_for_scoring(run)
    views = ViewLogits(encoder, lists, args, random.Random(0), last_turn=True)
    assert views.multi == [1, 2]
    flags = [True, False, True, False]
    assert views.per_row(flags).tolist() == flags + [False, True]


def test_a_shipped_bundle_teaches_and_a_distill_on_name_must_be_a_data_file(sugar_lists, model_dir, tmp_path):
    from dialogue_ranker.training import train
    from dialogue_ranker.training.distill import Ensemble, parse_teacher

    encoding = json.loads((model_dir / "metadata.json").read_text())["encoding"]
    budgets = ("max_prefix_tokens", "max_candidate_tokens")
    student = {"kind": "shared-prefix", **{k: encoding[k] for k in budgets}}
    ensemble = Ensemble([parse_teacher(f"{model_dir}:1")], student, torch.device("cpu"))
    assert ensemble.configs[0]["run"] == str(model_dir)
    assert ensemble.configs[0]["config"]["encoding"] == student
    with pytest.raises(DataError, match="--teacher .*encoded as"):
        Ensemble([parse_teacher(f"{model_dir}:1")], {**student, "max_prefix_tokens": 96}, torch.device("cpu"))
    base = ["--data", str(sugar_lists), "--out", str(tmp_path / "r"), "--max-steps", "1", *SMALL]
    with pytest.raises(DataError, match="--distill-on topical-chat: no --data file has that name"):
        train.main([*base, "--teacher", f"{model_dir}:1", "--distill-on", "topical-chat"])
    with pytest.raises(DataError, match="--distill-on chooses where --teacher distils"):
        train.main([*base, "--distill-on", "sugar"])


def test_the_ensemble_target_is_the_teachers_logits_weighted_on_the_same_sequences(
    run, sugar_lists, tmp_path
):
    from dialogue_ranker.training import train
    from dialogue_ranker.training.distill import Ensemble, parse_teacher
    from dialogue_ranker.training.list_loss import ListBatch
    from dialogue_ranker.training.shared_prefix import load_run_for_scoring
    from dialogue_ranker.training.train_lists import encode, load_splits

    other = shifted_copy(run, tmp_path / "shifted", 2.0)
    config = json.loads((run / "config.json").read_text())
    ensemble = Ensemble(
        [parse_teacher(f"{run}:3"), parse_teacher(f"{other}:1")], config["encoding"], torch.device("cpu")
    )
    assert [c["weight"] for c in ensemble.configs] == [0.75, 0.25]
    model, encoder = load_run_for_scoring(run)
    lists = load_splits(train.parse_args(["--data", str(sugar_lists), "--out", "x", *SMALL]))[0]["sugar"][:3]
    batch = ListBatch(encoder, [encode(encoder, x) for x in lists])
    with torch.no_grad():
        alone = batch.logits(model)
        target = ensemble.logits(batch.logits)
    present = alone != 0
    # 0.75 x the run + 0.25 x (the run + 2): the run's logits plus 0.5.
    torch.testing.assert_close(target[present], alone[present] + 0.5, atol=1e-4, rtol=1e-4)


def test_a_student_moves_toward_its_teachers_and_the_run_records_them(run, sugar_lists, tmp_path):
    from dialogue_ranker.training import train
    from dialogue_ranker.training.evaluate_run import RunScorer
    from dialogue_ranker.training.train_lists import load_splits

    teacher = shifted_copy(run, tmp_path / "teacher", 3.0)
    lists = load_splits(train.parse_args(["--data", str(sugar_lists), "--out", "x", *SMALL]))[1]["sugar"]

    def mean_logit(path):
        return float(np.mean(np.concatenate(RunScorer(path).logits(lists))))

    before = mean_logit(run)
    out = tmp_path / "student"
    result = train.main(
        ["--data", str(sugar_lists), "--init", str(run), "--teacher", f"{teacher}:1", "--distill-weight", "1",
         "--lr", "1e-3", "--max-steps", "3", "--out", str(out), *SMALL]
    )  # fmt: skip
    assert result["steps"] == 3
    # Every teacher logit is 3 above the student's start: with the labels weighed at 0, it rises.
    assert mean_logit(out) > before + 0.3
    config = json.loads((out / "config.json").read_text())
    assert [(t["run"], t["weight"]) for t in config["teacher"]] == [(str(teacher), 1.0)]
    assert config["distill_weight"] == 1.0


def test_a_teacher_that_reads_other_sequences_is_refused_by_name(run, tmp_path):
    from dialogue_ranker.training.distill import Ensemble, parse_teacher

    with pytest.raises(DataError, match="--teacher .*encoded as"):
        Ensemble([parse_teacher(f"{run}:1")], {"kind": "shared-prefix", "max_prefix_tokens": 256,
                 "max_candidate_tokens": 64}, torch.device("cpu"))  # fmt: skip
    with pytest.raises(DataError, match="not a finished run"):
        Ensemble([parse_teacher(f"{tmp_path}:1")], {}, torch.device("cpu"))


@pytest.mark.parametrize("text", ["run", "run:0", "run:-1", "run:x", ":1"])
def test_a_teacher_needs_a_run_and_a_positive_weight(text):
    import argparse

    from dialogue_ranker.training.distill import parse_teacher

    with pytest.raises(argparse.ArgumentTypeError, match="--teacher"):
        parse_teacher(text)


def test_max_seconds_ends_training_early_and_stop_at_replays_it(run, sugar_lists, tmp_path):
    from dialogue_ranker.training import train

    result = train.main(
        ["--data", str(sugar_lists), "--init", str(run), "--max-seconds", "0", "--max-steps", "3",
         "--out", str(tmp_path / "cut"), *SMALL]
    )  # fmt: skip
    assert (result["steps"], result["planned_steps"]) == (0, 3)
    assert (tmp_path / "cut" / "ranker" / "head.pt").is_file()
    # --stop-at replays such a run: the same schedule, ended at the step it reached.
    result = train.main(
        ["--data", str(sugar_lists), "--init", str(run), "--stop-at", "1", "--max-steps", "3",
         "--out", str(tmp_path / "replayed"), *SMALL]
    )  # fmt: skip
    assert (result["steps"], result["planned_steps"]) == (1, 3)
    from dialogue_ranker.export.card_lines import stage_schedule

    config = json.loads((tmp_path / "replayed" / "config.json").read_text())
    assert stage_schedule(config).startswith("the first 1 of the 3 steps of 3 steps,")


def test_the_model_card_lists_the_soup_members_then_the_distilled_stage(run, sugar_lists, tmp_path):
    from dialogue_ranker.export.card_lines import distillation_line, interpolation_line, schedule_lines
    from dialogue_ranker.training import interpolate, train

    other = shifted_copy(run, tmp_path / "other", 1.0)
    soup = tmp_path / "soup"
    interpolate.main(["--run", str(run), "--with", f"{other}:0.5", "--alpha", "1", "--out", str(soup)])
    out = tmp_path / "student"
    train.main(
        ["--data", str(sugar_lists), "--init", str(soup), "--teacher", f"{run}:0.5",
         "--teacher", f"{other}:0.5", "--distill-weight", "0.7", "--max-steps", "1",
         "--out", str(out), *SMALL]
    )  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    stages = [line.split(":")[0] for line in schedule_lines(config).splitlines()]
    assert stages == ["- stage A1", "- stage B1", "- stage S1"]
    line = distillation_line(config)
    assert "0.5 x run A's + 0.5 x run B's logits" in line and "weight 0.7" in line
    # The soup is described, but calibration was fitted after the last stage, not on the soup.
    assert "0.5 x run A + 0.5 x run B" in interpolation_line(config)
    assert "fitted on the soup" not in interpolation_line(config)
    assert distillation_line(json.loads((soup / "config.json").read_text())) == ""


def test_a_teacher_share_per_file_trains_and_the_run_records_it(run, sugar_lists, tmp_path):
    from dialogue_ranker.training import train

    out = tmp_path / "shared"
    result = train.main(
        ["--data", str(sugar_lists), "--teacher", f"{run}:1", "--distill-on", "sugar:0.85",
         "--max-steps", "1", "--out", str(out), *SMALL]
    )  # fmt: skip
    assert result["steps"] == 1
    config = json.loads((out / "config.json").read_text())
    assert config["distill_on"] == ["sugar"] and config["distill_shares"] == {"sugar": 0.85}


def test_keep_top_holds_the_teachers_right_top_ahead_of_the_best_wrong_candidate():
    from dialogue_ranker.training.distill import KeepTop, distillation_loss, keep_top_loss

    # List 0: the teachers' top (candidate 0) is right, the student has it 0.5 behind the best wrong
    # one (candidate 2). List 1: the teachers' top is wrong, so nothing is kept. List 2: two right
    # candidates, the student's second right one is ahead of the top, but only wrong ones count.
    teacher = torch.tensor([[2.0, 1.9, 0.0], [1.0, 0.0, -1.0], [3.0, 1.0, -2.0]])
    right = torch.tensor([[True, False, False], [False, True, False], [True, True, False]])
    present = torch.ones(3, 3, dtype=torch.bool)
    student = torch.tensor([[0.0, -1.0, 0.5], [2.0, -3.0, 0.0], [1.0, 4.0, 0.5]], requires_grad=True)
    loss = keep_top_loss(student, teacher, present, right, margin=1.0)
    # List 0: relu(1 - (0 - 0.5)) = 1.5; list 1: not held; list 2: relu(1 - (1 - 0.5)) = 0.5.
    assert torch.isclose(loss, torch.tensor((1.5 + 0.0 + 0.5) / 3))
    loss.backward()
    assert student.grad[0, 0] < 0 and student.grad[0, 2] > 0 and student.grad[0, 1] == 0
    assert student.grad[1].abs().max() == 0 and student.grad[2, 1] == 0
    # A margin already held adds nothing; off (0), the distillation loss is as it was.
    held = torch.tensor([[3.0, 0.0, 1.0], [0.0, 0.0, 0.0], [5.0, 0.0, 1.0]])
    assert float(keep_top_loss(held, teacher, present, right, margin=1.0)) == 0.0
    plain = distillation_loss(student, teacher, present)
    assert torch.isclose(distillation_loss(student, teacher, present, keep=KeepTop(right, 0.0)), plain)
    kept = distillation_loss(student, teacher, present, keep=KeepTop(right, 1.0))
    assert torch.isclose(kept, plain + loss)
    # Only the taught lists' rows are kept.
    taught = torch.tensor([False, True, True])
    part = distillation_loss(student, teacher, present, taught, KeepTop(right, 1.0))
    base = distillation_loss(student, teacher, present, taught)
    assert torch.isclose(part - base, torch.tensor(0.5 / 2))


def test_keep_top_trains_with_a_teacher_and_is_refused_without_one(run, sugar_lists, tmp_path):
    from dialogue_ranker.training import train

    with pytest.raises(DataError, match="--keep-top"):
        train.main(["--data", str(sugar_lists), "--keep-top", "1", "--max-steps", "1",
                    "--out", str(tmp_path / "alone"), *SMALL])  # fmt: skip
    with pytest.raises(SystemExit):
        train.parse_args(["--data", str(sugar_lists), "--keep-top", "-1", "--out", str(tmp_path / "x")])
    out = tmp_path / "kept"
    result = train.main(
        ["--data", str(sugar_lists), "--teacher", f"{run}:1", "--keep-top", "1.5", "--max-steps", "1",
         "--out", str(out), *SMALL]
    )  # fmt: skip
    assert result["steps"] == 1
    config = json.loads((out / "config.json").read_text())
    assert config["keep_top"] == 1.5


def test_the_teachers_score_only_the_lists_they_teach(run, sugar_lists):
    """A batch none of whose lists is taught runs no teacher; a mixed one scores the taught rows alone."""
    from dialogue_ranker.training import train
    from dialogue_ranker.training.distill import Ensemble, parse_teacher
    from dialogue_ranker.training.list_loss import ListBatch, teacher_targets
    from dialogue_ranker.training.shared_prefix import load_run_for_scoring
    from dialogue_ranker.training.train_lists import encode, load_splits

    config = json.loads((run / "config.json").read_text())
    ensemble = Ensemble([parse_teacher(f"{run}:1")], config["encoding"], torch.device("cpu"))
    read: list[int] = []
    teacher, _ = ensemble.members[0]
    real_forward = teacher.forward

    def counted(**feeds):
        read.append(int(feeds["input_ids"].shape[0]))
        return real_forward(**feeds)

    teacher.forward = counted
    model, encoder = load_run_for_scoring(run)
    lists = load_splits(train.parse_args(["--data", str(sugar_lists), "--out", "x", *SMALL]))[0]["sugar"][:4]
    batch = ListBatch(encoder, [encode(encoder, x) for x in lists])
    with torch.no_grad():
        logits = batch.logits(model)
        every = teacher_targets(ensemble, batch, torch.ones(4, dtype=torch.bool), logits)
        assert read == [len(batch.flat)]
        none = teacher_targets(ensemble, batch, torch.zeros(4, dtype=torch.bool), logits)
        assert read == [len(batch.flat)] and not none.any()
        rows = torch.tensor([False, True, False, True])
        some = teacher_targets(ensemble, batch, rows, logits)
    taught_sequences = sum(len(batch.sequences[r]) for r in (1, 3))
    assert read[1:] == [taught_sequences]
    assert not some[~rows].any()
    # The taught rows, padded on their own, score as they do in the whole batch.
    torch.testing.assert_close(some[rows], every[rows], atol=1e-4, rtol=1e-4)
