"""``benchmarks/bench_banks.py`` at a smoke size: every part runs and reports what it measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from bank_helpers import require_retriever

from benchmarks import bench_banks

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_bank_benchmark_runs_at_a_smoke_size(model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_retriever()
    results = bench_banks.main([
        "--model", str(model_dir), "--backend", "onnx", "--bank-size", "120", "--search-size", "3000",
        "--search-queries", "3", "--request-bank", "120", "--retrieve-k", "4", "--requests", "2",
    ])  # fmt: skip
    startup = {row["start"]: row for row in results["startup"]}
    assert startup["no bank"]["from_cache"] is None
    assert startup["cold (computed)"]["from_cache"] is False
    assert startup["from the cache"]["from_cache"] is True
    assert startup["from the cache"]["vectors_mb"] == pytest.approx(120 * 388 / 1e6)
    assert results["search"]["rows"] == 3000 and results["search"]["search_ms"] > 0
    assert results["requests"]["bank_ms"] > 0 and results["requests"]["explicit_ms"] > 0
    printed = capsys.readouterr().out
    assert "start-up with a 120-response bank" in printed and "ratio" in printed


def test_the_synthetic_bank_holds_distinct_replies() -> None:
    texts = bench_banks.synthetic_bank(100_000)
    assert len(set(texts)) == 100_000 and all(t.endswith((".", "?", ")")) for t in texts[:100])
