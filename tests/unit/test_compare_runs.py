"""evaluation.compare_runs: designs grouped from run directories, seeds averaged, gaps in standard errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogue_ranker.evaluation.compare_runs import main, standard_error


def run_dir(root: Path, name: str, kind: str, p_at_1: float, ndcg: float, head: str | None = None) -> Path:
    run = root / name
    run.mkdir()
    config = {"encoding": {"kind": kind}} | ({"head": head} if head else {})
    (run / "config.json").write_text(json.dumps(config))
    dev = {"sugar": {"lists": 200, "precision_at_1": p_at_1, "ndcg_at_3": ndcg}}
    (run / "metrics.json").write_text(json.dumps({"dev": dev}))
    return run


def test_designs_are_averaged_over_seeds_and_compared_in_standard_errors(tmp_path: Path) -> None:
    runs = [
        run_dir(tmp_path, "a1", "shared-prefix", 0.50, 0.80),
        run_dir(tmp_path, "b1", "pair-design-run", 0.60, 0.90),
        run_dir(tmp_path, "a2", "shared-prefix", 0.54, 0.84),
        run_dir(tmp_path, "b2", "pair-design-run", 0.62, 0.88),
    ]
    lines = main([str(r) for r in runs])
    (shared,) = [line for line in lines if line.startswith("| shared-prefix |")]
    assert "| 2 | 0.500, 0.540 | 0.520 |" in shared and "| 0.820 |" in shared
    (pair,) = [line for line in lines if line.startswith("| pair-design-run |")]
    assert "| 0.610 |" in pair and "| 0.890 |" in pair
    (gap,) = [line for line in lines if line.startswith("- sugar:")]
    se = standard_error(0.61, 200)
    assert f"P@1 -0.090 ({-0.09 / se:+.1f} standard errors)" in gap and "nDCG@3 -0.070" in gap
    assert standard_error(0.5, 100) == pytest.approx(0.05)


def test_a_run_s_token_head_is_part_of_its_design(tmp_path: Path) -> None:
    runs = [
        run_dir(tmp_path, "old", "shared-prefix", 0.50, 0.80),
        run_dir(tmp_path, "linear", "shared-prefix", 0.52, 0.82, head="linear"),
        run_dir(tmp_path, "cosine", "shared-prefix", 0.66, 0.90, head="cosine"),
    ]
    lines = main([str(r) for r in runs])
    (linear,) = [line for line in lines if line.startswith("| shared-prefix |")]
    assert "| 2 | 0.500, 0.520 | 0.510 |" in linear
    (cosine,) = [line for line in lines if line.startswith("| shared-prefix, cosine head |")]
    assert "| 1 | 0.660 | 0.660 |" in cosine


def test_an_unfinished_run_is_named_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = run_dir(tmp_path, "a1", "shared-prefix", 0.5, 0.8)
    training = tmp_path / "b1"
    training.mkdir()  # a run still training has no config.json yet
    with pytest.raises(SystemExit) as exit_:
        main([str(done), str(training)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    named = err.split("not a finished training run")[-1]
    assert str(training) in named and str(done) not in named
