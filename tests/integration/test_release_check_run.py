"""``ranker release-check`` for real: the shipped bundle against itself passes, and against a copy
whose probabilities are over-confident it is refused on calibration alone, by name.

A small frozen suite: SUGAR test lists, six of the hand-made requests (read from their one file)
and a dev bank of SUGAR replies; the real bundle scores each as the service does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dialogue_ranker.evaluation import release_check
from dialogue_ranker.evaluation.handmade import DEFAULT_FILE

pytestmark = pytest.mark.integration


def small_suite(tmp_path: Path, sugar: Path, *, with_others: bool = True) -> Path:
    handmade = json.loads(DEFAULT_FILE.read_text())
    first = handmade["groups"][0]
    (tmp_path / "handmade.json").write_text(json.dumps({"groups": [{**first, "cases": first["cases"][:6]}]}))
    text = f'resamples = 300\n\n[[lists]]\nname = "sugar"\nfile = "{sugar}"\nmax_lists = 30\n'
    if with_others:
        text += (
            f'\n[[handmade]]\nname = "hand-made"\nfile = "{tmp_path / "handmade.json"}"\n'
            f'\n[[bank]]\nname = "bank"\nfile = "{sugar}"\nmax_lists = 30\nsample = 6\nk = 10\n'
        )
    path = tmp_path / ("suite.toml" if with_others else "lists-only.toml")
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("runtime", "named", "tags"),
    [
        ([], "Scored by ONNX Runtime;", [""]),
        (
            ["--backend", "onnx,openvino", "--precision", "f32"],
            "Scored by ONNX Runtime and OpenVINO f32 (each bundle with its own map for each)",
            [" (onnx)", " (openvino f32)"],
        ),
    ],
)
def test_the_shipped_bundle_against_itself_passes_every_set(
    tmp_path, model_dir, sugar_lists, runtime, named, tags
):
    """On one runtime or several, every row gated on each: OpenVINO f32 does int8 arithmetic otherwise."""
    if runtime:
        pytest.importorskip("openvino", reason="OpenVINO is not installed")
    out, suite = tmp_path / "release-check.md", small_suite(tmp_path, sugar_lists)
    status = release_check.main(
        [
            "--candidate",
            str(model_dir),
            "--shipped",
            str(model_dir),
            "--suite",
            str(suite),
            "--out-md",
            str(out),
        ]
        + runtime
    )
    assert status == 0
    table = out.read_text()
    assert "**Passed**" in table and "300 resamples, seed 0" in table and named in table
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][
        1:
    ]
    for tag in tags:
        assert {(r[0].lstrip("| "), r[1]) for r in rows} >= {
            (f"sugar{tag}", "precision_at_1"),
            (f"sugar{tag}", "ece (lower is better)"),
            (f"hand-made{tag}", "ranked as a person would"),
            (f"bank{tag}", "bank R@1"),
        }
    assert all(r[5] == "+0.000" and r[7].strip(" |") == "same" for r in rows), rows


def test_a_backend_list_names_known_runtimes_once() -> None:
    import argparse

    from dialogue_ranker.evaluation.scoring import backend_list

    assert backend_list("onnx, openvino,onnx") == ["onnx", "openvino"]
    with pytest.raises(argparse.ArgumentTypeError, match="onnx, openvino"):
        backend_list("onnx,tensorrt")


def test_a_candidate_with_over_confident_probabilities_is_refused_on_calibration_by_name(
    tmp_path, model_dir, sugar_lists, capsys
):
    candidate = tmp_path / "candidate"
    shutil.copytree(model_dir, candidate, ignore=shutil.ignore_patterns("model.onnx", "retriever"))
    (candidate / "model.onnx").symlink_to(model_dir.resolve() / "model.onnx")
    meta = json.loads((candidate / "metadata.json").read_text())
    for calibration in (meta["calibration"], meta["calibration_by_runtime"]["onnx"]["calibration"]):
        calibration["a"] *= 4  # the same order, probabilities pushed toward 0 and 1
    (candidate / "metadata.json").write_text(json.dumps(meta))
    suite = small_suite(tmp_path, sugar_lists, with_others=False)
    with pytest.raises(SystemExit) as refused:
        release_check.main(
            ["--candidate", str(candidate), "--shipped", str(model_dir), "--suite", str(suite)]
        )
    assert refused.value.code == 1
    printed = capsys.readouterr().out
    worse = [line for line in printed.splitlines() if "**worse**" in line]
    assert any(line.startswith("| sugar | ece ") for line in worse), printed
    assert not any("precision_at_1" in line or "ndcg_at_3" in line for line in worse)  # the order is the same
    assert "**Refused**" in printed and "sugar / ece" in printed


def test_a_bundle_without_the_retriever_a_bank_set_needs_is_refused_before_anything_is_scored(
    tmp_path, model_dir, sugar_lists, capsys
):
    candidate = tmp_path / "candidate"
    shutil.copytree(model_dir, candidate, ignore=shutil.ignore_patterns("model.onnx", "retriever"))
    (candidate / "model.onnx").symlink_to(model_dir.resolve() / "model.onnx")
    suite = small_suite(tmp_path, sugar_lists)
    with pytest.raises(SystemExit) as refused:
        release_check.main(
            ["--candidate", str(candidate), "--shipped", str(model_dir), "--suite", str(suite)]
        )
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert f"--candidate {candidate} has no retriever" in err and "bank set(s) bank" in err
    assert "scored in" not in err  # refused before the first set was scored
