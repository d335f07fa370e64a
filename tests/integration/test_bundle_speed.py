"""``benchmarks/bundle_speed.py`` on the shipped bundle against itself, on a few made-up lists."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import bundle_speed
from dialogue_ranker.evaluation.domains import group_split

pytestmark = pytest.mark.integration


def _write_lists(path: Path, *, statements: int, candidates: int, turns: int = 1) -> None:
    groups = [g for g in (f"g{i}" for i in range(400)) if group_split(g) == "dev"][:4]
    lines = [
        {
            "group": group,
            "context": [
                {
                    "speaker": "user" if t % 2 == 0 else "bot",
                    "text": f"Turn {t}: could you help with task {n}?",
                }
                for t in range(turns)
            ],
            "situations": [f"Statement {k} about the room." for k in range(statements)],
            "candidates": [{"text": f"Reply {k}.", "label": int(k == 0)} for k in range(candidates)],
        }
        for n, group in enumerate(groups)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_bundles_are_timed_on_the_same_requests_with_their_ratio_to_the_first(model_dir, tmp_path, capsys):
    _write_lists(tmp_path / "sugar.jsonl", statements=8, candidates=3)
    _write_lists(tmp_path / "topical-chat.jsonl", statements=0, candidates=10)
    copy = shutil.copytree(model_dir, tmp_path / "copy")
    results = bundle_speed.main(
        [str(model_dir), str(copy), "--data", str(tmp_path), "--requests", "3", "--rounds", "1"]
    )
    assert set(results) == {"situated, 3 candidates", "open chat, 10 candidates"}
    for figures in results.values():
        assert list(figures) == [str(model_dir), str(copy)]
        assert all(value > 0 for value in figures.values())
    out = capsys.readouterr().out
    assert "(3 dev requests, median of 1 rounds)" in out and "(1.00x)" in out


def test_a_last_turn_view_bundle_is_timed_with_and_without_its_second_view(model_dir, tmp_path, capsys):
    if json.loads((model_dir / "metadata.json").read_text()).get("views", {}).get("last_turn_weight", 0) <= 0:
        pytest.skip(f"{model_dir} has no last-turn view")
    _write_lists(tmp_path / "sugar.jsonl", statements=8, candidates=3)
    _write_lists(tmp_path / "topical-chat.jsonl", statements=0, candidates=10, turns=3)
    results = bundle_speed.main(
        [str(model_dir), "--without-views", "--data", str(tmp_path), "--requests", "3", "--rounds", "1"]
    )
    for figures in results.values():
        assert list(figures) == [str(model_dir), f"{model_dir}, one view"]
        assert all(value > 0 for value in figures.values())


def test_each_bundle_is_timed_on_each_runtime_named(model_dir, tmp_path):
    pytest.importorskip("openvino")
    _write_lists(tmp_path / "sugar.jsonl", statements=8, candidates=3)
    _write_lists(tmp_path / "topical-chat.jsonl", statements=0, candidates=10)
    results = bundle_speed.main(
        [str(model_dir), "--backends", "onnx,openvino", "--precision", "f32", "--data", str(tmp_path),
         "--requests", "3", "--rounds", "1"]
    )  # fmt: skip
    for figures in results.values():
        assert list(figures) == [f"{model_dir} (onnx)", f"{model_dir} (openvino)"]
        assert all(value > 0 for value in figures.values())
