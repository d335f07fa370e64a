"""``benchmarks/bundle_speed.py`` on the shipped bundle against itself, on a few made-up lists."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import bundle_speed
from training.domain_eval import group_split

pytestmark = pytest.mark.integration


def _write_lists(path: Path, *, statements: int, candidates: int) -> None:
    groups = [g for g in (f"g{i}" for i in range(400)) if group_split(g) == "dev"][:4]
    lines = [
        {
            "group": group,
            "context": [{"speaker": "user", "text": f"Could you help me with task {n}?"}],
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
