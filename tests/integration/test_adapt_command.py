"""``ranker adapt`` end to end on a real model: a slice of Synthetic-Persona-Chat, a kill mid-training.

Thirty conversations converted (``ranker convert persona-chat``, no retriever), SUGAR's lists as
the replay and a one-set regression suite; two training steps from the shipped bundle with the
``both`` guard (the base as teacher), int8 dynamic as the export's candidate, ONNX Runtime's map
only. The first command is stopped after preparing; a kill after the first training step is
simulated with ``ranker train --stop-after-steps`` on the command line the run records; ``--resume``
then continues training from its checkpoint and runs the other phases. A few minutes on 2 busy cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import persona_slice_lists

pytestmark = [pytest.mark.integration, pytest.mark.slow]

torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

from dialogue_ranker.adapt import cli  # noqa: E402
from dialogue_ranker.adapt.args import STOPPED_STATUS  # noqa: E402
from dialogue_ranker.adapt.layout import Layout  # noqa: E402
from dialogue_ranker.adapt.state import State  # noqa: E402
from dialogue_ranker.adapt.train_phase import train_argv  # noqa: E402
from dialogue_ranker.data.ranking_data import read_lists  # noqa: E402
from dialogue_ranker.evaluation.domains import ListScorer  # noqa: E402
from dialogue_ranker.serving.model_bundle import load_bundle  # noqa: E402
from dialogue_ranker.training import checkpoint, train  # noqa: E402

CONVERSATIONS = 30


@pytest.fixture(scope="module")
def persona_lists(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """A slice of Synthetic-Persona-Chat's test conversations as ranking lists (a team's own lists)."""
    return persona_slice_lists(
        shared_data, tmp_path_factory.mktemp("persona"), CONVERSATIONS, "earlier:1,later:2,random:3"
    )


def adapt_flags(lists: Path, sugar: Path, suite: Path, out: Path) -> list[str]:
    return [
        "--lists", str(lists), "--out", str(out), "--minutes", "3", "--limit", "6", "--max-steps", "2",
        "--replay", f"{sugar}:0.5", "--guard", "both", "--regression-suite", str(suite),
        "--suite-root", str(suite.parent), "--variants", "int8_dynamic", "--runtimes", "onnx",
    ]  # fmt: skip


def test_adapt_resumes_after_a_kill_and_writes_a_bundle_and_a_report(
    tmp_path: Path, persona_lists: Path, sugar_lists: Path, model_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(
        f'[[lists]]\nname = "sugar"\nfile = "{sugar_lists}"\nsplit = "test"\nmax_lists = 6\n'
        'metrics = ["precision_at_1", "ece"]\n'
    )
    out = tmp_path / "adapted"
    flags = [*adapt_flags(persona_lists, sugar_lists, suite, out), "--model", str(model_dir)]
    with pytest.raises(SystemExit) as stopped:
        cli.main([*flags, "--stop-after", "prepare"])
    assert stopped.value.code == STOPPED_STATUS
    layout = Layout(out)
    state = State.open(out, vars(cli.parse_args(flags, None)), resume=True)
    assert state.done("prepare") and not state.done("train")
    counts = state.facts("prepare")["split"]["counts"]
    assert sum(c["groups"] for c in counts.values()) == CONVERSATIONS

    # A kill in the middle of training: the run's first step done and checkpointed, nothing after.
    argv = train_argv(cli.parse_args(flags, None), layout, state.facts("prepare"))
    assert f"--init-bundle {model_dir}" in " ".join(argv) and "--last-turn-weight 0.5" in " ".join(argv)
    with pytest.raises(SystemExit):
        train.main([*argv, "--stop-after-steps", "1"])
    state.data["train_argv"] = argv
    state.save()
    assert [p.name for p in checkpoint.checkpoints(layout.run)] == ["step-00000001.pt"]
    capsys.readouterr()

    data = cli.main([*flags, "--resume"])
    printed = capsys.readouterr()
    assert "train: continuing from" in printed.out and "step-00000001.pt" in printed.out
    assert "prepare finished before" in printed.err
    assert list(data["phases"]) == ["prepare", "train", "export", "calibrate", "evaluate", "report"]
    assert data["phases"]["train"]["steps"] == 2

    bundle, base = load_bundle(layout.bundle), load_bundle(model_dir)
    # The views' weights are chosen on the team's dev lists: the bundle serves the grid's best point.
    fit = data["phases"]["export"]["views_fit"]
    assert fit["given"] == {"last_turn_weight": base.views.last_turn, "prior_weight": base.views.prior}
    served = {"last_turn_weight": bundle.views.last_turn, "prior_weight": bundle.views.prior}
    assert fit["chosen"] == served and fit["on"] == ["team"]
    # ... among the points that keep the replay's dev P@1 within the drop of the given weights'.
    assert fit["hold"]["files"] == [r["name"] for r in state.facts("prepare")["replay"]] != []
    best = max(r["precision_at_1"] for r in fit["grid"] if r["held"])
    assert [r["precision_at_1"] for r in fit["grid"] if {k: r[k] for k in served} == served] == [best]
    lists = read_lists(layout.team_test)[:2]
    probabilities = ListScorer(bundle).probabilities(lists)
    assert all(
        np.all((p >= 0) & (p <= 1)) and len(p) == len(x.candidates)
        for p, x in zip(probabilities, lists, strict=True)
    )
    metadata = json.loads((layout.bundle / "metadata.json").read_text())
    assert metadata["calibrated_by"]["command"] == "ranker adapt"
    lineage = metadata["adapted_by"]
    assert lineage["base"]["id"] == base.model_id and len(lineage["base"]["sha256"]) == 64
    assert lineage["lists"][0]["file"] == "persona-chat.jsonl" and lineage["guard"]["kind"] == "both"
    assert lineage["training"]["steps"] == 2 and (layout.bundle / "retriever" / "retriever.json").is_file()
    assert "## Lineage" in (layout.bundle / "MODEL_CARD.md").read_text()
    assert (
        lineage["views_fitted"] == fit
        and "Context views chosen on" in (layout.bundle / "MODEL_CARD.md").read_text()
    )

    report = layout.report_md.read_text()
    assert f"base `{base.model_id}`" in report and f"adapted `{bundle.model_id}`" in report
    assert "| 95% interval |" in report and "| team test | precision_at_1 |" in report
    assert "| sugar | precision_at_1 |" in report and "## Time per phase" in report
    assert f"The weights were chosen on {fit['lists']} of the team's dev lists by P@1" in report
    assert layout.report_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_step_probes_time_real_steps_of_the_team_and_the_replay_and_leave_nothing_behind(
    persona_lists: Path, sugar_lists: Path, tmp_path: Path
) -> None:
    from dialogue_ranker.adapt.args import build_parser
    from dialogue_ranker.adapt.guard import replay_of, train_flags
    from dialogue_ranker.adapt.prepare import base_facts
    from dialogue_ranker.adapt.step_probe import PLAN_OVER_PROBE, PROBE_STEPS, seconds_per_step
    from dialogue_ranker.adapt.train_phase import base_flags, team_flags
    from dialogue_ranker.serving.settings import DEFAULT_MODEL_DIR

    # adapt's own parser, so the probes get every flag training gets, defaults included
    args = build_parser(None).parse_args(
        ["--lists", str(persona_lists), "--out", str(tmp_path / "out"), "--precision", "fp32"]
    )
    base = base_facts(DEFAULT_MODEL_DIR)
    flags = base_flags(args, base)
    replay = [replay_of(sugar_lists, 0.25)]
    probe = seconds_per_step(
        [*flags, *team_flags(args, persona_lists)],
        persona_lists,
        tmp_path / "probe",
        replay=[(sugar_lists, 0.25)],
        replay_flags=[*flags, *train_flags("both", base["path"], replay)],
    )
    team, whole = probe["measured_seconds_per_step"], probe["replay_seconds_per_step"]
    assert team > 0 and whole > 0
    assert probe["precision"] == "fp32" and "precision_seconds" not in probe  # given, so not timed
    # the planned rate: a replay list per four of the team's, aimed high (--replan cuts it to fit)
    planned = (team + 0.25 * whole) / 1.25 * PLAN_OVER_PROBE
    assert probe["seconds_per_step"] == pytest.approx(planned, abs=2e-3)
    # the probes' wall time holds their loading and every step they took, the first included
    assert probe["probe_seconds"] > (team + whole) * (PROBE_STEPS - 1)
    assert not (tmp_path / "probe").exists()
