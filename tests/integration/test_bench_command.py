"""`ranker bench`: a real run, short, on two real services and the given requests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from dialogue_ranker.bench.cli import DEFAULT, ONNX, merged, percentile_ms
from dialogue_ranker.bench.load import Load
from dialogue_ranker.bench.workload import made_up_requests

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_ranker_bench_compares_the_default_service_with_onnx_and_says_what_auto_chose(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(r) + "\n" for r in made_up_requests(8)))
    out = tmp_path / "bench.md"
    result = subprocess.run(
        [sys.executable, "-m", "dialogue_ranker.cli", "bench", "--clients", "2", "--seconds", "1",
         "--rounds", "1", "--no-cross-encoder", "--requests", str(requests), "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    text = out.read_text()
    rows = {line.split(" | ")[0].lstrip("| ") for line in text.splitlines() if line.startswith("| service")}
    assert rows == {DEFAULT, ONNX}
    onnx_row = next(line for line in text.splitlines() if line.startswith(f"| {ONNX} | 2 |"))
    assert onnx_row.endswith("| 0 | 1.00x |"), "no failed request; onnx is the ratios' base"
    assert "`auto` chose **" in text and "at start, onnx/" in text
    assert "CPU: " in text and "left out by --no-cross-encoder" in text


def test_rounds_merge_into_one_measurement_and_percentiles_read_milliseconds() -> None:
    rounds = [Load(4, 2.0, 100, (0.010, 0.030), 0), Load(4, 3.0, 200, (0.020,), 1)]
    whole = merged(rounds)
    assert (whole.seconds, whole.candidates, whole.failed) == (5.0, 300, 1)
    assert whole.candidates_per_s == pytest.approx(60.0)
    assert percentile_ms(whole.latencies_s, 50) == pytest.approx(20.0)
